package memory_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/memory/memorytest"
)

func TestLRU(t *testing.T) {
	t.Parallel()
	memorytest.Run(t, func(*testing.T) memory.Store { return memory.NewLRU(1000, nil) })
}

// clock is a settable fake clock.
type clock struct{ now time.Time }

func (c *clock) Now() time.Time { return c.now }

// TestLRUBound keeps more answers than the LRU holds: the least recently
// used go first, and the bound holds.
func TestLRUBound(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	lru := memory.NewLRU(3, nil)
	put := func(subject string) {
		t.Helper()
		gen, _ := lru.Generation(ctx, subject)
		if ok, err := lru.Put(ctx, subject, "caba:by_domain:f:0", []byte(subject), gen, time.Minute); !ok || err != nil {
			t.Fatalf("Put %s: %v %v", subject, ok, err)
		}
	}
	has := func(subject string) bool {
		v, _, _ := lru.Get(ctx, subject, []string{"caba:by_domain:f:0"})
		return v[0] != nil
	}
	for i := range 3 {
		put(fmt.Sprint("s", i))
	}
	has("s0") // s0 is now the most recently used: s1 goes first
	put("s3")
	put("s4")
	if got := lru.Len(); got != 3 {
		t.Errorf("Len: got %d, want 3", got)
	}
	for subject, want := range map[string]bool{"s0": true, "s1": false, "s2": false, "s3": true, "s4": true} {
		if got := has(subject); got != want {
			t.Errorf("%s held: got %v, want %v", subject, got, want)
		}
	}
}

// TestLRUGenerationsBounded forgets more subjects than the LRU holds: a
// lookup in flight for any of them still never writes back.
func TestLRUGenerationsBounded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := &clock{now: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
	lru := memory.NewLRU(2, c.Now)
	gens := map[string]string{}
	for i := range 5 {
		s := fmt.Sprint("s", i)
		gens[s], _ = lru.Generation(ctx, s)
	}
	for i := range 5 {
		_ = lru.Forget(ctx, fmt.Sprint("s", i), time.Minute)
	}
	for s, gen := range gens {
		if ok, _ := lru.Put(ctx, s, "caba:by_domain:f:0", []byte("v"), gen, time.Minute); ok {
			t.Errorf("%s: a write with the generation read before Forget was kept", s)
		}
	}
	// Once the hold is over, a generation read then writes again.
	c.now = c.now.Add(2 * time.Minute)
	gen, _ := lru.Generation(ctx, "s0")
	if ok, _ := lru.Put(ctx, "s0", "caba:by_domain:f:0", []byte("v"), gen, time.Minute); !ok {
		t.Errorf("a write with a current generation was refused")
	}
	if v, _, _ := lru.Get(ctx, "s0", []string{"caba:by_domain:f:0"}); v[0] == nil {
		t.Errorf("kept, then not found")
	}
	c.now = c.now.Add(2 * time.Minute)
	if v, _, _ := lru.Get(ctx, "s0", []string{"caba:by_domain:f:0"}); v[0] != nil {
		t.Errorf("found after its ttl")
	}
	if got := lru.Len(); got != 0 {
		t.Errorf("Len after expiry: got %d, want 0", got)
	}
}
