package async

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/internal/redistest"
)

// On a Redis Cluster every script and MULTI of the store touches keys of
// one slot: the behaviour of testStore holds, with no CROSSSLOT error, and
// the keys of the work all live in the slot of their hash tag.
func TestRedisStoreOnCluster(t *testing.T) {
	c, _ := redistest.ConnectCluster(t)
	prefix := redistest.ClusterPrefix(t, c, "aggtest:async:")
	testStore(t, NewRedisStore(c, prefix))

	ctx := context.Background()
	want, err := c.ClusterKeySlot(ctx, prefix+"{async}:q:due").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	err = c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			slot, err := c.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				return err
			}
			if slot != want {
				t.Errorf("key %s is in slot %d, want the slot of {async}, %d", k, slot, want)
			}
			n++
		}
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no keys written")
	}

	// Pacing on a cluster: fleet-wide spacing, as on one Redis.
	t0 := time.Unix(1_700_000_000, 0)
	a, b := newRedisPace(c, prefix, 5), newRedisPace(c, prefix, 5)
	a.onError = func(err error) { t.Errorf("replica a: %v", err) }
	b.onError = func(err error) { t.Errorf("replica b: %v", err) }
	checkSpacing(t, releaseBacklog(t, []pace{a, b}, "source\x00caba", 10, t0), 10, 200*time.Millisecond)
}
