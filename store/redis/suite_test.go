package redisstore_test

import (
	"testing"
	"time"

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
