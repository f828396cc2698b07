package ratelimit_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator/ratelimit"
)

func TestKeysLookup(t *testing.T) {
	t.Parallel()
	keys := ratelimit.NewKeys([]ratelimit.Key{
		{Name: "alice", Key: "s3cret-a", RPS: 1},
		{Name: "bob", Key: "s3cret-b", RPS: 1},
		{Name: "carol", Key: ""}, // never matches
		{Name: "dave", Key: "s3cret-a"},
	}, nil)
	tests := []struct {
		secret string
		want   string
		ok     bool
	}{
		{"s3cret-a", "alice", true}, // the first of two entries with one secret
		{"s3cret-b", "bob", true},
		{"s3cret-", "", false},
		{"s3cret-a ", "", false},
		{"S3CRET-A", "", false},
		{"s3cret-c", "", false},
		{"", "", false},
		{string(make([]byte, 4096)), "", false},
	}
	for _, tt := range tests {
		name, ok := keys.Lookup(tt.secret)
		if name != tt.want || ok != tt.ok {
			t.Errorf("Lookup(%.12q) = %q, %v; want %q, %v", tt.secret, name, ok, tt.want, tt.ok)
		}
	}
	if name, ok := ratelimit.NewKeys(nil, nil).Lookup("anything"); ok {
		t.Errorf("Lookup without keys = %q, true", name)
	}
}

func TestKeysTake(t *testing.T) {
	t.Parallel()
	type want struct {
		advance time.Duration
		quota   ratelimit.Quota
		headers map[string]string // "" means absent
	}
	allowed := func(limit, remaining int, reset, window time.Duration, rl, policy string) want {
		return want{
			quota:   ratelimit.Quota{Allowed: true, Limit: limit, Remaining: remaining, Reset: reset, Window: window},
			headers: map[string]string{"RateLimit": rl, "RateLimit-Policy": policy, "Retry-After": ""},
		}
	}
	refused := func(limit int, after, window time.Duration, rl, policy, retry string) want {
		return want{
			quota:   ratelimit.Quota{Limit: limit, Reset: after, Window: window, RetryAfter: after},
			headers: map[string]string{"RateLimit": rl, "RateLimit-Policy": policy, "Retry-After": retry},
		}
	}
	none := map[string]string{"RateLimit": "", "RateLimit-Policy": "", "Retry-After": ""}
	ms := time.Millisecond
	tests := []struct {
		name  string
		key   ratelimit.Key
		takes []want
	}{
		{
			name: "rps 1 burst 10",
			key:  ratelimit.Key{RPS: 1, Burst: 10},
			takes: []want{
				allowed(10, 9, time.Second, 10*time.Second, `"default";r=9;t=1`, `"default";q=10;w=10`),
				allowed(10, 8, time.Second, 10*time.Second, `"default";r=8;t=1`, `"default";q=10;w=10`),
			},
		},
		{
			name: "the window is rounded up",
			key:  ratelimit.Key{RPS: 2, Burst: 5},
			takes: []want{
				allowed(5, 4, 500*ms, 3*time.Second, `"default";r=4;t=1`, `"default";q=5;w=3`),
			},
		},
		{
			name: "a window below a second is one second",
			key:  ratelimit.Key{RPS: 100, Burst: 1},
			takes: []want{
				allowed(1, 0, 10*ms, time.Second, `"default";r=0;t=1`, `"default";q=1;w=1`),
				refused(1, 10*ms, time.Second, `"default";r=0;t=1`, `"default";q=1;w=1`, "1"),
			},
		},
		{
			name: "refusals say when, and tokens come back",
			key:  ratelimit.Key{RPS: 0.5, Burst: 2},
			takes: []want{
				allowed(2, 1, 2*time.Second, 4*time.Second, `"default";r=1;t=2`, `"default";q=2;w=4`),
				allowed(2, 0, 2*time.Second, 4*time.Second, `"default";r=0;t=2`, `"default";q=2;w=4`),
				refused(2, 2*time.Second, 4*time.Second, `"default";r=0;t=2`, `"default";q=2;w=4`, "2"),
				refused(2, 2*time.Second, 4*time.Second, `"default";r=0;t=2`, `"default";q=2;w=4`, "2"),
				func() want {
					w := refused(2, 500*ms, 4*time.Second, `"default";r=0;t=1`, `"default";q=2;w=4`, "1")
					w.advance = 1500 * ms
					return w
				}(),
				func() want {
					w := allowed(2, 0, 2*time.Second, 4*time.Second, `"default";r=0;t=2`, `"default";q=2;w=4`)
					w.advance = 500 * ms
					return w
				}(),
				func() want {
					w := allowed(2, 1, 2*time.Second, 4*time.Second, `"default";r=1;t=2`, `"default";q=2;w=4`)
					w.advance = time.Hour // full again: this take leaves one
					return w
				}(),
			},
		},
		{
			name: "burst 0 is ceil(rps)",
			key:  ratelimit.Key{RPS: 2.5},
			takes: []want{
				allowed(3, 2, 400*ms, 2*time.Second, `"default";r=2;t=1`, `"default";q=3;w=2`),
			},
		},
		{
			name:  "no budget: allowed, nothing announced",
			key:   ratelimit.Key{},
			takes: []want{{quota: ratelimit.Quota{Allowed: true}, headers: none}, {quota: ratelimit.Quota{Allowed: true}, headers: none}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			now := t0
			tt.key.Name, tt.key.Key = "alice", "secret"
			keys := ratelimit.NewKeys([]ratelimit.Key{tt.key}, func() time.Time { return now })
			for i, w := range tt.takes {
				now = now.Add(w.advance)
				q := keys.Take("alice")
				if q != w.quota {
					t.Errorf("take %d: %+v, want %+v", i, q, w.quota)
				}
				h := http.Header{}
				q.SetHeaders(h)
				for field, want := range w.headers {
					if got := h.Get(field); got != want {
						t.Errorf("take %d: %s = %q, want %q", i, field, got, want)
					}
				}
			}
		})
	}
}

func TestKeysBudgetsAreIndependent(t *testing.T) {
	t.Parallel()
	keys := ratelimit.NewKeys([]ratelimit.Key{
		{Name: "alice", Key: "a", RPS: 1, Burst: 2},
		{Name: "bob", Key: "b", RPS: 1, Burst: 1},
	}, fixed(t0))
	for i, tt := range []struct {
		name string
		want bool
	}{
		{"alice", true}, {"alice", true}, {"alice", false},
		{"bob", true}, {"bob", false}, {"alice", false},
		{"mallory", false}, // unknown names are never allowed
	} {
		if got := keys.Take(tt.name).Allowed; got != tt.want {
			t.Errorf("take %d of %s: allowed %v, want %v", i, tt.name, got, tt.want)
		}
	}
}

func TestKeysConcurrentTakeSpendsExactlyBurst(t *testing.T) {
	t.Parallel()
	const burst = 25
	keys := ratelimit.NewKeys([]ratelimit.Key{{Name: "alice", Key: "a", RPS: 1, Burst: burst}}, fixed(t0))
	var (
		wg      sync.WaitGroup
		allowed atomic.Int32
	)
	for range 200 {
		wg.Go(func() {
			if _, ok := keys.Lookup("a"); !ok {
				t.Error("Lookup failed")
			}
			if keys.Take("alice").Allowed {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if got := allowed.Load(); got != burst {
		t.Errorf("200 concurrent takes allowed %d, want %d", got, burst)
	}
}
