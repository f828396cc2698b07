package breakertest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/breaker"
)

// Flusher is a store that holds outcome counts back to send them in
// batches (SPEC 11: at most every flush_interval): the fleet suite calls
// Flush where the background flush would have run.
type Flusher interface {
	Flush(ctx context.Context) error
}

// fleet is n replicas, each a Set on its own store, sharing one state.
type fleet struct {
	t      *testing.T
	clock  *Clock
	sets   []*breaker.Set
	stores []breaker.Store
}

func newFleet(t *testing.T, n int, newStores func(t *testing.T, n int) []breaker.Store, s breaker.Settings) *fleet {
	f := &fleet{t: t, clock: NewClock(), stores: newStores(t, n)}
	for _, st := range f.stores {
		set := breaker.NewSet(st, breaker.Options{Now: f.clock.Now})
		set.Add(id, "caba", s)
		f.sets = append(f.sets, set)
	}
	return f
}

// flush sends every replica's held-back counts.
func (f *fleet) flush() {
	f.t.Helper()
	for _, st := range f.stores {
		if fl, ok := st.(Flusher); ok {
			if err := fl.Flush(context.Background()); err != nil {
				f.t.Fatalf("Flush: %v", err)
			}
		}
	}
}

func (f *fleet) call(i int, r breaker.Report) bool {
	f.t.Helper()
	c, err := f.sets[i].Allow(context.Background(), id)
	if err != nil {
		if !errors.Is(err, breaker.ErrOpen) {
			f.t.Fatalf("replica %d: Allow: %v", i, err)
		}
		return false
	}
	c.Done(context.Background(), r)
	return true
}

// eventually polls cond for a second: changes reach other replicas
// asynchronously (published, not polled).
func (f *fleet) eventually(what string, cond func() bool) {
	f.t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			f.t.Fatalf("after 2s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (f *fleet) state(i int) breaker.State {
	f.t.Helper()
	st, err := f.sets[i].Status(context.Background(), id)
	if err != nil {
		f.t.Fatalf("replica %d: Status: %v", i, err)
	}
	return st.State
}

// RunFleet runs the fleet-wide behaviour of SPEC 11 against n replicas
// made by newStores, which share their state (a MemoryStore handed to
// every replica is the exact reference). Calls through a closed breaker
// may reach the fleet's state late: by one flush per round here.
func RunFleet(t *testing.T, newStores func(t *testing.T, n int) []breaker.Store) {
	const n = 3
	t.Run("DeadPortalBound", func(t *testing.T) {
		// A dead portal receives at most min_calls plus what each other
		// replica sends it within one flush (one call a round here).
		for _, consecutive := range []int{0, 4} {
			s := Settings()
			s.ConsecutiveFailures = consecutive
			f := newFleet(t, n, newStores, s)
			calls := 0
			for skipped := 0; skipped < n; {
				skipped = 0
				for i := range n {
					if f.call(i, fail) {
						calls++
					} else {
						skipped++
					}
				}
				f.flush()
				if calls > 100 {
					t.Fatal("the breaker never opened")
				}
			}
			limit := s.MinCalls
			if consecutive > 0 {
				limit = consecutive
			}
			if calls > limit+n-1 {
				t.Errorf("consecutive_failures %d: the dead portal received %d calls, want at most %d", consecutive, calls, limit+n-1)
			}
		}
	})
	t.Run("TripSeenByAll", func(t *testing.T) {
		s := Settings()
		s.ConsecutiveFailures = 3
		f := newFleet(t, n, newStores, s)
		for range 3 {
			f.call(0, fail)
		}
		for i := range n {
			f.eventually("a replica still calls a portal the fleet tripped on", func() bool { return !f.call(i, succeed) })
			if got := f.state(i); got != breaker.Open {
				t.Errorf("replica %d: %s, want open", i, got)
			}
		}
	})
	t.Run("OneProbeInTheFleet", func(t *testing.T) {
		f := newFleet(t, n, newStores, Settings())
		for range 10 {
			f.call(0, fail)
		}
		f.clock.Advance(31 * time.Second)
		var (
			mu      sync.Mutex
			permits []*breaker.Call
			wg      sync.WaitGroup
		)
		for i := range n {
			for range 10 {
				wg.Go(func() {
					c, err := f.sets[i].Allow(context.Background(), id)
					if err == nil {
						mu.Lock()
						permits = append(permits, c)
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		if len(permits) != 1 {
			t.Fatalf("%d permits in half-open across %d replicas, want exactly 1", len(permits), n)
		}
		permits[0].Done(context.Background(), succeed)
		for i := range n {
			f.eventually("a replica still refuses after the probe closed the breaker", func() bool { return f.call(i, succeed) })
		}
	})
	t.Run("ResetAndForcedOpenHoldForAll", func(t *testing.T) {
		s := Settings()
		s.ConsecutiveFailures = 3
		f := newFleet(t, n, newStores, s)
		for range 3 {
			f.call(0, fail)
		}
		if err := f.sets[1].Reset(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			f.eventually("a replica refuses after a reset on another", func() bool { return f.call(i, succeed) })
		}
		if err := f.sets[2].ForceOpen(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		for i := range n {
			f.eventually("a replica calls through a breaker forced open on another", func() bool { return !f.call(i, succeed) })
			if got := f.state(i); got != breaker.ForcedOpen {
				t.Errorf("replica %d: %s, want forced_open", i, got)
			}
		}
	})
	t.Run("CountsOfEveryReplica", func(t *testing.T) {
		// The window holds every replica's calls once they are flushed.
		f := newFleet(t, n, newStores, Settings())
		for i := range n {
			for range 3 {
				f.call(i, succeed)
			}
			f.call(i, fail)
		}
		f.flush()
		st, err := f.sets[0].Status(context.Background(), id)
		if err != nil || st.Calls != 4*n || st.Failures != n {
			t.Errorf("status = %d calls, %d failures (%v); want %d, %d", st.Calls, st.Failures, err, 4*n, n)
		}
	})
}
