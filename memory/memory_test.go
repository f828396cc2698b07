package memory_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/memory/memorytest"
)

var (
	policy = memory.Policy{Fresh: time.Minute, Stale: time.Hour, Fingerprint: "f1"}
	plate  = aggregator.Query{Domain: "AB123CD"}
)

func newMemory(t testing.TB, opts memory.Options) *memory.Memory {
	t.Helper()
	if opts.Keys == nil {
		opts.Keys, _ = memory.NewKeys(memorytest.Key(t))
	}
	m, err := memory.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestKeepRefusesLongLookups: a lookup that began longer than Hold ago
// writes nothing, so that a forgotten subject's generation may be dropped
// once Hold is over.
func TestKeepRefusesLongLookups(t *testing.T) {
	t.Parallel()
	c := &clock{now: time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)}
	m := newMemory(t, memory.Options{Store: memory.NewLRU(10, c.Now), Now: c.Now, Hold: time.Minute})
	ctx := context.Background()
	for _, tt := range []struct {
		took time.Duration
		kept bool
	}{{59 * time.Second, true}, {time.Minute, false}} {
		tk := m.Ticket(ctx, "caba", policy, plate)
		c.now = c.now.Add(tt.took)
		if ok, err := m.Keep(ctx, tk, memorytest.Infractions("caba", "Q-1")); ok != tt.kept || err != nil {
			t.Errorf("a lookup of %v: got kept %v, %v; want %v", tt.took, ok, err, tt.kept)
		}
	}
}

// TestMaxEntryBytes: an answer whose sealed value is larger than the
// bound is not remembered; one within it is.
func TestMaxEntryBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newMemory(t, memory.Options{MaxEntryBytes: 2048})
	for _, tt := range []struct {
		n    int
		kept bool
	}{{3, true}, {40, false}} {
		ids := make([]string, tt.n)
		for i := range ids {
			ids[i] = fmt.Sprintf("Q-%04d", i)
		}
		tk := m.Ticket(ctx, "caba", policy, plate)
		if ok, err := m.Keep(ctx, tk, memorytest.Infractions("caba", ids...)); ok != tt.kept || err != nil {
			t.Errorf("%d infractions: got kept %v, %v; want %v", tt.n, ok, err, tt.kept)
		}
	}
}

// TestStaleMarksAreNotKept: the stale mark of a stood-in answer is not
// part of what is remembered.
func TestStaleMarksAreNotKept(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	m := newMemory(t, memory.Options{})
	in := memorytest.Infractions("caba", "Q-1")
	in[0].Stale = true
	if ok, _ := m.Keep(ctx, m.Ticket(ctx, "caba", policy, plate), in); !ok {
		t.Fatal("not kept")
	}
	a, ok, _ := m.Recall(ctx, "caba", policy, plate)
	if !ok || a.Infractions[0].Stale {
		t.Errorf("got %v %+v, want the answer without the stale mark", ok, a.Infractions)
	}
}

// store is a memory.Store whose values a fuzz target sets: whatever Redis
// may hold.
type store struct {
	*memory.LRU
	value []byte
}

func (s *store) Get(_ context.Context, _ string, entries []string) ([][]byte, string, error) {
	values := make([][]byte, len(entries))
	for i := range values {
		values[i] = s.value
	}
	return values, "", nil
}

