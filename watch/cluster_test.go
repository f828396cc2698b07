package watch

import (
	"context"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/async"
	"github.com/multas/aggregator/internal/redistest"
)

// On a Redis Cluster every script of the store touches keys of one slot: a
// watch's life (created, checked, its baseline delivered, listed, its
// subject forgotten) goes with no CROSSSLOT error, and every key of the
// watches lives in the slot of {watches}, every key of their deliveries in
// that of {async}.
func TestRedisStoreOnCluster(t *testing.T) {
	t.Parallel()
	c, _ := redistest.ConnectCluster(t)
	prefix := redistest.ClusterPrefix(t, c, "aggtest:watch:")
	ctx := context.Background()
	f := newFleet(t, "caba")
	f.portals[0].set(plate, acta{Nro: "Q-1", Estado: "IMPAGA"})
	r := f.replica(replicaOpts{watches: NewRedisStore(c, prefix+"watches:"), deliveries: async.NewRedisStore(c, prefix+"async:")})
	v, err := r.m.Create(ctx, Request{Owner: "fleet", Query: q, CallbackURL: f.recv.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the baseline", func() bool { return len(f.recv.hooks()) == 1 })
	if p, err := r.m.List(ctx, "fleet", "", 10); err != nil || len(p.Watches) != 1 {
		t.Errorf("List = %+v, %v", p, err)
	}
	slots := map[string]int64{}
	for _, tag := range []string{"{watches}", "{async}"} {
		s, err := c.ClusterKeySlot(ctx, tag).Result()
		if err != nil {
			t.Fatal(err)
		}
		slots[tag] = s
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
			tag := "{watches}"
			if strings.Contains(k, "{async}") {
				tag = "{async}"
			}
			if slot != slots[tag] {
				t.Errorf("key %s is in slot %d, want the slot of %s, %d", k, slot, tag, slots[tag])
			}
			n++
		}
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 4 {
		t.Errorf("%d keys written, want the watch, its schedule and indexes", n)
	}
	if err := r.m.Forget(ctx, q); err != nil {
		t.Fatalf("Forget on a cluster: %v", err)
	}
	if _, err := r.m.Get(ctx, "fleet", v.WatchID); err == nil {
		t.Error("the watch of a forgotten subject is still there")
	}
}
