package breaker_test

import (
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
