package drift_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/drift"
	"github.com/multas/aggregator/sources/mapping"
)

// clock is a settable time.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// portal reads answers as a source whose items are at /actas, with an
// id, a status and an amount.
type portal struct {
	t *testing.T
	m *mapping.Mapping
}

func newPortal(t *testing.T) portal {
	t.Helper()
	m, err := mapping.Compile(mapping.Response{
		Items:     mapping.Items{{Select: "/actas"}},
		StatusMap: map[string]string{"IMPAGA": "unpaid", "PAGADA": "paid"},
		Fields: map[string]mapping.Field{
			"id": {Select: mapping.List{"/nro"}}, "status": {Select: mapping.List{"/estado"}},
			"amount": {Select: mapping.List{"/monto"}},
		},
	}, mapping.Options{Source: "caba"})
	if err != nil {
		t.Fatal(err)
	}
	return portal{t: t, m: m}
}

// lookup is the answer body read as a lookup.
func (p portal) lookup(body string) drift.Lookup {
	p.t.Helper()
	pg, err := p.m.Read(context.Background(), mapping.Answer{Status: 200, Body: []byte(body), ContentType: "application/json"},
		mapping.Subject{Op: aggregator.ByDomain, Value: "AB123CD"})
	l := drift.Lookup{Source: "caba", Operation: aggregator.ByDomain, Items: pg.Health.Mapped, Health: pg.Health}
	switch {
	case err != nil:
		l.Result = drift.Error
	case pg.Health.Mapped > 0:
		l.Result = drift.Items
	default:
		l.Result = drift.Empty
	}
	return l
}

// items is an answer of n items, each made by item(i).
func items(n int, item func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = item(i)
	}
	return `{"actas": [` + strings.Join(parts, ",") + `]}`
}

func good(i int) string { return fmt.Sprintf(`{"nro": "A-%d", "estado": "IMPAGA", "monto": 10}`, i) }

func renamed(i int) string {
	return fmt.Sprintf(`{"nro": "A-%d", "estado": "IMPAGA", "importe": 10}`, i)
}

func unknown(i int) string {
	return fmt.Sprintf(`{"nro": "A-%d", "estado": "VENCIDA", "monto": 10}`, i)
}

// tracker is a Tracker on c that keeps the changes it records.
type tracker struct {
	*drift.Tracker
	mu      sync.Mutex
	changes []drift.Change
}

func newTracker(c *clock, s drift.Settings) *tracker {
	t := &tracker{}
	t.Tracker = drift.New(drift.Options{Now: c.Now, Record: func(ch drift.Change) {
		t.mu.Lock()
		t.changes = append(t.changes, ch)
		t.mu.Unlock()
	}})
	t.Configure("caba", s)
	return t
}

func (t *tracker) take() []drift.Change {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.changes
	t.changes = nil
	return out
}

func reasons(cs []drift.Change) []drift.Reason {
	out := []drift.Reason{}
	for _, c := range cs {
		out = append(out, c.Reason)
	}
	return out
}

var start = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

func TestShapeChanges(t *testing.T) {
	t.Parallel()
	c := &clock{now: start}
	tr := newTracker(c, drift.Settings{Window: time.Hour, UnmappedRatio: 1})
	p := newPortal(t)

	steps := []struct {
		name  string
		body  string
		after time.Duration
		want  []drift.Reason
	}{
		{"the first answer sets the shape", items(2, good), 0, []drift.Reason{}},
		{"the same shape again", items(3, good), time.Minute, []drift.Reason{}},
		{"an answer without items does not count", `{"actas": []}`, time.Minute, []drift.Reason{}},
		{"fewer names: within the window's shape", `{"actas": [{"nro": "A-1"}]}`, time.Minute, []drift.Reason{}},
		{"a member renamed", items(2, renamed), time.Minute, []drift.Reason{drift.Shape}},
		{"the renamed shape again: within the window now", items(1, renamed), time.Minute, []drift.Reason{}},
		{"long after: the window holds the renamed shape only", items(1, renamed), 2 * time.Hour, []drift.Reason{}},
		{"the old name back: a change again", items(1, good), time.Minute, []drift.Reason{drift.Shape}},
	}
	for _, s := range steps {
		c.advance(s.after)
		tr.Observe(p.lookup(s.body))
		got := tr.take()
		if !reflect.DeepEqual(reasons(got), s.want) {
			t.Fatalf("%s: changes %v, want %v", s.name, reasons(got), s.want)
		}
		if s.name != "a member renamed" {
			continue
		}
		ch := got[0]
		if !reflect.DeepEqual(ch.Added, []string{"/importe"}) || !reflect.DeepEqual(ch.Removed, []string{"/monto"}) {
			t.Errorf("added %q, removed %q; want /importe added, /monto removed", ch.Added, ch.Removed)
		}
		if ch.Source != "caba" || ch.Operation != aggregator.ByDomain || !ch.Time.Equal(c.Now()) || ch.Window != time.Hour {
			t.Errorf("change %+v", ch)
		}
		if r := tr.Report("caba"); !r.ShapeChangedAt.Equal(c.Now()) {
			t.Errorf("shape_changed_at %v, want %v", r.ShapeChangedAt, c.Now())
		}
	}
	c.advance(time.Hour)
	if r := tr.Report("caba"); !r.ShapeChangedAt.IsZero() {
		t.Errorf("an hour after the last change, shape_changed_at is %v", r.ShapeChangedAt)
	}
}

