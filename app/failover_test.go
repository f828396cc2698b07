package app_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/internal/redistest"
)

// A Cluster primary dies under load: the replica serving the slot of a
// breaker is promoted, the replicas follow it without a restart, no query
// fails meanwhile, and the open breaker is not forgotten.
func TestClusterFailover(t *testing.T) {
	cl := redistest.StartCluster(t)
	const prefix = "failover:"
	failover(t, fmt.Sprintf(`{cluster: {addrs: ["%s"]}, key_prefix: %q}`, strings.Join(cl.Addrs(), `", "`), prefix), func() {
		victim := cl.PrimaryOf(prefix + "{dead/by_domain}:breaker")
		t.Logf("killing %s, the primary of the dead breaker's slot", victim)
		cl.Kill(victim)
		cl.WaitHealthy()
		if got := cl.PrimaryOf(prefix + "{dead/by_domain}:breaker"); got == victim {
			t.Fatalf("the slot is still served by the killed node")
		}
	})
}

// The same with a Sentinel-managed primary: the Sentinel promotes its
// replica, and the replicas follow.
func TestSentinelFailover(t *testing.T) {
	sn := redistest.StartSentinel(t)
	failover(t, fmt.Sprintf(`{sentinel: {master: %s, addrs: [%q]}, key_prefix: "failover:"}`, redistest.SentinelMaster, sn.Addr), func() {
		old := sn.Primary()
		sn.KillPrimary()
		t.Logf("killed the primary %s; the Sentinel promoted %s", old, sn.Primary())
	})
}

// failover trips a breaker of two replicas on the store block store, runs
// queries on both while kill makes the store fail over, and checks that no
// query failed, that the dead portal got no call and that the breaker is
// still open, and shared, afterwards.
func failover(t *testing.T, store string, kill func()) {
	t.Helper()
	ok, dead := newPortal(t), newPortal(t)
	dead.down.Store(true)
	rs := replicas(t, 2, sharedYAML(store, ok, dead))

	for i := range 3 {
		query(t, rs[0], fmt.Sprintf("AB%03dCD", i), "dead")
	}
	for i, a := range rs {
		if got := breakerState(t, a, deadID); got != breaker.Open {
			t.Fatalf("replica %d: breaker %s, want open", i, got)
		}
	}
	tripped := dead.calls.Load()

	var (
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		queries atomic.Int64
		mu      sync.Mutex
		failed  []string
	)
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				r := query(t, rs[(w+i)%2], fmt.Sprintf("AD%03dCD", i%1000), "ok", "dead")
				queries.Add(1)
				if r["ok"].Status != aggregator.EntrySucceeded || r["dead"].Status != aggregator.EntrySkipped {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("ok %s, dead %s", r["ok"].Status, r["dead"].Status))
					mu.Unlock()
				}
				time.Sleep(2 * time.Millisecond)
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	kill()
	// Load goes on until both replicas are on shared state again.
	deadline := time.Now().Add(20 * time.Second)
	for {
		back := true
		for _, a := range rs {
			back = back && !a.StoreDegraded()
		}
		if back {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replicas never returned to shared state after the failover")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()

	t.Logf("%d queries during the failover", queries.Load())
	if len(failed) > 0 {
		t.Errorf("%d of %d queries went wrong during the failover, e.g. %s", len(failed), queries.Load(), failed[0])
	}
	if n := dead.calls.Load() - tripped; n != 0 {
		t.Errorf("the dead portal received %d calls during the failover, want 0", n)
	}
	for i, a := range rs {
		if got := breakerState(t, a, deadID); got != breaker.Open {
			t.Errorf("replica %d: breaker %s after the failover, want open", i, got)
		}
	}
	// A new trip is shared through the promoted primary.
	if err := rs[0].Breakers.Reset(context.Background(), deadID); err != nil {
		t.Fatal(err)
	}
	// Replica 1 sees it at once, or, should a slow answer have sent it to
	// local state meanwhile, once it is back on shared state (a second
	// of steady answers).
	deadline = time.Now().Add(5 * time.Second)
	for got := breakerState(t, rs[1], deadID); got != breaker.Closed; got = breakerState(t, rs[1], deadID) {
		if time.Now().After(deadline) {
			t.Fatalf("after a reset on replica 0, replica 1 sees %s, want closed (degraded %v)", got, rs[1].StoreDegraded())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
