package redisstore_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/ratelimit"
	redisstore "github.com/multas/aggregator/store/redis"
)

// benchStores returns a Redis store for a benchmark, failing it if the store
// degraded (the numbers would be the local store's). Its timeout is a second,
// not the default 50ms: on a loaded machine a stall would degrade the store
// and the numbers would be the local store's.
func benchStores(b *testing.B) *redisstore.Stores {
	c := testClient(b)
	o, err := redisstore.ClientOptions(testURL(), time.Second)
	if err != nil {
		b.Fatal(err)
	}
	client := redis.NewClient(o)
	b.Cleanup(func() { _ = client.Close() })
	st := newStores(b, client, redisstore.Options{Prefix: testPrefix(b, c), Timeout: time.Second})
	// Until it listens, a replica asks Redis on every decision.
	for deadline := time.Now().Add(10 * time.Second); !st.Listening(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.Fatal("the store never listened to its invalidation channel")
		}
	}
	b.Cleanup(func() {
		if st.Degraded() {
			b.Error("the store degraded: these numbers are the local store's")
		}
	})
	return st
}

// BenchmarkAllowDone is the breaker's cost per source call on a closed
// breaker: Allow, then Done with a success, through a breaker.Set.
func BenchmarkAllowDone(b *testing.B) {
	stores := map[string]func(*testing.B) breaker.Store{
		"memory": func(*testing.B) breaker.Store { return breaker.NewMemoryStore() },
		"redis":  func(b *testing.B) breaker.Store { return benchStores(b).Breakers },
	}
	for _, name := range []string{"memory", "redis"} {
		newSet := func(b *testing.B, s breaker.Settings) *breaker.Set {
			set := breaker.NewSet(stores[name](b), breaker.Options{})
			set.Add(caba, "caba", s)
			return set
		}
		calls := func(b *testing.B, set *breaker.Set, r breaker.Report) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				c, err := set.Allow(ctx, caba)
				if err != nil {
					b.Fatal(err)
				}
				c.Done(ctx, r)
			}
		}
		b.Run(name, func(b *testing.B) { calls(b, newSet(b, breakertest.Settings()), succeed) })
		b.Run(name+"/failures", func(b *testing.B) {
			// Failures that never trip (min_calls out of reach): each one
			// waits for counts the background flush has on their way.
			s := breakertest.Settings()
			s.MinCalls, s.ConsecutiveFailures = 1<<30, 0
			calls(b, newSet(b, s), fail)
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			set := newSet(b, breakertest.Settings())
			ctx := context.Background()
			b.ReportAllocs()
			b.SetParallelism(8) // calls in flight per CPU, as in a fan-out
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					c, err := set.Allow(ctx, caba)
					if err != nil {
						b.Error(err)
						return
					}
					c.Done(ctx, succeed)
				}
			})
		})
	}
}

// BenchmarkDecide is the rate limiter's cost per source call with a budget
// that never runs out: the pause read and the token.
func BenchmarkDecide(b *testing.B) {
	stores := map[string]func(*testing.B) ratelimit.Store{
		"memory": func(*testing.B) ratelimit.Store { return ratelimit.NewMemoryStore() },
		"redis":  func(b *testing.B) ratelimit.Store { return benchStores(b).Limits },
	}
	for _, name := range []string{"memory", "redis"} {
		b.Run(name, func(b *testing.B) {
			lim := ratelimit.New(stores[name](b), nil)
			lim.Configure("caba", ratelimit.Settings{RPS: 1e9, Burst: 1e9})
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := lim.Decide(ctx, "caba", time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSourceCall is one source call as the fan-out makes it, against
// a portal on loopback: the limiter (pause and token), the breaker's permit,
// the HTTP call, the verdict; many in flight. Its throughput in Redis mode
// against memory mode is the figure the issue asks for: with a portal that
// answers at once (the store's overhead is all there is) and with one that
// takes 5ms (still faster than real portals).
func BenchmarkSourceCall(b *testing.B) {
	for _, latency := range []time.Duration{0, 5 * time.Millisecond} {
		portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			time.Sleep(latency)
			_, _ = io.WriteString(w, `{"resultado":{"actas":[]}}`)
		}))
		b.Cleanup(portal.Close)
		client := portal.Client()
		client.Transport.(*http.Transport).MaxIdleConnsPerHost = 512
		for _, name := range []string{"memory", "redis"} {
			b.Run(fmt.Sprintf("portal=%v/%s", latency, name), func(b *testing.B) {
				var bs breaker.Store = breaker.NewMemoryStore()
				var ls ratelimit.Store = ratelimit.NewMemoryStore()
				if name == "redis" {
					st := benchStores(b)
					bs, ls = st.Breakers, st.Limits
				}
				set := breaker.NewSet(bs, breaker.Options{})
				set.Add(caba, "caba", breakertest.Settings())
				lim := ratelimit.New(ls, nil)
				// A budget that never runs out, and a second of wait
				// allowed: concurrent callers' clocks interleave.
				lim.Configure("caba", ratelimit.Settings{RPS: 1e9, Burst: 1e9, MaxWait: time.Second})
				ctx := context.Background()
				b.ReportAllocs()
				b.SetParallelism(32)
				start := time.Now()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if _, err := lim.Decide(ctx, "caba", time.Second); err != nil {
							b.Error(err)
							return
						}
						c, err := set.Allow(ctx, caba)
						if err != nil {
							b.Error(err)
							return
						}
						t0 := time.Now()
						resp, err := client.Get(portal.URL)
						if err != nil {
							b.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						_ = resp.Body.Close()
						c.Done(ctx, breaker.Report{Outcome: succeed.Outcome, Status: resp.StatusCode, Elapsed: time.Since(t0)})
					}
				})
				b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
			})
		}
	}
}
