package redisstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/memory/memorytest"
	redisstore "github.com/multas/aggregator/store/redis"
)

func TestMemoryStoreSuite(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	memorytest.Run(t, func(t *testing.T) memory.Store {
		s := newStores(t, c, redisstore.Options{Prefix: testPrefix(t, c), Timeout: suiteTimeout})
		t.Cleanup(func() {
			if s.Degraded() {
				t.Errorf("the store degraded during the suite")
			}
		})
		return s.Memory
	})
}

var (
	memPolicy = memory.Policy{Fresh: time.Minute, Stale: time.Hour, Fingerprint: "0123456789abcdef"}
	memPlate  = aggregator.Query{Domain: "AB123CD"}
)

// TestMemoryStoreUntrusted plants what Redis may hold instead of what the
// store writes, at every key a subject and a source have: each is absent
// (never an error that reaches a client), the stores do not degrade, and
// the next write puts things right.
func TestMemoryStoreUntrusted(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	key := memorytest.Key(t)
	keys, _ := memory.NewKeys(key)
	subject := keys.Hash("domain:" + memPlate.Domain)
	tests := []struct {
		name string
		// plant writes garbage under the subject's keys (base) and the
		// source's generation (src).
		plant func(ctx context.Context, base, src string) error
		// keeps: the first write after the garbage is kept (else it clears
		// the garbage and only the next one is).
		keeps bool
	}{
		{"entry of another type", func(ctx context.Context, base, _ string) error {
			return c.RPush(ctx, base+"e:caba:by_domain:0123456789abcdef:0", "x").Err()
		}, true},
		{"entry not sealed", func(ctx context.Context, base, _ string) error {
			return c.Set(ctx, base+"e:caba:by_domain:0123456789abcdef:0", `{"as_of":"2026-03-14T09:00:00Z","infractions":[]}`, 0).Err()
		}, true},
		{"entry of random bytes", func(ctx context.Context, base, _ string) error {
			return c.Set(ctx, base+"e:caba:by_domain:0123456789abcdef:0", "\x01"+strings.Repeat("\xff", 90), 0).Err()
		}, true},
		{"generation of another type", func(ctx context.Context, base, _ string) error {
			return c.HSet(ctx, base+"gen", "a", "b").Err()
		}, false},
		{"index of another type", func(ctx context.Context, base, _ string) error {
			return c.Set(ctx, base+"index", "x", 0).Err()
		}, true},
		{"index with foreign members", func(ctx context.Context, base, _ string) error {
			return c.SAdd(ctx, base+"index", "../../etc", "a}:{b", "caba:by_domain:zz:0").Err()
		}, true},
		{"source generation of another type", func(ctx context.Context, _, src string) error {
			return c.LPush(ctx, src, "x").Err()
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prefix := testPrefix(t, c)
			s := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
			m := memorytest.New(t, s.Memory, key)
			ctx := context.Background()
			base := prefix + "{memory/" + subject + "}:"
			if err := tt.plant(ctx, base, prefix+"{memory-source/caba}:gen"); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := m.Recall(ctx, "caba", memPolicy, memPlate); ok {
				t.Errorf("garbage recalled as an answer")
			}
			in := memorytest.Infractions("caba", "Q-1")
			kept, err := m.Keep(ctx, m.Ticket(ctx, "caba", memPolicy, memPlate), in)
			if err != nil || kept != tt.keeps {
				t.Errorf("first Keep: got %v, %v; want %v", kept, err, tt.keeps)
			}
			if !kept {
				if kept, err = m.Keep(ctx, m.Ticket(ctx, "caba", memPolicy, memPlate), in); !kept || err != nil {
					t.Errorf("second Keep: got %v, %v; want kept", kept, err)
				}
			}
			if _, ok, _ := m.Recall(ctx, "caba", memPolicy, memPlate); !ok {
				t.Errorf("after the garbage, a kept answer is not recalled")
			}
			if err := m.Forget(ctx, memPlate); err != nil {
				t.Errorf("Forget: %v", err)
			}
			if _, ok, _ := m.Recall(ctx, "caba", memPolicy, memPlate); ok {
				t.Errorf("recalled after Forget")
			}
			if s.Degraded() {
				t.Errorf("garbage degraded the stores")
			}
		})
	}
}

// TestMemoryStoreSourceGenerationGarbage: a source generation that is not
// one ForgetSource writes turns the source's memory off (nothing read,
// nothing written) until ForgetSource writes one again.
func TestMemoryStoreSourceGenerationGarbage(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	prefix := testPrefix(t, c)
	s := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
	m := memorytest.New(t, s.Memory, memorytest.Key(t))
	ctx := context.Background()
	if err := c.Set(ctx, prefix+"{memory-source/caba}:gen", "not}{hex", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if tk := m.Ticket(ctx, "caba", memPolicy, memPlate); tk.Valid() {
		t.Errorf("a ticket under a garbage source generation")
	}
	if err := m.ForgetSource(ctx, "caba"); err != nil {
		t.Fatal(err)
	}
	if tk := m.Ticket(ctx, "caba", memPolicy, memPlate); !tk.Valid() {
		t.Errorf("no ticket once ForgetSource wrote a generation")
	}
}

// TestMemoryStoreShared: replicas share remembered answers, and a source
// forgotten through one is forgotten by the other at once (the
// invalidation), not after its cached generation's second.
func TestMemoryStoreShared(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	prefix := testPrefix(t, c)
	key := memorytest.Key(t)
	a := memorytest.New(t, newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout}).Memory, key)
	b := memorytest.New(t, newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout}).Memory, key)
	ctx := context.Background()
	if ok, err := a.Keep(ctx, a.Ticket(ctx, "caba", memPolicy, memPlate), memorytest.Infractions("caba", "Q-1")); !ok || err != nil {
		t.Fatalf("Keep: %v %v", ok, err)
	}
	if _, ok, _ := b.Recall(ctx, "caba", memPolicy, memPlate); !ok {
		t.Fatalf("another replica does not recall the answer")
	}
	// Both replicas listen to the stores' channel before the erasure.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if n, err := c.PubSubNumSub(ctx, prefix+"events").Result(); err == nil && n[prefix+"events"] >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stores never subscribed to their channel")
		}
	}
	if err := b.ForgetSource(ctx, "caba"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(800 * time.Millisecond)
	for {
		if _, ok, _ := a.Recall(ctx, "caba", memPolicy, memPlate); !ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the other replica still recalls the forgotten source's answer")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
