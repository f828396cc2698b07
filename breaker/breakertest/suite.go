// Package breakertest is the behaviour suite of SPEC 4.1 that every
// breaker.Store must pass, driven through a breaker.Set with a fake clock.
package breakertest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
)

// Clock is a settable fake clock.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock starts a clock at a fixed instant.
func NewClock() *Clock {
	return &Clock{now: time.Date(2026, 3, 14, 9, 12, 0, 0, time.FixedZone("ART", -3*3600))}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Settings are the suite's breaker settings: SPEC 6 defaults, smaller.
func Settings() breaker.Settings {
	return breaker.Settings{
		Window: time.Minute, MinCalls: 10, FailureRatio: 0.5, OpenFor: 30 * time.Second,
		FailureStatuses: []int{500, 502, 503, 504}, ProbeLease: 5 * time.Second,
	}
}

var id = breaker.ID{Key: "caba", Operation: aggregator.ByDomain}

var (
	fail    = breaker.Report{Outcome: aggregator.Unavailable, Status: 503}
	succeed = breaker.Report{Outcome: aggregator.Succeeded}
)

type harness struct {
	t     *testing.T
	clock *Clock
	set   *breaker.Set
}

func newHarness(t *testing.T, newStore func(t *testing.T) breaker.Store, s breaker.Settings) *harness {
	clock := NewClock()
	set := breaker.NewSet(newStore(t), breaker.Options{Now: clock.Now})
	set.Add(id, "caba", s)
	return &harness{t: t, clock: clock, set: set}
}

// call makes one call through the breaker with report r; false if refused.
func (h *harness) call(r breaker.Report) bool {
	h.t.Helper()
	c, err := h.set.Allow(context.Background(), id)
	if err != nil {
		if !errors.Is(err, breaker.ErrOpen) {
			h.t.Fatalf("Allow: unexpected error %v", err)
		}
		return false
	}
	c.Done(context.Background(), r)
	return true
}

func (h *harness) state() breaker.State {
	h.t.Helper()
	st, err := h.set.Status(context.Background(), id)
	if err != nil {
		h.t.Fatalf("Status: %v", err)
	}
	return st.State
}

func (h *harness) want(want breaker.State) {
	h.t.Helper()
	if got := h.state(); got != want {
		h.t.Fatalf("state = %s, want %s", got, want)
	}
}

func (h *harness) trip() {
	h.t.Helper()
	for range 10 {
		h.call(fail)
	}
	h.want(breaker.Open)
}

// Run runs the suite against stores made by newStore.
func Run(t *testing.T, newStore func(t *testing.T) breaker.Store) {
	t.Run("TripsAtMinCallsAndRatio", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		for range 5 {
			h.call(succeed)
		}
		for range 4 {
			h.call(fail)
		}
		h.want(breaker.Closed) // 9 calls < min_calls
		h.call(fail)           // 10 calls, ratio 0.5
		h.want(breaker.Open)
		last := h.set.Events().Latest(1)
		if len(last) != 1 || last[0].To != breaker.Open || last[0].Evidence.Calls != 10 || last[0].Evidence.Failures != 5 {
			t.Fatalf("trip event = %+v, want 10 calls and 5 failures", last)
		}
		if h.call(succeed) {
			t.Errorf("an open breaker let a call through")
		}
	})
	t.Run("BelowRatioStaysClosed", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		for i := range 40 {
			if i%3 == 0 {
				h.call(fail)
			} else {
				h.call(succeed)
			}
		}
		h.want(breaker.Closed)
	})
	t.Run("NeutralOutcomesNeverTrip", func(t *testing.T) {
		neutral := []breaker.Report{
			{Outcome: aggregator.RateLimited, Status: 429},
			{Outcome: aggregator.Rejected, Status: 400},
			{Outcome: aggregator.Deadline},
			{Outcome: aggregator.Unreadable, Status: 200},
			{Outcome: aggregator.Unavailable, Status: 501},
		}
		for _, r := range neutral {
			h := newHarness(t, newStore, Settings())
			for range 50 {
				if !h.call(r) {
					t.Fatalf("%s/%d: refused", r.Outcome, r.Status)
				}
			}
			h.want(breaker.Closed)
			st, _ := h.set.Status(context.Background(), id)
			if st.Calls != 0 {
				t.Errorf("%s/%d: %d calls recorded, want 0", r.Outcome, r.Status, st.Calls)
			}
		}
	})
	t.Run("ConsecutiveFailures", func(t *testing.T) {
		s := Settings()
		s.ConsecutiveFailures = 3
		s.MinCalls = 100
		h := newHarness(t, newStore, s)
		h.call(fail)
		h.call(fail)
		h.call(succeed)
		h.call(fail)
		h.call(fail)
		h.want(breaker.Closed)
		h.call(fail)
		h.want(breaker.Open)
		if ev := h.set.Events().Latest(1)[0]; ev.Evidence.ConsecutiveFailures != 3 {
			t.Errorf("evidence = %+v, want 3 consecutive failures", ev.Evidence)
		}
	})
	t.Run("SlowSuccessCountsAsFailure", func(t *testing.T) {
		s := Settings()
		s.SlowCall = time.Second
		h := newHarness(t, newStore, s)
		for range 10 {
			h.call(breaker.Report{Outcome: aggregator.Succeeded, Elapsed: 2 * time.Second})
		}
		h.want(breaker.Open)
	})
	t.Run("OpenForThenHalfOpenSeenByReaders", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		h.trip()
		h.clock.Advance(29 * time.Second)
		h.want(breaker.Open)
		h.clock.Advance(2 * time.Second)
		h.want(breaker.HalfOpen)
		if ev := h.set.Events().Latest(1)[0]; ev.From != breaker.Open || ev.To != breaker.HalfOpen {
			t.Errorf("last event %s→%s, want open→half_open", ev.From, ev.To)
		}
	})
	t.Run("RetryAfterIsTheFloorOfOpenTime", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		for range 9 {
			h.call(fail)
		}
		h.call(breaker.Report{Outcome: aggregator.Unavailable, Status: 503, RetryAfter: 90 * time.Second})
		h.want(breaker.Open)
		h.clock.Advance(60 * time.Second)
		h.want(breaker.Open)
		_, err := h.set.Allow(context.Background(), id)
		var oe *breaker.OpenError
		if !errors.As(err, &oe) || oe.RetryAfter != 30*time.Second {
			t.Fatalf("Allow = %v, want open with 30s left", err)
		}
		h.clock.Advance(31 * time.Second)
		h.want(breaker.HalfOpen)
	})
	t.Run("OneProbeInHalfOpen", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		h.trip()
		h.clock.Advance(31 * time.Second)
		var permits atomic.Int32
		var wg sync.WaitGroup
		calls := make(chan *breaker.Call, 20)
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := h.set.Allow(context.Background(), id)
				if err == nil {
					permits.Add(1)
					calls <- c
					return
				}
				var oe *breaker.OpenError
				if !errors.As(err, &oe) || !oe.Probing {
					t.Errorf("refusal = %v, want probe in flight", err)
				}
			}()
		}
		wg.Wait()
		if got := permits.Load(); got != 1 {
			t.Fatalf("%d permits in half-open, want exactly 1", got)
		}
		c := <-calls
		if !c.Probe() {
			t.Errorf("the half-open permit is not marked as the probe")
		}
		c.Done(context.Background(), succeed)
		h.want(breaker.Closed)
		st, _ := h.set.Status(context.Background(), id)
		if st.Calls != 0 || st.Failures != 0 {
			t.Errorf("after closing: %d calls, %d failures recorded, want counts restarted", st.Calls, st.Failures)
		}
		// Counts restarted: 9 more failures do not trip.
		for range 9 {
			h.call(fail)
		}
		h.want(breaker.Closed)
	})
	t.Run("ProbeFailureReopens", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		h.trip()
		h.clock.Advance(31 * time.Second)
		if !h.call(fail) {
			t.Fatal("probe refused")
		}
		h.want(breaker.Open)
		h.clock.Advance(29 * time.Second)
		h.want(breaker.Open)
	})
	t.Run("NeutralProbeFreesTheSlot", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		h.trip()
		h.clock.Advance(31 * time.Second)
		h.call(breaker.Report{Outcome: aggregator.RateLimited, Status: 429})
		h.call(breaker.Report{Outcome: aggregator.Deadline})
		h.want(breaker.HalfOpen)
		if !h.call(succeed) {
			t.Fatal("the slot was not given back after neutral probes")
		}
		h.want(breaker.Closed)
	})
	t.Run("AbandonedProbeLeaseExpires", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		h.trip()
		h.clock.Advance(31 * time.Second)
		if _, err := h.set.Allow(context.Background(), id); err != nil {
			t.Fatalf("probe refused: %v", err)
		}
		// Its Done is never called.
		if h.call(succeed) {
			t.Fatal("a second probe went while the first held its lease")
		}
		h.clock.Advance(6 * time.Second)
		if !h.call(succeed) {
			t.Fatal("the breaker stayed wedged after the probe lease expired")
		}
		h.want(breaker.Closed)
	})
	t.Run("ForcedOpenUntilReset", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		if err := h.set.ForceOpen(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		h.clock.Advance(time.Hour)
		h.want(breaker.ForcedOpen)
		_, err := h.set.Allow(context.Background(), id)
		var oe *breaker.OpenError
		if !errors.As(err, &oe) || oe.RetryAfter != 30*time.Second {
			t.Fatalf("Allow = %v, want forced open reporting open_for", err)
		}
		if err := h.set.Reset(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		h.want(breaker.Closed)
		if ev := h.set.Events().Latest(1)[0]; ev.Reason != "manual reset from admin API" || ev.From != breaker.ForcedOpen {
			t.Errorf("reset event = %+v", ev)
		}
	})
	t.Run("ResetClearsCounts", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		for range 9 {
			h.call(fail)
		}
		if err := h.set.Reset(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		h.call(fail)
		h.want(breaker.Closed)
	})
	t.Run("StaleVerdictIgnored", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		slow, err := h.set.Allow(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		h.trip()
		h.clock.Advance(31 * time.Second)
		probe, err := h.set.Allow(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		slow.Done(context.Background(), fail) // from the closed generation
		h.want(breaker.HalfOpen)
		probe.Done(context.Background(), succeed)
		h.want(breaker.Closed)
	})
	t.Run("OpenTimeAccounting", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		h.trip()
		h.clock.Advance(10 * time.Second)
		st, _ := h.set.Status(context.Background(), id)
		if st.OpenTotal != 10*time.Second {
			t.Errorf("open total while open = %s, want 10s", st.OpenTotal)
		}
		h.clock.Advance(25 * time.Second) // half-open since 30s
		h.call(succeed)
		h.clock.Advance(time.Minute)
		st, _ = h.set.Status(context.Background(), id)
		if st.OpenTotal != 30*time.Second {
			t.Errorf("open total after closing = %s, want 30s", st.OpenTotal)
		}
	})
	t.Run("SettingsChangeAppliesToNextCall", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		s := Settings()
		s.MinCalls = 2
		h.set.SetSettings(id, s)
		h.call(fail)
		h.call(fail)
		h.want(breaker.Open)
	})
	t.Run("OperationsAreSeparate", func(t *testing.T) {
		h := newHarness(t, newStore, Settings())
		other := breaker.ID{Key: id.Key, Operation: aggregator.Voucher}
		h.set.Add(other, "caba", Settings())
		h.trip()
		st, err := h.set.Status(context.Background(), other)
		if err != nil || st.State != breaker.Closed {
			t.Errorf("voucher breaker = %v %v, want closed", st.State, err)
		}
	})
}
