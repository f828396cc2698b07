package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/multas/aggregator/internal/redistest"
	redisstore "github.com/multas/aggregator/store/redis"
)

// testURL is the test Redis's URL (see internal/redistest).
func testURL() string { return redistest.URL() }

// testClient connects to the test Redis. Without one the test is skipped,
// except in CI, where it fails: the Redis tests never silently skip there.
func testClient(t testing.TB) *redis.Client {
	t.Helper()
	o, err := redisstore.ClientOptions(testURL(), time.Second)
	if err != nil {
		t.Fatalf("AGGREGATOR_TEST_REDIS: %v", err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	redistest.Ping(t, c)
	return c
}

// testPrefix is a key prefix of the test's own; its keys are deleted when
// the test ends.
func testPrefix(t testing.TB, c *redis.Client) string {
	t.Helper()
	return redistest.Prefix(t, c, "aggtest:")
}

// newStores returns stores on c under prefix, closed when the test ends.
func newStores(t testing.TB, c redis.UniversalClient, opts redisstore.Options) *redisstore.Stores {
	t.Helper()
	s := redisstore.New(c, opts)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// quiet drops go-redis's own log lines (its reconnection attempts while the
// degradation tests keep Redis down).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain also fails the package's tests if any goroutine outlives them:
// every client and store a test makes must be closed by it.
func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}
