package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/ratelimit/ratelimittest"
	redisstore "github.com/multas/aggregator/store/redis"
)

// suiteTimeout bounds Redis calls in the behaviour suites, which test
// semantics, not latency: a loaded test machine must not make them degrade.
const suiteTimeout = 2 * time.Second

func TestBreakerStoreSuite(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	breakertest.Run(t, func(t *testing.T) breaker.Store {
		s := newStores(t, c, redisstore.Options{Prefix: testPrefix(t, c), Timeout: suiteTimeout})
		t.Cleanup(func() {
			if s.Degraded() {
				t.Errorf("the store degraded during the suite")
			}
		})
		return s.Breakers
	})
}

func TestLimitStoreSuite(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	ratelimittest.Run(t, func(t *testing.T) ratelimit.Store {
		s := newStores(t, c, redisstore.Options{Prefix: testPrefix(t, c), Timeout: suiteTimeout})
		t.Cleanup(func() {
			if s.Degraded() {
				t.Errorf("the store degraded during the suite")
			}
		})
		return s.Limits
	})
}

func TestBreakerStoreFleetSuite(t *testing.T) {
	t.Parallel()
	breakertest.RunFleet(t, func(t *testing.T, n int) []breaker.Store {
		base := testClient(t)
		prefix := testPrefix(t, base)
		out := make([]breaker.Store, n)
		for i := range out {
			o, err := redisstore.ClientOptions(testURL(), suiteTimeout)
			if err != nil {
				t.Fatal(err)
			}
			c := redis.NewClient(o)
			t.Cleanup(func() { _ = c.Close() })
			// Flushes when the suite says, so that its bounds are exact.
			s := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, FlushInterval: time.Hour})
			out[i] = flusher{s.Breakers, s}
		}
		return out
	})
}

// flusher is a replica's breaker store with its Stores' Flush.
type flusher struct {
	*redisstore.BreakerStore
	stores *redisstore.Stores
}

func (f flusher) Flush(ctx context.Context) error { return f.stores.Flush(ctx) }

// Replicas on one Redis keep the fleet's budget, leasing tokens a flush
// interval at a time: never more than one flush interval's worth over it.
func TestLimitStoreFleetSuite(t *testing.T) {
	t.Parallel()
	const flush = 20 * time.Millisecond
	ratelimittest.RunFleet(t, flush, func(t *testing.T, n int) []ratelimit.Store {
		base := testClient(t)
		prefix := testPrefix(t, base)
		out := make([]ratelimit.Store, n)
		for i := range out {
			s := newStores(t, base, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, FlushInterval: flush})
			out[i] = s.Limits
		}
		return out
	})
}
