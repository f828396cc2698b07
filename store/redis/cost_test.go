package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	redisstore "github.com/multas/aggregator/store/redis"
)

// While a breaker is closed, a call costs no round trip (SPEC 11, "Cost"):
// the replica decides from its view, and sends its counts for every
// breaker in one pipelined round trip per flush.
func TestClosedCallsCostNoRoundTrip(t *testing.T) {
	t.Parallel()
	s := breakertest.Settings()
	// A clock that stands still: calls crossing into another bucket of the
	// window (every 6 s) would send the counts of the one they leave.
	rs := fleet(t, 1, breakertest.NewClock().Now, s, redisstore.Options{FlushInterval: time.Hour, RefreshInterval: time.Hour})
	r := rs[0]
	ids := []breaker.ID{caba}
	for _, op := range []aggregator.Operation{aggregator.ByID, aggregator.Voucher} {
		id := breaker.ID{Key: "caba", Operation: op}
		r.set.Add(id, "caba", s)
		ids = append(ids, id)
	}
	ctx := context.Background()
	do := func(id breaker.ID, rep breaker.Report) {
		c, err := r.set.Allow(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		c.Done(ctx, rep)
	}
	for _, id := range ids {
		do(id, succeed) // the first call reads the breaker: the view
	}
	if err := r.stores.Flush(ctx); err != nil { // loads the flush script
		t.Fatal(err)
	}
	// The client also carries the store's own background work: a refresh
	// of every view after the subscription was lost (a loaded machine can
	// time it out) may fall in a measurement, which is then made again.
	var calls, flush int64
	rounds := 0
	for rounds < 3 {
		rounds++
		before := r.commands.n.Load()
		for i := range 100 {
			for _, id := range ids {
				rep := succeed
				if i%10 == 0 {
					rep = fail
				}
				do(id, rep)
			}
		}
		calls = r.commands.n.Load() - before
		before = r.commands.n.Load()
		if err := r.stores.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		flush = r.commands.n.Load() - before
		if calls == 0 && flush == 1 {
			break
		}
		t.Logf("round %d: %d round trips for the calls, %d for the flush; again", rounds, calls, flush)
	}
	if calls != 0 {
		t.Errorf("%d round trips for 300 calls through closed breakers, want 0", calls)
	}
	if flush != 1 {
		t.Errorf("the flush of 3 breakers took %d round trips, want 1", flush)
	}
	for _, id := range ids {
		st, err := r.set.Status(ctx, id)
		if want := 1 + 100*rounds; err != nil || st.State != breaker.Closed || st.Calls != want || st.Failures != 10*rounds {
			t.Errorf("%s: %+v, %v; want closed with %d calls, %d failures", id, st, err, want, 10*rounds)
		}
	}
}

// With the background flush, two replicas making calls as fast as they can
// send a round trip per flush interval, not per call.
func TestFlushAmortised(t *testing.T) {
	t.Parallel()
	rs := fleet(t, 2, time.Now, breakertest.Settings(), redisstore.Options{})
	ctx := context.Background()
	for _, r := range rs {
		call(t, r.set, succeed)
	}
	var before int64
	for _, r := range rs {
		before += r.commands.n.Load()
	}
	calls := 0
	for end := time.Now().Add(300 * time.Millisecond); time.Now().Before(end); {
		for _, r := range rs {
			call(t, r.set, succeed)
			calls++
		}
	}
	var n int64
	for _, r := range rs {
		if err := r.stores.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		n += r.commands.n.Load()
	}
	n -= before
	t.Logf("%d calls, %d round trips", calls, n)
	if calls < 100 {
		t.Skipf("only %d calls in 300ms: too busy a machine to tell", calls)
	}
	if float64(n) > float64(calls)/10 {
		t.Errorf("%d round trips for %d calls, want a small fraction", n, calls)
	}
	st, err := rs[0].set.Status(ctx, caba)
	if err != nil || st.Calls != calls+2 {
		t.Errorf("status = %+v, %v; want the %d calls counted", st, err, calls+2)
	}
}
