package redisstore_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	redisstore "github.com/multas/aggregator/store/redis"
)

// TestClaim: of the replicas that see one change, one claims it; once
// its lease ends, the next may.
func TestClaim(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	prefix := testPrefix(t, c)
	a := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
	b := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
	ctx := context.Background()
	steps := []struct {
		who  *redisstore.Stores
		key  string
		want bool
	}{
		{a, "mapping:{caba}:shape:1", true},
		{b, "mapping:{caba}:shape:1", false},
		{a, "mapping:{caba}:shape:1", false},
		{b, "mapping:{caba}:shape:2", true},
		{b, "mapping:{rosario}:shape:1", true},
	}
	for i, s := range steps {
		if got := s.who.Claim(ctx, s.key, 300*time.Millisecond); got != s.want {
			t.Errorf("step %d: Claim(%s) = %v, want %v", i, s.key, got, s.want)
		}
	}
	time.Sleep(400 * time.Millisecond)
	if !b.Claim(ctx, "mapping:{caba}:shape:1", time.Second) {
		t.Error("a claim whose lease ended is still held")
	}
}

// TestMappingEventShared: a mapping event one replica appends is read by
// the others whole: its source, names and counts.
func TestMappingEventShared(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	prefix := testPrefix(t, c)
	a := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
	b := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
	ev := breaker.Event{Time: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC), Kind: breaker.KindMapping,
		BreakerKey: "caba", Operation: aggregator.ByDomain, Reason: "shape", Source: "caba",
		Added: []string{"/importe"}, Removed: []string{"/monto"}, Unmapped: map[string]map[string]int{"amount": {"missing": 2}},
		Evidence: breaker.Evidence{WindowSeconds: 3600}}
	a.Events.Append(ev)
	got := b.Events.Latest(10)
	if len(got) != 1 || !reflect.DeepEqual(got[0], ev) {
		t.Errorf("read %+v, want %+v", got, ev)
	}
}