func TestRatioChanges(t *testing.T) {
	t.Parallel()
	type step struct {
		body string
		want []drift.Reason
	}
	none := []drift.Reason{}
	tests := []struct {
		name     string
		settings drift.Settings
		steps    []step
	}{
		{"unmapped share rises above the threshold once", drift.Settings{UnmappedRatio: 0.2}, []step{
			{items(4, good), none},
			{items(4, good), none},
			{items(1, unknown), none},                                 // 1 of 9: 11%
			{items(2, unknown), []drift.Reason{drift.UnmappedRatio}},  // 3 of 11: 27%
			{items(2, unknown), none},                                 // still above: no new change
			{items(40, good), none},                                   // 5 of 51: below again
			{items(20, unknown), []drift.Reason{drift.UnmappedRatio}}, // rises again
		}},
		{"a source mapping badly from its first answer never rose", drift.Settings{UnmappedRatio: 0.2}, []step{
			{items(3, unknown), none},
			{items(3, unknown), none},
		}},
		{"a missing field counts", drift.Settings{UnmappedRatio: 0.5}, []step{
			{items(2, good), none},
			{`{"actas": [{"nro": "A-1", "estado": "PAGADA"}, {"nro": "A-2", "estado": "PAGADA"}, {"nro": "A-3", "estado": "PAGADA"}]}`,
				[]drift.Reason{drift.UnmappedRatio}},
		}},
		{"empty answers: off by default", drift.Settings{UnmappedRatio: 1}, []step{
			{items(2, good), none},
			{`{"actas": []}`, none},
			{`{"captcha": true}`, none},
		}},
		{"empty and refused answers above empty_ratio", drift.Settings{UnmappedRatio: 1, EmptyRatio: 0.5}, []step{
			{items(2, good), none},
			{items(2, good), none},
			{`{"actas": []}`, none},                                 // 1 of 3
			{`{"captcha": true}`, none},                             // 2 of 4: not above
			{`{"captcha": true}`, []drift.Reason{drift.EmptyRatio}}, // 3 of 5
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &clock{now: start}
			tr := newTracker(c, tt.settings)
			p := newPortal(t)
			for i, s := range tt.steps {
				c.advance(time.Second)
				tr.Observe(p.lookup(s.body))
				if got := reasons(tr.take()); !reflect.DeepEqual(got, s.want) {
					t.Fatalf("step %d: changes %v, want %v", i, got, s.want)
				}
			}
		})
	}
}

func TestEmptyRatioStep(t *testing.T) {
	t.Parallel()
	c := &clock{now: start}
	tr := newTracker(c, drift.Settings{UnmappedRatio: 1, EmptyRatio: 0.5})
	p := newPortal(t)
	for _, body := range []string{items(2, good), items(2, good), `{"actas": []}`, `{"captcha": true}`} {
		tr.Observe(p.lookup(body))
	}
	if got := tr.take(); len(got) != 0 {
		t.Fatalf("2 of 4 lookups without items, changes %v: not above 50%%", reasons(got))
	}
	tr.Observe(p.lookup(`{"captcha": true}`))
	got := tr.take()
	if len(got) != 1 || got[0].Reason != drift.EmptyRatio || got[0].Count != 5 || got[0].Ratio != 0.6 {
		t.Fatalf("3 of 5 lookups without items: changes %+v, want one empty_ratio of 0.6 over 5", got)
	}
}

