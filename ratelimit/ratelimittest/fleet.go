package ratelimittest

import (
	"context"
	"testing"
	"time"

	"github.com/multas/aggregator/ratelimit"
)

// RunFleet checks the fleet-wide budget of SPEC 11 against n replicas made
// by newStores, which share their state: calls admitted by all of them,
// in any stretch of time T, never exceed what the budget allows in
// T + slack (a store that leases tokens a flush interval at a time may
// hand them out that much later; a MemoryStore handed to every replica is
// the exact reference, slack 0), and the budget is not wasted either.
func RunFleet(t *testing.T, slack time.Duration, newStores func(t *testing.T, n int) []ratelimit.Store) {
	const (
		n     = 3
		rps   = 1000.0
		burst = 20
		step  = 250 * time.Microsecond
		span  = 2 * time.Second
		stint = 100 * time.Millisecond
	)
	now := t0
	var lims []*ratelimit.Limiter
	for _, st := range newStores(t, n) {
		lim := ratelimit.New(st, func() time.Time { return now })
		lim.OnStoreError = func(err error) { t.Errorf("store error: %v", err) }
		lim.Configure(source, ratelimit.Settings{RPS: rps, Burst: burst})
		lims = append(lims, lim)
	}
	// Every step, each replica asks for a token it will not wait for:
	// demand is 12 times the budget.
	var admitted []time.Time
	for ; now.Before(t0.Add(span)); now = now.Add(step) {
		for _, lim := range lims {
			if _, err := lim.Decide(context.Background(), source, 0); err == nil {
				admitted = append(admitted, now)
			}
		}
	}
	allowed := func(d time.Duration) int { return int(rps*(d+slack).Seconds()) + burst }
	if len(admitted) > allowed(span) {
		t.Errorf("%d calls admitted in %v, want at most %d", len(admitted), span, allowed(span))
	}
	if min := int(0.8 * rps * span.Seconds()); len(admitted) < min {
		t.Errorf("%d calls admitted in %v for a budget of %v/s, want at least %d: the budget is wasted", len(admitted), span, rps, min)
	}
	// Any stretch of stint: a sliding count.
	worst, j := 0, 0
	for i := range admitted {
		for admitted[i].Sub(admitted[j]) >= stint {
			j++
		}
		worst = max(worst, i-j+1)
	}
	if worst > allowed(stint) {
		t.Errorf("%d calls admitted within %v, want at most %d", worst, stint, allowed(stint))
	}
}
