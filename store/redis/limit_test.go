package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/ratelimit"
	redisstore "github.com/multas/aggregator/store/redis"
)

// A 429 pause set through one replica holds for all.
func TestPauseHoldsForEveryReplica(t *testing.T) {
	t.Parallel()
	rs := fleet(t, 3, time.Now, breakertest.Settings(), redisstore.Options{})
	var lims []*ratelimit.Limiter
	for _, r := range rs {
		lim := ratelimit.New(r.stores.Limits, nil)
		lim.OnStoreError = func(err error) { t.Errorf("store error: %v", err) }
		lim.Configure("caba", ratelimit.Settings{})
		lims = append(lims, lim)
	}
	ctx := context.Background()
	// Not paused, and known not to be: no round trip to ask again.
	for i, lim := range lims {
		if d := lim.PausedFor(ctx, "caba"); d != 0 {
			t.Fatalf("replica %d: paused for %v", i, d)
		}
		before := rs[i].commands.n.Load()
		if _, err := lim.Decide(ctx, "caba", time.Second); err != nil {
			t.Fatal(err)
		}
		if n := rs[i].commands.n.Load() - before; n != 0 {
			t.Errorf("replica %d: %d round trips for a source without budget nor pause, want 0", i, n)
		}
	}
	if got := lims[0].Pause(ctx, "caba", 30*time.Second); got != 30*time.Second {
		t.Fatalf("Pause = %v", got)
	}
	for i, lim := range lims {
		deadline := time.Now().Add(time.Second)
		for {
			var le *ratelimit.LimitedError
			_, err := lim.Decide(ctx, "caba", time.Second)
			if errors.As(err, &le) && le.Paused {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d: Decide = %v a second after the pause, want paused", i, err)
			}
			time.Sleep(5 * time.Millisecond)
		}
		if d := lim.PausedFor(ctx, "caba"); d < 29*time.Second || d > 30*time.Second {
			t.Errorf("replica %d: PausedFor = %v, want about 30s", i, d)
		}
	}
	// The budget is shared too: a burst of 5 for the fleet, not 5 each.
	admitted := 0
	for i := range 30 {
		lim := lims[i%3]
		lim.Configure("cordoba", ratelimit.Settings{RPS: 0.001, Burst: 5})
		if _, err := lim.Decide(ctx, "cordoba", 0); err == nil {
			admitted++
		}
	}
	if admitted != 5 {
		t.Errorf("%d calls admitted across 3 replicas, want the shared burst of 5", admitted)
	}
}

// A budget of more than one token per flush interval is leased: a round
// trip per flush interval's worth of tokens, not per call.
func TestBudgetLeased(t *testing.T) {
	t.Parallel()
	rs := fleet(t, 1, time.Now, breakertest.Settings(), redisstore.Options{FlushInterval: 20 * time.Millisecond})
	now := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	lim := ratelimit.New(rs[0].stores.Limits, func() time.Time { return now })
	lim.OnStoreError = func(err error) { t.Errorf("store error: %v", err) }
	lim.Configure("caba", ratelimit.Settings{RPS: 1000, Burst: 20})
	before := rs[0].commands.n.Load()
	admitted := 0
	for range 4000 { // 1s, a call every 250µs
		if _, err := lim.Decide(context.Background(), "caba", 0); err == nil {
			admitted++
		}
		now = now.Add(250 * time.Microsecond)
	}
	trips := rs[0].commands.n.Load() - before
	t.Logf("%d calls admitted, %d round trips", admitted, trips)
	if admitted < 900 || admitted > 1040 { // rps·1s + burst + one flush interval's worth
		t.Errorf("%d calls admitted in 1s at 1000/s, burst 20", admitted)
	}
	if trips > int64(admitted)/5 {
		t.Errorf("%d round trips for %d admitted calls, want a lease per 20 tokens at most", trips, admitted)
	}
}