func TestReport(t *testing.T) {
	t.Parallel()
	c := &clock{now: start}
	tr := newTracker(c, drift.Settings{UnmappedRatio: 1})
	p := newPortal(t)
	tr.Observe(p.lookup(items(3, good)))
	tr.Observe(p.lookup(`{"actas": [{"nro": "1", "estado": "VENCIDA", "monto": 1}, {"nro": "2", "estado": "vencida"},
		{"nro": "3", "estado": "AB 123 CD"}, {"nro": "4", "estado": "20-12345678-6"}, {"nro": "5", "estado": "12.345.678"},
		{"nro": "6", "estado": "` + strings.Repeat("á", 70) + `"}, {"nro": "7", "estado": "EN\u202eGESTION"}]}`))
	c.advance(10 * time.Minute)
	tr.Observe(p.lookup(`{"actas": [{"nro": "8", "estado": "VENCIDA", "monto": 1}]}`))

	r := tr.Report("caba")
	if r.Items != 11 {
		t.Errorf("items %d, want 11", r.Items)
	}
	want := map[string]map[string]int{"status": {"unknown_status": 8}, "amount": {"missing": 6}}
	if !reflect.DeepEqual(r.Unmapped, want) {
		t.Errorf("unmapped %v, want %v", r.Unmapped, want)
	}
	var texts []string
	for _, s := range r.UnknownStatuses {
		texts = append(texts, fmt.Sprintf("%s:%d", s.Text, s.Count))
	}
	wantTexts := []string{"VENCIDA:2", "EN GESTION:1", "vencida:1", strings.Repeat("á", drift.MaxStatusText) + ":1"}
	if !reflect.DeepEqual(texts, wantTexts) {
		t.Errorf("unknown statuses %q, want %q (no plate, CUIT or DNI; at most %d characters)", texts, wantTexts, drift.MaxStatusText)
	}
	if got := r.UnknownStatuses[0].LastSeen; !got.Equal(c.Now()) {
		t.Errorf("VENCIDA last seen %v, want %v", got, c.Now())
	}

	c.advance(55 * time.Minute)
	r = tr.Report("caba")
	if r.Items != 1 || len(r.UnknownStatuses) != 1 || r.UnknownStatuses[0].Text != "VENCIDA" || r.UnknownStatuses[0].Count != 1 {
		t.Errorf("an hour later: items %d, statuses %+v; want the last answer's only", r.Items, r.UnknownStatuses)
	}
	if r := tr.Report("nowhere"); r.Items != 0 || r.Unmapped == nil || r.UnknownStatuses == nil {
		t.Errorf("an unknown source's report %+v", r)
	}
}

func TestStatusTextsBounded(t *testing.T) {
	t.Parallel()
	c := &clock{now: start}
	tr := newTracker(c, drift.Settings{UnmappedRatio: 1})
	p := newPortal(t)
	for i := range drift.MaxStatusTexts + 10 {
		c.advance(time.Second)
		tr.Observe(p.lookup(fmt.Sprintf(`{"actas": [{"nro": "1", "estado": "ESTADO %c%c", "monto": 1}]}`, 'A'+i%26, 'A'+i/26)))
	}
	r := tr.Report("caba")
	if len(r.UnknownStatuses) != drift.MaxStatusTexts {
		t.Fatalf("%d status texts kept, want %d", len(r.UnknownStatuses), drift.MaxStatusTexts)
	}
	for _, s := range r.UnknownStatuses {
		if s.Text == "ESTADO AA" {
			t.Error("the oldest text was kept over the newest")
		}
	}
}

func TestPersonal(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		text string
		want bool
	}{
		{"IMPAGA", false},
		{"EN GESTION JUDICIAL", false},
		{"CUOTA 1 DE 3", false},
		{"VENCIDA 2024", false},
		{"AB123CD", true},
		{"dominio ab 123 cd", true},
		{"AAA-123", true},
		{"A 123 BCD", true},
		{"123ABC", true},
		{"12345678", true},
		{"DNI 12.345.678", true},
		{"20-12345678-6", true},
		{"1234567", true},
		{"123456", false},
	} {
		if got := drift.Personal(tt.text); got != tt.want {
			t.Errorf("Personal(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}

// TestConcurrentObserve is for the race detector: lookups of several
// sources, reports and reconfiguration at once.
func TestConcurrentObserve(t *testing.T) {
	t.Parallel()
	c := &clock{now: start}
	tr := newTracker(c, drift.Settings{UnmappedRatio: 0.1, EmptyRatio: 0.1})
	p := newPortal(t)
	bodies := []string{items(2, good), items(2, renamed), items(2, unknown), `{"actas": []}`}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				l := p.lookup(bodies[(g+i)%len(bodies)])
				l.Source = []string{"caba", "cordoba"}[i%2]
				tr.Observe(l)
				c.advance(time.Millisecond)
				tr.Report(l.Source)
				if i%10 == 0 {
					tr.Configure("cordoba", drift.Settings{Window: time.Duration(1+i) * time.Minute})
				}
			}
		})
	}
	wg.Wait()
	if r := tr.Report("caba"); r.Items == 0 {
		t.Error("nothing counted")
	}
}

// BenchmarkObserve is what the tracker adds to every lookup: a lookup of
// a known shape, with a field missing on its items.
func BenchmarkObserve(b *testing.B) {
	tr := drift.New(drift.Options{})
	tr.Configure("caba", drift.Settings{UnmappedRatio: 0.2})
	m, err := mapping.Compile(mapping.Response{Items: mapping.Items{{Select: "/actas"}},
		Fields: map[string]mapping.Field{"id": {Select: mapping.List{"/nro"}}, "place": {Select: mapping.List{"/lugar"}}}},
		mapping.Options{Source: "caba"})
	if err != nil {
		b.Fatal(err)
	}
	pg, err := m.Read(context.Background(), mapping.Answer{Status: 200, Body: []byte(items(10, good))}, mapping.Subject{Op: aggregator.ByDomain})
	if err != nil {
		b.Fatal(err)
	}
	l := drift.Lookup{Source: "caba", Operation: aggregator.ByDomain, Result: drift.Items, Items: 10, Health: pg.Health}
	b.ReportAllocs()
	for b.Loop() {
		tr.Observe(l)
	}
}
