package redisstore_test

import (
	"testing"
	"time"

	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/internal/redistest"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/memory/memorytest"
	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/ratelimit/ratelimittest"
	redisstore "github.com/multas/aggregator/store/redis"
)

// The behaviour suites hold on a Redis Cluster: every script touches the
// keys of one hash slot, and the stores never degrade.
func TestSuitesOnCluster(t *testing.T) {
	t.Parallel()
	c, addrs := redistest.ConnectCluster(t)
	client, err := redisstore.NewClient(redisstore.Connection{ClusterAddrs: addrs, Timeout: suiteTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	stores := func(t *testing.T) *redisstore.Stores {
		s := newStores(t, client, redisstore.Options{Prefix: redistest.ClusterPrefix(t, c, "aggtest:"), Timeout: suiteTimeout})
		t.Cleanup(func() {
			if s.Degraded() {
				t.Errorf("the store degraded during the suite")
			}
		})
		return s
	}
	t.Run("breakers", func(t *testing.T) {
		breakertest.Run(t, func(t *testing.T) breaker.Store { return stores(t).Breakers })
	})
	t.Run("fleet", func(t *testing.T) {
		breakertest.RunFleet(t, func(t *testing.T, n int) []breaker.Store {
			prefix := redistest.ClusterPrefix(t, c, "aggtest:")
			out := make([]breaker.Store, n)
			for i := range out {
				cl, err := redisstore.NewClient(redisstore.Connection{ClusterAddrs: addrs, Timeout: suiteTimeout})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = cl.Close() })
				s := newStores(t, cl, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, FlushInterval: time.Hour})
				out[i] = flusher{s.Breakers, s}
			}
			return out
		})
	})
	t.Run("limits", func(t *testing.T) {
		ratelimittest.Run(t, func(t *testing.T) ratelimit.Store { return stores(t).Limits })
	})
	t.Run("memory", func(t *testing.T) {
		memorytest.Run(t, func(t *testing.T) memory.Store { return stores(t).Memory })
	})
}
