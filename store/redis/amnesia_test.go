package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/internal/redistest"
	"github.com/multas/aggregator/ratelimit"
	redisstore "github.com/multas/aggregator/store/redis"
)

// An open breaker stays open through a Redis that loses its data (SPEC 11,
// "No amnesia"): the replicas write back what they know, the admin API
// never shows it closed while they skip the portal, and when its open time
// ends the dead portal gets one probe from the whole fleet, not a burst.
func TestNoAmnesia(t *testing.T) {
	t.Parallel()
	for _, loss := range []string{"FLUSHALL", "restart"} {
		t.Run(loss, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartServer(t)
			s := breakertest.Settings()
			s.ConsecutiveFailures, s.OpenFor, s.ProbeLease = 3, 3*time.Second, 10*time.Second
			var sets []*breaker.Set
			var stores []*redisstore.Stores
			for range 3 {
				// Timeouts a loaded machine keeps to: 30 callers a replica
				// ask Redis at once when the open time ends, and a replica
				// whose answer waited for a CPU longer would decide on its
				// own, probe included. A stopped Redis is refused at once.
				c := serverClient(t, srv, time.Second)
				st := newStores(t, c, redisstore.Options{Prefix: "agg:", Timeout: time.Second,
					HealthInterval: 10 * time.Millisecond, StableFor: 200 * time.Millisecond})
				set := breaker.NewSet(st.Breakers, breaker.Options{Events: st.Events})
				set.Add(caba, "caba", s)
				call(t, set, succeed) // each replica has a view of the breaker
				sets, stores = append(sets, set), append(stores, st)
			}
			ctx := context.Background()
			for range 3 {
				call(t, sets[0], fail)
			}
			st, err := sets[0].Status(ctx, caba)
			if err != nil || st.State != breaker.Open {
				t.Fatalf("status = %+v, %v; want open", st, err)
			}
			openUntil := st.OpenUntil
			for i, set := range sets {
				deadline := time.Now().Add(time.Second)
				for call(t, set, fail) {
					if time.Now().After(deadline) {
						t.Fatalf("replica %d still calls the dead portal", i)
					}
				}
			}

			switch loss {
			case "FLUSHALL":
				c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
				if err := c.FlushAll(ctx).Err(); err != nil {
					t.Fatal(err)
				}
				_ = c.Close()
			case "restart":
				srv.Stop()
				srv.Start()
				// The replicas find out, decide locally meanwhile, and come
				// back once Redis has answered steadily.
				deadline := time.Now().Add(5 * time.Second)
				for _, st := range stores {
					_ = st.Ping(ctx)
					for st.Degraded() && time.Now().Before(deadline) {
						time.Sleep(10 * time.Millisecond)
					}
				}
			}
			if time.Now().After(openUntil) {
				t.Skip("the machine is too busy: the open time ended before the data was lost")
			}
			for i, set := range sets {
				st, err := set.Status(ctx, caba)
				if err != nil || st.State != breaker.Open || !st.OpenUntil.Equal(openUntil) {
					t.Errorf("replica %d: status after the %s = %s until %v (%v), want open until %v",
						i, loss, st.State, st.OpenUntil, err, openUntil)
				}
			}

			time.Sleep(time.Until(openUntil))
			var (
				permits atomic.Int64
				wg      sync.WaitGroup
				end     = time.Now().Add(500 * time.Millisecond)
			)
			for _, set := range sets {
				for range 10 {
					wg.Go(func() {
						for time.Now().Before(end) {
							c, err := set.Allow(ctx, caba)
							if err != nil {
								if !errors.Is(err, breaker.ErrOpen) {
									t.Errorf("Allow: %v", err)
								}
								time.Sleep(time.Millisecond)
								continue
							}
							permits.Add(1)
							time.Sleep(20 * time.Millisecond) // the portal takes its time to fail
							c.Done(ctx, fail)
						}
					})
				}
			}
			wg.Wait()
			if n := permits.Load(); n != 1 {
				t.Errorf("the dead portal received %d calls from 3 replicas once the open time ended after the %s, want the one probe", n, loss)
			}
			for i, st := range stores {
				if st.Degraded() {
					t.Errorf("replica %d still degraded", i)
				}
			}
		})
	}
}

// A pause set through a replica outlives a FLUSHALL: the replica writes it
// back when it reads it again, and the others see it.
func TestPauseSurvivesFlushAll(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	ctx := context.Background()
	var lims []*ratelimit.Limiter
	for range 2 {
		c := serverClient(t, srv, time.Second)
		st := newStores(t, c, redisstore.Options{Prefix: "agg:", Timeout: time.Second})
		lim := ratelimit.New(st.Limits, nil)
		lim.OnStoreError = func(err error) { t.Errorf("store error: %v", err) }
		lim.Configure("caba", ratelimit.Settings{})
		lims = append(lims, lim)
	}
	lims[0].Pause(ctx, "caba", time.Minute)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if err := c.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1100 * time.Millisecond) // what was read is read again
	if d := lims[0].PausedFor(ctx, "caba"); d < 50*time.Second {
		t.Errorf("the replica that set the pause sees %v left after the FLUSHALL, want about a minute", d)
	}
	deadline := time.Now().Add(2 * time.Second)
	for lims[1].PausedFor(ctx, "caba") < 50*time.Second {
		if time.Now().After(deadline) {
			t.Fatal("the other replica does not see the pause written back")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
