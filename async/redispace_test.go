package async

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// releaseBacklog runs n items of key through the paces in turn (item i on
// paces[i%len(paces)], as on replicas sharing the work): each asks at t0,
// then again at its slot, until it goes. It returns when each went.
func releaseBacklog(t *testing.T, paces []pace, key string, n int, t0 time.Time) []time.Time {
	t.Helper()
	slots := make([]time.Time, n)
	var went []time.Time
	pending := make([]int, 0, n)
	for i := range n {
		if w := paces[i%len(paces)].admit(key, &slots[i], t0); w == 0 {
			went = append(went, t0)
		} else {
			pending = append(pending, i)
		}
	}
	for rounds := 0; len(pending) > 0; rounds++ {
		if rounds > 10*n {
			t.Fatalf("backlog not released: %d items left", len(pending))
		}
		// The earliest slot is honoured first, at its time.
		slices.SortFunc(pending, func(a, b int) int { return slots[a].Compare(slots[b]) })
		i := pending[0]
		now := slots[i]
		if w := paces[i%len(paces)].admit(key, &slots[i], now); w == 0 {
			went = append(went, now)
			pending = pending[1:]
		}
	}
	return went
}

func checkSpacing(t *testing.T, went []time.Time, n int, interval time.Duration) {
	t.Helper()
	if len(went) != n {
		t.Fatalf("%d calls went, want %d", len(went), n)
	}
	slices.SortFunc(went, time.Time.Compare)
	for i := 1; i < len(went); i++ {
		if d := went[i].Sub(went[i-1]); d < interval {
			t.Errorf("calls %d and %d went %v apart, want ≥ %v", i-1, i, d, interval)
		}
	}
}

func TestRedisPaceFleetWide(t *testing.T) {
	c, prefix := testRedis(t)
	t0 := time.Unix(1_700_000_000, 0)
	const key, n, iv = "source\x00caba", 10, 200 * time.Millisecond

	// Two replicas on one Redis release the backlog as one pacer would.
	a, b := newRedisPace(c, prefix, 5), newRedisPace(c, prefix, 5)
	a.onError = func(err error) { t.Errorf("replica a: %v", err) }
	b.onError = func(err error) { t.Errorf("replica b: %v", err) }
	fleet := releaseBacklog(t, []pace{a, b}, key, n, t0)
	checkSpacing(t, fleet, n, iv)

	one := releaseBacklog(t, []pace{newPacer(5)}, key, n, t0)
	if !slices.EqualFunc(fleet, one, time.Time.Equal) {
		t.Errorf("two replicas released at %v, one pacer at %v", fleet, one)
	}

	// Per replica, the same backlog would have gone twice as fast.
	local := releaseBacklog(t, []pace{newPacer(5), newPacer(5)}, key, n, t0)
	if d := local[1].Sub(local[0]); d >= iv {
		t.Fatalf("two local pacers went %v apart: the test does not tell them from a shared one", d)
	}
}

func TestRedisPaceKeyAndReset(t *testing.T) {
	c, prefix := testRedis(t)
	ctx := context.Background()
	t0 := time.Unix(1_700_000_000, 0)
	origin := "origin\x00https://hooks.example.com:443"
	p := newRedisPace(c, prefix, 5)
	p.onError = func(err error) { t.Errorf("pace: %v", err) }

	slots := make([]time.Time, 4)
	for i := range slots {
		p.admit(origin, &slots[i], t0)
	}
	keys, err := c.Keys(ctx, prefix+"pace:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || strings.Contains(keys[0], "hooks.example.com") {
		t.Fatalf("pace keys %q, want one with the origin hashed", keys)
	}
	ttl, err := c.PTTL(ctx, keys[0]).Result()
	// The last slot is 600ms ahead, the next free one 800ms: a minute beyond.
	if err != nil || ttl < time.Minute || ttl > time.Minute+time.Second {
		t.Errorf("pace key TTL %v (%v), want a minute beyond the slots", ttl, err)
	}

	// Reset forgets the reserved slots: the next call goes one interval
	// after the last one, not after the backlog.
	p.reset(origin)
	if n, err := c.HExists(ctx, keys[0], "next").Result(); err != nil || n {
		t.Fatalf("after reset, next is still set (%v)", err)
	}
	var s time.Time
	if w := p.admit(origin, &s, t0.Add(50*time.Millisecond)); w != 150*time.Millisecond {
		t.Errorf("after reset: wait %v, want 150ms (one interval after the last call)", w)
	}
}

func TestRedisPaceUnreachable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 100 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	p := newRedisPace(c, "aggtest:unreachable:", 5)
	var errs int
	p.onError = func(error) { errs++ }
	t0 := time.Unix(1_700_000_000, 0)

	// Paced by the replica's own pacer: the same answers, and no error.
	var a, b time.Time
	if w := p.admit("k", &a, t0); w != 0 {
		t.Fatalf("first call waits %v, want 0", w)
	}
	if w := p.admit("k", &b, t0); w != 200*time.Millisecond || !b.Equal(t0.Add(200*time.Millisecond)) {
		t.Fatalf("second call: wait %v slot %v, want 200ms", w, b)
	}
	if w := p.admit("k", &b, t0.Add(200*time.Millisecond)); w != 0 || !b.IsZero() {
		t.Fatalf("slot honoured: wait %v, slot %v", w, b)
	}
	p.reset("k")
	p.prune(t0.Add(time.Hour))
	if errs == 0 {
		t.Error("Redis errors went unreported")
	}
}
