// Package redistest finds the Redis server of the tests: the one named by
// AGGREGATOR_TEST_REDIS (scripts/test.sh starts a throwaway one), else the
// default port on loopback. Without a Redis a test is skipped, except under
// CI=true, where it fails: the Redis tests never silently skip in CI.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// URL is the test Redis's URL.
func URL() string {
	if u := os.Getenv("AGGREGATOR_TEST_REDIS"); u != "" {
		return u
	}
	return "redis://127.0.0.1:6379/0"
}

// Connect returns a client of the test Redis, closed when the test ends,
// and its URL.
func Connect(t testing.TB) (*redis.Client, string) {
	t.Helper()
	u := URL()
	o, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("AGGREGATOR_TEST_REDIS: %v", err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	Ping(t, c)
	return c, u
}

// Ping skips the test (fails it under CI=true) when c's server does not
// answer.
func Ping(t testing.TB, c *redis.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no Redis at %s (set AGGREGATOR_TEST_REDIS): %v", URL(), err)
		}
		t.Skipf("no Redis at %s (set AGGREGATOR_TEST_REDIS): %v", URL(), err)
	}
}

// Prefix returns a key prefix of the test's own, starting with base, so
// that tests share one Redis in parallel; its keys are deleted when the
// test ends (before c is closed).
func Prefix(t testing.TB, c *redis.Client, base string) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	prefix := base + hex.EncodeToString(b[:]) + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		var keys []string
		iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		for _, k := range keys {
			c.Del(ctx, k)
		}
	})
	return prefix
}
