// Package memorytest is the behaviour suite of SPEC 14 that every
// memory.Store must pass, driven through a memory.Memory as the fan-out
// uses it.
package memorytest

import (
	"bytes"
	"context"
	"crypto/rand"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/memory"
)

// Key returns a random memory key.
func Key(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, memory.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// New returns a Memory on store under key and previous keys.
func New(t testing.TB, store memory.Store, key []byte, previous ...[]byte) *memory.Memory {
	t.Helper()
	keys, err := memory.NewKeys(key, previous...)
	if err != nil {
		t.Fatal(err)
	}
	m, err := memory.New(memory.Options{Keys: keys, Store: store})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

var (
	policy = memory.Policy{Fresh: time.Minute, Stale: time.Hour, Fingerprint: "f1"}
	plate  = aggregator.Query{Domain: "AB123CD"}
	person = aggregator.Query{ID: "20314159269", IDKind: aggregator.CUIT}
)

// Infractions are one source's answer as the fan-out keeps it.
func Infractions(source string, ids ...string) []aggregator.Infraction {
	out := make([]aggregator.Infraction, len(ids))
	for i, id := range ids {
		out[i] = aggregator.Infraction{Source: source, Jurisdiction: "Jurisdicción " + source, ID: id,
			Amount: "1000.00", Currency: "ARS", Status: aggregator.Unpaid, Date: "2026-03-14T09:12:00-03:00"}
	}
	return out
}

// keep writes infractions as source's answer to q and fails unless kept.
func keep(t *testing.T, m *memory.Memory, source string, p memory.Policy, q aggregator.Query, infractions []aggregator.Infraction) {
	t.Helper()
	ctx := context.Background()
	tk := m.Ticket(ctx, source, p, q)
	if !tk.Valid() {
		t.Fatalf("Ticket(%s): not valid", source)
	}
	if ok, err := m.Keep(ctx, tk, infractions); !ok || err != nil {
		t.Fatalf("Keep(%s): got %v, %v; want kept", source, ok, err)
	}
}

// recalled reads source's answer to q: the ids, nil when absent.
func recalled(t *testing.T, m *memory.Memory, source string, p memory.Policy, q aggregator.Query) []string {
	t.Helper()
	a, ok, _ := m.Recall(context.Background(), source, p, q)
	if !ok {
		return nil
	}
	ids := []string{}
	for _, in := range a.Infractions {
		ids = append(ids, in.ID)
	}
	return ids
}

func equal(a, b []string) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Run runs the suite; newStore returns a fresh, empty store for a test.
func Run(t *testing.T, newStore func(t *testing.T) memory.Store) {
	t.Run("KeptIsRecalled", func(t *testing.T) {
		t.Parallel()
		m := New(t, newStore(t), Key(t))
		if got := recalled(t, m, "caba", policy, plate); got != nil {
			t.Fatalf("before any answer: got %v, want nothing", got)
		}
		before := time.Now()
		keep(t, m, "caba", policy, plate, Infractions("caba", "Q-1", "Q-2"))
		a, ok, tk := m.Recall(context.Background(), "caba", policy, plate)
		if !ok || !tk.Valid() {
			t.Fatalf("Recall: got %v (ticket valid %v), want the answer", ok, tk.Valid())
		}
		if a.AsOf.Before(before.Add(-time.Second)) || a.AsOf.After(time.Now().Add(time.Second)) {
			t.Errorf("as_of: got %v, want about %v", a.AsOf, before)
		}
		if len(a.Infractions) != 2 || a.Infractions[1] != Infractions("caba", "Q-1", "Q-2")[1] {
			t.Errorf("infractions: got %+v", a.Infractions)
		}
		// An empty answer is an answer too.
		keep(t, m, "cordoba", policy, plate, nil)
		if got := recalled(t, m, "cordoba", policy, plate); !equal(got, []string{}) {
			t.Errorf("empty answer: got %v, want []", got)
		}
	})

	t.Run("EntriesAreApart", func(t *testing.T) {
		t.Parallel()
		m := New(t, newStore(t), Key(t))
		keep(t, m, "caba", policy, plate, Infractions("caba", "Q-1"))
		other := policy
		other.Fingerprint = "f2"
		tests := []struct {
			name   string
			source string
			p      memory.Policy
			q      aggregator.Query
			want   []string
		}{
			{"same", "caba", policy, plate, []string{"Q-1"}},
			{"another source", "cordoba", policy, plate, nil},
			{"another mapping", "caba", other, plate, nil},
			{"another subject", "caba", policy, aggregator.Query{Domain: "AB123CE"}, nil},
			{"another operation", "caba", policy, person, nil},
		}
		for _, tt := range tests {
			if got := recalled(t, m, tt.source, tt.p, tt.q); !equal(got, tt.want) {
				t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
			}
		}
	})

	t.Run("ForgetDropsEverySourceAndMapping", func(t *testing.T) {
		t.Parallel()
		m := New(t, newStore(t), Key(t))
		other := policy
		other.Fingerprint = "f2"
		keep(t, m, "caba", policy, plate, Infractions("caba", "Q-1"))
		keep(t, m, "cordoba", policy, plate, Infractions("cordoba", "C-1"))
		keep(t, m, "caba", other, plate, Infractions("caba", "Q-1"))
		keep(t, m, "caba", policy, person, Infractions("caba", "P-1"))
		if err := m.Forget(context.Background(), plate); err != nil {
			t.Fatalf("Forget: %v", err)
		}
		for _, c := range []struct {
			source string
			p      memory.Policy
		}{{"caba", policy}, {"cordoba", policy}, {"caba", other}} {
			if got := recalled(t, m, c.source, c.p, plate); got != nil {
				t.Errorf("%s/%s after Forget: got %v, want nothing", c.source, c.p.Fingerprint, got)
			}
		}
		if got := recalled(t, m, "caba", policy, person); !equal(got, []string{"P-1"}) {
			t.Errorf("another subject after Forget: got %v, want [P-1]", got)
		}
		// A new answer after the erasure is remembered again.
		keep(t, m, "caba", policy, plate, Infractions("caba", "Q-9"))
		if got := recalled(t, m, "caba", policy, plate); !equal(got, []string{"Q-9"}) {
			t.Errorf("an answer read after Forget: got %v, want [Q-9]", got)
		}
	})

	t.Run("ForgetStopsLookupsInFlight", func(t *testing.T) {
		t.Parallel()
		m := New(t, newStore(t), Key(t))
		ctx := context.Background()
		_, _, read := m.Recall(ctx, "caba", policy, plate) // a lookup that read first
		bare := m.Ticket(ctx, "cordoba", policy, plate)    // one that did not
		if err := m.Forget(ctx, plate); err != nil {
			t.Fatal(err)
		}
		for name, tk := range map[string]memory.Ticket{"after Recall": read, "after Ticket": bare} {
			if ok, err := m.Keep(ctx, tk, Infractions(tk.Source(), "Q-1")); ok || err != nil {
				t.Errorf("Keep %s, the subject forgotten since: got %v, %v; want not kept", name, ok, err)
			}
		}
		for _, s := range []string{"caba", "cordoba"} {
			if got := recalled(t, m, s, policy, plate); got != nil {
				t.Errorf("%s: got %v, want nothing", s, got)
			}
		}
		// A second erasure while a lookup is in flight does the same.
		tk := m.Ticket(ctx, "caba", policy, plate)
		if err := m.Forget(ctx, plate); err != nil {
			t.Fatal(err)
		}
		if ok, _ := m.Keep(ctx, tk, Infractions("caba", "Q-1")); ok {
			t.Errorf("Keep across a second Forget: kept")
		}
	})

	t.Run("ForgetPersonForgetsTheirOtherIDs", func(t *testing.T) {
		t.Parallel()
		m := New(t, newStore(t), Key(t))
		dni := aggregator.Query{ID: "31415926", IDKind: aggregator.DNI}
		keep(t, m, "caba", policy, person, Infractions("caba", "P-1"))
		keep(t, m, "caba", policy, dni, Infractions("caba", "P-1"))
		if err := m.Forget(context.Background(), dni); err != nil {
			t.Fatal(err)
		}
		for _, q := range []aggregator.Query{person, dni} {
			if got := recalled(t, m, "caba", policy, q); got != nil {
				t.Errorf("%s after forgetting the DNI: got %v, want nothing", q.ID, got)
			}
		}
	})

	t.Run("ForgetSource", func(t *testing.T) {
		t.Parallel()
		m := New(t, newStore(t), Key(t))
		keep(t, m, "caba", policy, plate, Infractions("caba", "Q-1"))
		keep(t, m, "caba", policy, person, Infractions("caba", "P-1"))
		keep(t, m, "cordoba", policy, plate, Infractions("cordoba", "C-1"))
		ctx := context.Background()
		inFlight := m.Ticket(ctx, "caba", policy, plate)
		if err := m.ForgetSource(ctx, "caba"); err != nil {
			t.Fatalf("ForgetSource: %v", err)
		}
		for _, q := range []aggregator.Query{plate, person} {
			if got := recalled(t, m, "caba", policy, q); got != nil {
				t.Errorf("caba %v after ForgetSource: got %v, want nothing", q, got)
			}
		}
		if got := recalled(t, m, "cordoba", policy, plate); !equal(got, []string{"C-1"}) {
			t.Errorf("another source: got %v, want [C-1]", got)
		}
		// A lookup in flight writes under the old generation: never read.
		_, _ = m.Keep(ctx, inFlight, Infractions("caba", "Q-1"))
		if got := recalled(t, m, "caba", policy, plate); got != nil {
			t.Errorf("a lookup in flight during ForgetSource: got %v, want nothing", got)
		}
		keep(t, m, "caba", policy, plate, Infractions("caba", "Q-2"))
		if got := recalled(t, m, "caba", policy, plate); !equal(got, []string{"Q-2"}) {
			t.Errorf("after ForgetSource, a new answer: got %v, want [Q-2]", got)
		}
	})

	t.Run("KeyRotation", func(t *testing.T) {
		t.Parallel()
		store := newStore(t)
		oldKey, newKey := Key(t), Key(t)
		keep(t, New(t, store, oldKey), "caba", policy, plate, Infractions("caba", "Q-1"))
		tests := []struct {
			name string
			m    *memory.Memory
			want []string
		}{
			{"the same key", New(t, store, oldKey), []string{"Q-1"}},
			{"a new key with the old one previous", New(t, store, newKey, oldKey), []string{"Q-1"}},
			{"a new key alone", New(t, store, newKey), nil},
		}
		for _, tt := range tests {
			if got := recalled(t, tt.m, "caba", policy, plate); !equal(got, tt.want) {
				t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
			}
		}
		// The new key writes under its own hash, and forgetting reaches
		// the previous key's entries too.
		rotated := New(t, store, newKey, oldKey)
		keep(t, rotated, "cordoba", policy, plate, Infractions("cordoba", "C-1"))
		if got := recalled(t, New(t, store, newKey), "cordoba", policy, plate); !equal(got, []string{"C-1"}) {
			t.Errorf("written under the new key: got %v, want [C-1]", got)
		}
		if err := rotated.Forget(context.Background(), plate); err != nil {
			t.Fatal(err)
		}
		if got := recalled(t, New(t, store, oldKey), "caba", policy, plate); got != nil {
			t.Errorf("the old key's entry after Forget: got %v, want nothing", got)
		}
	})

	t.Run("MovedValuesDoNotOpen", func(t *testing.T) {
		t.Parallel()
		store := newStore(t)
		key := Key(t)
		m := New(t, store, key)
		keep(t, m, "caba", policy, plate, Infractions("caba", "Q-1"))
		// Copy every value there is under the subject to another subject
		// and to another source's entry: neither opens.
		keys, _ := memory.NewKeys(key)
		from := keys.Hash("domain:" + plate.Domain)
		to := keys.Hash("domain:AB123CE")
		ctx := context.Background()
		entry := "caba:by_domain:f1:" + mustSourceGen(t, store, "caba")
		values, _, err := store.Get(ctx, from, []string{entry})
		if err != nil || len(values) != 1 || values[0] == nil {
			t.Fatalf("reading the sealed value back: %v, %v", values, err)
		}
		sealed := values[0]
		if bytes.Contains(sealed, []byte("Q-1")) {
			t.Errorf("the sealed value holds the infraction in clear")
		}
		gen, _ := store.Generation(ctx, to)
		if ok, err := store.Put(ctx, to, entry, sealed, gen, time.Minute); !ok || err != nil {
			t.Fatalf("planting: %v %v", ok, err)
		}
		if got := recalled(t, m, "caba", policy, aggregator.Query{Domain: "AB123CE"}); got != nil {
			t.Errorf("a value moved to another subject: got %v, want nothing", got)
		}
		gen, _ = store.Generation(ctx, from)
		_, _ = store.Put(ctx, from, "cordoba:by_domain:f1:"+mustSourceGen(t, store, "cordoba"), sealed, gen, time.Minute)
		if got := recalled(t, m, "cordoba", policy, plate); got != nil {
			t.Errorf("a value moved to another source: got %v, want nothing", got)
		}
	})

	t.Run("Expires", func(t *testing.T) {
		t.Parallel()
		m := New(t, newStore(t), Key(t))
		short := memory.Policy{Stale: time.Second, Fingerprint: "f1"}
		keep(t, m, "caba", short, plate, Infractions("caba", "Q-1"))
		if got := recalled(t, m, "caba", short, plate); got == nil {
			t.Fatalf("at once: got nothing")
		}
		time.Sleep(1300 * time.Millisecond)
		if got := recalled(t, m, "caba", short, plate); got != nil {
			t.Errorf("after max(fresh, stale): got %v, want nothing", got)
		}
	})

	t.Run("NotRemembering", func(t *testing.T) {
		t.Parallel()
		m := New(t, newStore(t), Key(t))
		off := memory.Policy{Fingerprint: "f1"}
		tk := m.Ticket(context.Background(), "caba", off, plate)
		if tk.Valid() {
			t.Errorf("a source that does not remember got a valid ticket")
		}
		if ok, _ := m.Keep(context.Background(), tk, Infractions("caba", "Q-1")); ok {
			t.Errorf("a source that does not remember kept an answer")
		}
	})
}

func mustSourceGen(t *testing.T, s memory.Store, source string) string {
	t.Helper()
	g, err := s.SourceGeneration(context.Background(), source)
	if err != nil {
		t.Fatal(err)
	}
	return g
}
