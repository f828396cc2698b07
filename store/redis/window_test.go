package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	redisstore "github.com/multas/aggregator/store/redis"
)

// The rolling window, which the behaviour suite cannot show (the memory
// store's window runs on the real clock): calls leave it once window has
// passed, bucket by bucket.
func TestRollingWindow(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	ctx := context.Background()
	s := breakertest.Settings() // window 1m, min_calls 10, ratio 0.5
	var store breaker.Store     // of the latest newSet
	newSet := func(t *testing.T) (*breaker.Set, *breakertest.Clock) {
		clock := breakertest.NewClock()
		st := newStores(t, c, redisstore.Options{Prefix: testPrefix(t, c), Timeout: suiteTimeout})
		set := breaker.NewSet(st.Breakers, breaker.Options{Now: clock.Now, Events: st.Events})
		set.Add(caba, "caba", s)
		store = st.Breakers
		return set, clock
	}
	calls := func(t *testing.T, set *breaker.Set) (int, int) {
		t.Helper()
		st, err := set.Status(ctx, caba)
		if err != nil {
			t.Fatal(err)
		}
		return st.Calls, st.Failures
	}
	failN := func(t *testing.T, set *breaker.Set, n int) {
		t.Helper()
		for i := range n {
			if !call(t, set, fail) {
				st, err := set.Status(ctx, caba)
				t.Fatalf("call %d of %d refused: %+v %v, events %+v", i+1, n, st, err, set.Events().Latest(5))
			}
		}
	}

	t.Run("calls older than the window do not count", func(t *testing.T) {
		set, clock := newSet(t)
		failN(t, set, 9)
		clock.Advance(61 * time.Second)
		if n, _ := calls(t, set); n != 0 {
			t.Errorf("%d calls in the window after it passed, want 0", n)
		}
		failN(t, set, 9)
		if got := state(t, set); got != breaker.Closed {
			t.Fatalf("state = %s: calls older than the window counted", got)
		}
		failN(t, set, 1)
		if got := state(t, set); got != breaker.Open {
			t.Fatalf("state = %s after 10 failures in the window, want open", got)
		}
	})

	t.Run("buckets leave one by one", func(t *testing.T) {
		set, clock := newSet(t)
		failN(t, set, 5)
		clock.Advance(30 * time.Second)
		for range 4 {
			call(t, set, succeed)
		}
		if n, f := calls(t, set); n != 9 || f != 5 {
			t.Errorf("window = %d calls, %d failures; want 9, 5", n, f)
		}
		clock.Advance(31 * time.Second) // the first five have left
		if n, f := calls(t, set); n != 4 || f != 0 {
			t.Errorf("window = %d calls, %d failures; want 4, 0", n, f)
		}
		failN(t, set, 5)
		if got := state(t, set); got != breaker.Closed {
			t.Fatalf("state = %s with 5 of 9 calls failed, want closed", got)
		}
		failN(t, set, 1) // 10 calls, 6 failures
		if got := state(t, set); got != breaker.Open {
			t.Fatalf("state = %s, want open", got)
		}
		if ev := set.Events().Latest(1); len(ev) != 1 || ev[0].Evidence.Calls != 10 || ev[0].Evidence.Failures != 6 ||
			ev[0].Evidence.WindowSeconds != 60 {
			t.Errorf("trip evidence = %+v, want 10 calls, 6 failures, a 60s window", ev)
		}
	})

	t.Run("a replica whose clock is behind counts in the newest bucket", func(t *testing.T) {
		set, clock := newSet(t)
		clock.Advance(20 * time.Second)
		failN(t, set, 5)
		behind := breaker.NewSet(store, breaker.Options{Now: func() time.Time { return clock.Now().Add(-15 * time.Second) }})
		behind.Add(caba, "caba", s)
		failN(t, behind, 4)
		if n, f := calls(t, set); n != 9 || f != 9 {
			t.Errorf("window = %d calls, %d failures; want 9, 9", n, f)
		}
		failN(t, behind, 1)
		if got := state(t, set); got != breaker.Open {
			t.Fatalf("state = %s, want open", got)
		}
	})

	t.Run("a settings change of window restarts the counts", func(t *testing.T) {
		set, _ := newSet(t)
		failN(t, set, 9)
		s2 := s
		s2.Window = 2 * time.Minute
		set.SetSettings(caba, s2)
		if n, _ := calls(t, set); n != 0 {
			t.Errorf("%d calls counted with another bucket period, want 0", n)
		}
		failN(t, set, 9)
		if got := state(t, set); got != breaker.Closed {
			t.Fatalf("state = %s, want closed", got)
		}
	})

	// Found by the chaos suite: as old successes left the window before
	// the failures did, the ratio rose with no new failure, and the next
	// success (from a portal healthy for seconds) opened the breaker.
	t.Run("a success never trips", func(t *testing.T) {
		set, clock := newSet(t)
		for range 12 {
			call(t, set, succeed)
		}
		clock.Advance(30 * time.Second)
		failN(t, set, 9) // 9 of 21: below the ratio
		clock.Advance(31 * time.Second)
		// The 12 successes have left the window; the 9 failures have not:
		// the next success makes 10 calls with a ratio of 0.9.
		for range 6 {
			if !call(t, set, succeed) {
				t.Fatal("a success-only stretch was refused: a success tripped the breaker")
			}
		}
		if got := state(t, set); got != breaker.Closed {
			t.Fatalf("state = %s after only successes, want closed", got)
		}
	})
}
