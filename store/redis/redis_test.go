package redisstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	redisstore "github.com/multas/aggregator/store/redis"
)

// testURL is the Redis the tests use: AGGREGATOR_TEST_REDIS, or the
// default port on loopback.
func testURL() string {
	if u := os.Getenv("AGGREGATOR_TEST_REDIS"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// testClient connects to the test Redis. Without one the test is skipped,
// except in CI, where it fails: the Redis tests never silently skip there.
func testClient(t testing.TB) *redis.Client {
	t.Helper()
	o, err := redisstore.ClientOptions(testURL(), time.Second)
	if err != nil {
		t.Fatalf("AGGREGATOR_TEST_REDIS: %v", err)
	}
	c := redis.NewClient(o)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		_ = c.Close()
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Redis at %s (set AGGREGATOR_TEST_REDIS): %v", testURL(), err)
		}
		t.Skipf("no Redis at %s (set AGGREGATOR_TEST_REDIS): %v", testURL(), err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// testPrefix is a key prefix of the test's own; its keys are deleted when
// the test ends.
func testPrefix(t testing.TB, c *redis.Client) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := "aggtest:" + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		var keys []string
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if len(keys) > 0 {
			c.Del(ctx, keys...)
		}
	})
	return prefix
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
