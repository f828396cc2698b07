package breaker_test

import (
	"context"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
)

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	breakertest.Run(t, func(*testing.T) breaker.Store { return breaker.NewMemoryStore() })
}

func TestClassify(t *testing.T) {
	t.Parallel()
	s := breakertest.Settings()
	s.SlowCall = time.Second
	tests := []struct {
		r    breaker.Report
		want breaker.Verdict
	}{
		{breaker.Report{Outcome: aggregator.Succeeded}, breaker.Success},
		{breaker.Report{Outcome: aggregator.Succeeded, Elapsed: 2 * time.Second}, breaker.Failure},
		{breaker.Report{Outcome: aggregator.Timeout}, breaker.Failure},
		{breaker.Report{Outcome: aggregator.Unavailable}, breaker.Failure},
		{breaker.Report{Outcome: aggregator.Unavailable, Status: 503}, breaker.Failure},
		{breaker.Report{Outcome: aggregator.Unavailable, Status: 501}, breaker.Neutral},
		{breaker.Report{Outcome: aggregator.RateLimited, Status: 429}, breaker.Neutral},
		{breaker.Report{Outcome: aggregator.Rejected, Status: 403}, breaker.Neutral},
		{breaker.Report{Outcome: aggregator.Unreadable, Status: 200}, breaker.Neutral},
		{breaker.Report{Outcome: aggregator.Deadline}, breaker.Neutral},
	}
	for _, tt := range tests {
		if got := breaker.Classify(tt.r, s); got != tt.want {
			t.Errorf("Classify(%+v) = %v, want %v", tt.r, got, tt.want)
		}
	}
}

// The rolling window runs on gobreaker's own clock, so this test waits for
// real: failures older than the window no longer count.
func TestMemoryWindowRolls(t *testing.T) {
	t.Parallel()
	s := breakertest.Settings()
	s.Window = 200 * time.Millisecond
	set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{})
	id := breaker.ID{Key: "k", Operation: aggregator.ByDomain}
	set.Add(id, "k", s)
	fail := func(n int) {
		for range n {
			c, err := set.Allow(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			c.Done(t.Context(), breaker.Report{Outcome: aggregator.Timeout})
		}
	}
	fail(9)
	time.Sleep(300 * time.Millisecond)
	fail(1)
	st, err := set.Status(t.Context(), id)
	if err != nil || st.State != breaker.Closed || st.Calls != 1 {
		t.Fatalf("after the window rolled: %s with %d calls (%v), want closed with 1", st.State, st.Calls, err)
	}
}

// Seed adopts a state without an event, and makes earlier permits stale.
func TestMemoryStoreSeed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	id := breaker.ID{Key: "caba", Operation: aggregator.ByDomain}
	s := breakertest.Settings()
	clock := breakertest.NewClock()
	tests := []struct {
		seed      breaker.State
		openUntil time.Duration
		want      breaker.State // Status right after
		allowed   bool          // a call is let through
	}{
		{breaker.Open, time.Minute, breaker.Open, false},
		{breaker.Open, -time.Second, breaker.HalfOpen, true},
		{breaker.ForcedOpen, 0, breaker.ForcedOpen, false},
		{breaker.HalfOpen, 0, breaker.HalfOpen, true},
		{breaker.Closed, 0, breaker.Closed, true},
		{"ajar", 0, breaker.Closed, true},
	}
	for _, tt := range tests {
		m := breaker.NewMemoryStore()
		now := clock.Now()
		old, _, err := m.Allow(ctx, id, s, now)
		if err != nil {
			t.Fatal(err)
		}
		m.Seed(id, s, tt.seed, now.Add(-time.Second), now.Add(tt.openUntil), now)
		st, events, err := m.Status(ctx, id, s, now)
		if err != nil || st.State != tt.want {
			t.Errorf("seed %s: state %s (%v), want %s", tt.seed, st.State, err, tt.want)
		}
		if tt.want == tt.seed && len(events) != 0 {
			t.Errorf("seed %s: events %+v, want none", tt.seed, events)
		}
		_, _, err = m.Allow(ctx, id, s, now)
		if (err == nil) != tt.allowed {
			t.Errorf("seed %s: Allow = %v, want allowed %v", tt.seed, err, tt.allowed)
		}
		// A permit from before the seed is stale: its failures are not counted.
		if tt.seed == breaker.Closed {
			for range 20 {
				_, _ = m.Done(ctx, id, old, breaker.Failure, breaker.Report{}, s, now)
			}
			if st, _, _ := m.Status(ctx, id, s, now); st.Failures > 1 {
				t.Errorf("seed closed: %d failures counted from a stale permit", st.Failures)
			}
		}
	}
}

// One MemoryStore shared by every replica is the exact reference of the
// fleet suite.
func TestMemoryStoreFleet(t *testing.T) {
	t.Parallel()
	breakertest.RunFleet(t, func(_ *testing.T, n int) []breaker.Store {
		m := breaker.NewMemoryStore()
		out := make([]breaker.Store, n)
		for i := range out {
			out[i] = m
		}
		return out
	})
}

func TestRetryAfterFloorBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := breaker.NewMemoryStore()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	id := breaker.ID{Key: "k", Operation: aggregator.ByDomain}
	settings := breakertest.Settings()
	settings.ConsecutiveFailures = 1
	p, _, err := s.Allow(ctx, id, settings, now)
	if err != nil {
		t.Fatal(err)
	}
	r := breaker.Report{Outcome: aggregator.Unavailable, Status: 503, RetryAfter: 200 * 365 * 24 * time.Hour}
	if _, err := s.Done(ctx, id, p, breaker.Classify(r, settings), r, settings, now); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Allow(ctx, id, settings, now.Add(time.Hour)); err == nil {
		t.Fatal("the breaker did not open")
	}
	if _, _, err := s.Allow(ctx, id, settings, now.Add(breaker.MaxRetryAfterFloor+time.Second)); err != nil {
		t.Errorf("still refused a day later (%v): a Retry-After of 200 years held the breaker", err)
	}
}
