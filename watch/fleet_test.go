package watch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/async"
)

// sharedStores are the stores of a fleet on one Redis.
func sharedStores(t *testing.T) (func() Store, func() async.Store) {
	c, prefix := testRedis(t)
	return func() Store { return NewRedisStore(c, prefix+"watches:") },
		func() async.Store { return async.NewRedisStore(c, prefix+"async:") }
}

// Two replicas race on one check: the first to claim it is held up in
// its portal call past its lease; the other takes the check over, runs it
// and delivers it. When the first one's call returns, its writes are
// refused (its claim's token is stale): one message, whichever replica
// sends it.
func TestTwoReplicasRaceOnOneCheck(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "caba")
	watches, deliveries := sharedStores(t)
	caba := f.portals[0]
	caba.set(plate, acta{Nro: "Q-1", Estado: "IMPAGA"})
	held, release := caba.holdNext()
	defer release()
	a := f.replica(replicaOpts{watches: watches(), deliveries: deliveries(), budget: 10 * time.Second})
	b := f.replica(replicaOpts{watches: watches(), deliveries: deliveries(), budget: 10 * time.Second})
	v, err := a.m.Create(context.Background(), Request{Owner: "fleet", Query: q, CallbackURL: f.recv.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("no replica called the portal")
	}
	f.clock.Advance(21 * time.Second) // past the lease: the other replica takes the check over
	eventually(t, "the check taken over and delivered", func() bool { return len(f.recv.hooks()) == 1 })
	release()
	eventually(t, "the first call answered", func() bool { return caba.hitsOf(plate) == 2 })
	time.Sleep(100 * time.Millisecond)
	f.clock.Advance(time.Minute) // anything left behind would go now
	time.Sleep(100 * time.Millisecond)
	if msgs := f.recv.messages(); len(msgs) != 1 || msgs[0] != "msg_"+v.WatchID+"_1" {
		t.Errorf("messages %v, want one, msg_%s_1", msgs, v.WatchID)
	}
	if n := a.counts.checks() + b.counts.checks(); n != 1 {
		t.Errorf("%d checks reported, want 1", n)
	}
}

// A replica that dies in the middle of a check (its process gone: nothing
// more is written) has its check taken over by another within 30 s.
func TestKilledReplicaTakenOver(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "caba")
	watches, deliveries := sharedStores(t)
	caba := f.portals[0]
	caba.set(plate, acta{Nro: "Q-1", Estado: "IMPAGA"})
	held, release := caba.holdNext()
	defer release()
	a := f.replica(replicaOpts{watches: watches(), deliveries: deliveries(), budget: 10 * time.Second})
	if _, err := a.m.Create(context.Background(), Request{Owner: "fleet", Query: q, CallbackURL: f.recv.srv.URL}); err != nil {
		t.Fatal(err)
	}
	<-held
	_ = a.m.Close() // killed mid-check
	_ = a.async.Close()
	b := f.replica(replicaOpts{watches: watches(), deliveries: deliveries()})
	for range 30 {
		f.clock.Advance(time.Second)
		time.Sleep(5 * time.Millisecond)
		if len(f.recv.hooks()) > 0 {
			break
		}
	}
	eventually(t, "taken over", func() bool { return len(f.recv.hooks()) == 1 })
	at := caba.arrivals()
	if len(at) != 2 || at[1].Sub(t0) > 30*time.Second {
		t.Errorf("portal calls at %v, want the second within 30s of the first", at)
	}
	if b.counts.outcome(OutcomeChanged) != 1 {
		t.Errorf("the other replica reported %v", b.counts.outcomes)
	}
}

// A replica that decided on a delivery and died before handing it over
// (its hand-over fails, then it is gone) leaves it sealed in the watch:
// the next replica hands it over within the lease, under the same id, and
// a replica that hands it over a second time makes no second message.
func TestDeliveryLeftByADeadReplica(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "caba")
	watches, deliveries := sharedStores(t)
	f.portals[0].set(plate, acta{Nro: "Q-1", Estado: "IMPAGA"})
	dead := errors.New("replica died")
	tried := make(chan async.Delivery, 1)
	a := f.replica(replicaOpts{watches: watches(), deliveries: deliveries(), send: func(_ context.Context, d async.Delivery) error {
		tried <- d
		return dead
	}})
	v, err := a.m.Create(context.Background(), Request{Owner: "fleet", Query: q, CallbackURL: f.recv.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var lost async.Delivery
	select {
	case lost = <-tried:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery decided")
	}
	_ = a.m.Close()
	b := f.replica(replicaOpts{watches: watches(), deliveries: deliveries()})
	f.clock.Advance(21 * time.Second)
	eventually(t, "handed over by the other replica", func() bool { return len(f.recv.hooks()) == 1 })
	// The same message handed over again (a replica that died after
	// sending, before forgetting it): still one message.
	if err := b.async.Send(context.Background(), lost); err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)
	time.Sleep(100 * time.Millisecond)
	if msgs := f.recv.messages(); !slices.Equal(msgs, []string{"msg_" + v.WatchID + "_1"}) {
		t.Errorf("messages %v, want one, msg_%s_1", msgs, v.WatchID)
	}
}

// 1,000 watches created at once have their first checks spread over their
// interval: each at a random point of it, so that every hour of six holds
// about a sixth of them, and each check starts when it is due.
func TestFirstChecksSpread(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "caba")
	f.portals[0].set(plate, acta{Nro: "Q-1", Estado: "IMPAGA"})
	r := f.replica(replicaOpts{jitter: uniform, workers: 8})
	const n, interval = 1000, 6 * time.Hour
	ctx := context.Background()
	var due []time.Time
	for i := range n {
		// Each its own vehicle: a portal call per check (identical calls in
		// flight are made once).
		v, err := r.m.Create(ctx, Request{Owner: "fleet", Query: aggregator.Query{Domain: fmt.Sprintf("AB%03dCD", i)},
			CallbackURL: f.recv.srv.URL, Interval: interval})
		if err != nil {
			t.Fatal(err)
		}
		if v.NextCheckAt.Before(t0) || !v.NextCheckAt.Before(t0.Add(interval)) {
			t.Fatalf("first check at %v, want within the first interval", v.NextCheckAt)
		}
		due = append(due, v.NextCheckAt)
	}
	const step = 10 * time.Minute
	for at := t0.Add(step); !at.After(t0.Add(interval)); at = at.Add(step) {
		f.clock.Set(at)
		dueBy := 0
		for _, d := range due {
			if !d.After(at) {
				dueBy++
			}
		}
		eventually(t, "the checks due by "+at.Format("15:04"), func() bool { return r.counts.checks() == dueBy })
	}
	eventually(t, "every first check", func() bool { return r.counts.checks() == n })
	at := f.portals[0].arrivals()
	if len(at) != n {
		t.Fatalf("%d portal calls, want %d", len(at), n)
	}
	hours := make([]int, 6)
	for _, a := range at {
		// A check due within a step of the clock starts at its end.
		hours[min(int((a.Sub(t0)-step)/time.Hour), 5)]++
	}
	for h, c := range hours {
		// n/6 ≈ 167 each; a random spread stays well within ±45.
		if c < 122 || c > 212 {
			t.Errorf("hour %d holds %d first checks, want about %d: %v", h, c, n/6, hours)
		}
	}
	for _, lag := range r.counts.lags {
		if lag > step {
			t.Errorf("a check started %v late, want within one step of the clock (%v)", lag, step)
			break
		}
	}
}