// FuzzStoredValues opens whatever a store may hold: bytes of any kind, and
// sealed plaintexts of any kind under the right key and store key. It
// never panics, and what it accepts is an answer of the source.
func FuzzStoredValues(f *testing.F) {
	keys, _ := memory.NewKeys(make([]byte, memory.KeySize))
	ad := []byte("aggregator/memory/v1/" + keys.Hash("domain:AB123CD") + "/caba:by_domain:f1:0")
	seeds := []string{
		`{"as_of":"2026-03-14T09:00:00Z","infractions":[]}`,
		`{"as_of":"2026-03-14T09:00:00Z","infractions":[{"source":"caba","jurisdiction":"J","id":"Q-1","status":"unpaid"}]}`,
		`{"as_of":"2026-03-14T09:00:00Z","infractions":[{"source":"cordoba","jurisdiction":"J","id":"Q-1","status":"unpaid"}]}`,
		`{"as_of":"2999-01-01T00:00:00Z","infractions":[]}`,
		`{"as_of":"2026-03-14T09:00:00Z","infractions":[{"source":"caba","id":"","status":"unpaid"}]}`,
		`{"as_of":"2026-03-14T09:00:00Z","infractions":null}`,
		`{"as_of":"2026-03-14T09:00:00Z","infractions":[],"extra":1}`,
		`{"as_of":"2026-03-14T09:00:00Z","infractions":[]} {}`,
		`[]`, ``, `null`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, seal bool) {
		value := data
		if seal {
			var err error
			if value, err = keys.Seal(ad, data); err != nil {
				t.Fatal(err)
			}
		}
		now := time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC)
		st := &store{LRU: memory.NewLRU(10, nil), value: value}
		m, _ := memory.New(memory.Options{Keys: keys, Store: st, Now: func() time.Time { return now }})
		a, ok, _ := m.Recall(context.Background(), "caba", policy, plate)
		if !ok {
			return
		}
		if !seal {
			t.Fatalf("unsealed bytes opened: %q", data)
		}
		if a.AsOf.IsZero() || a.AsOf.After(now.Add(5*time.Minute)) || a.Infractions == nil {
			t.Errorf("accepted as_of %v, infractions %v", a.AsOf, a.Infractions)
		}
		for _, in := range a.Infractions {
			if in.Source != "caba" || strings.TrimSpace(in.ID) == "" || !in.Status.Valid() || in.Stale {
				t.Errorf("accepted infraction %+v", in)
			}
		}
	})
}

// BenchmarkSeal and BenchmarkOpen are the CPU cost of sealing and opening
// one entry of a typical answer (three infractions), the JSON included:
// what Keep and a remembered hit add to a lookup (docs/benchmarks.md).
func BenchmarkSeal(b *testing.B) {
	keys, _ := memory.NewKeys(memorytest.Key(b))
	ad := []byte("aggregator/memory/v1/" + keys.Hash("domain:AB123CD") + "/caba:by_domain:f1:0")
	plain := benchPlain(b)
	b.SetBytes(int64(len(plain)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := keys.Seal(ad, plain); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	keys, _ := memory.NewKeys(memorytest.Key(b))
	ad := []byte("aggregator/memory/v1/" + keys.Hash("domain:AB123CD") + "/caba:by_domain:f1:0")
	plain := benchPlain(b)
	sealed, _ := keys.Seal(ad, plain)
	b.SetBytes(int64(len(plain)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := keys.Open(ad, sealed); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKeepRecall is a whole write and read through the in-process
// store: hashing, JSON, sealing, opening and validation.
func BenchmarkKeepRecall(b *testing.B) {
	ctx := context.Background()
	m := newMemory(b, memory.Options{})
	in := memorytest.Infractions("caba", "Q-10442", "Q-10443", "Q-10444")
	b.ReportAllocs()
	for b.Loop() {
		if ok, _ := m.Keep(ctx, m.Ticket(ctx, "caba", policy, plate), in); !ok {
			b.Fatal("not kept")
		}
		if _, ok, _ := m.Recall(ctx, "caba", policy, plate); !ok {
			b.Fatal("not recalled")
		}
	}
}

func benchPlain(b *testing.B) []byte {
	b.Helper()
	return []byte(`{"as_of":"2026-03-14T12:12:00Z","infractions":[` +
		`{"source":"caba","jurisdiction":"Ciudad de Buenos Aires","id":"Q-10442","date":"2026-03-14T09:12:00-03:00","description":"Exceso de velocidad","place":"Av. Lugones km 4","amount":"185000.00","currency":"ARS","status":"unpaid","status_raw":"IMPAGA","voucher":"/v1/sources/caba/infractions/Q-10442/voucher"},` +
		`{"source":"caba","jurisdiction":"Ciudad de Buenos Aires","id":"Q-10443","date":"2026-02-01T18:40:00-03:00","description":"Estacionamiento prohibido","place":"Av. Corrientes 1200","amount":"42000.00","currency":"ARS","status":"paid","status_raw":"PAGADA","voucher":"/v1/sources/caba/infractions/Q-10443/voucher"},` +
		`{"source":"caba","jurisdiction":"Ciudad de Buenos Aires","id":"Q-10444","date":"2025-12-24T23:05:00-03:00","description":"Semáforo en rojo","place":"Av. 9 de Julio y Belgrano","amount":"210000.00","currency":"ARS","status":"in_process","status_raw":"EN GESTION","voucher":"/v1/sources/caba/infractions/Q-10444/voucher"}]}`)
}
