package mapping

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

func TestShapeOfEachFormat(t *testing.T) {
	t.Parallel()
	want := map[string][]string{
		"json": {"/detalle", "/estado", "/fecha", "/lugar", "/moneda", "/monto", "/nro"},
		"xml":  {"/@nro", "/detalle", "/estado", "/fecha", "/importe", "/importe/@moneda", "/lugar"},
		"html": {".estado", "/td", "/td/b", "/td/span"},
	}
	for name, r := range threeResponses() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := compile(t, r)
			for _, m := range []*Mapping{m, general(m)} {
				p, err := read(t, m, threeBodies[name][1], threeBodies[name][0])
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				s := p.Health.Shape()
				if got := s.Names(); !reflect.DeepEqual(got, want[name]) {
					t.Errorf("fast path %v: shape %q, want %q", m.fast, got, want[name])
				}
				if s.Truncated() {
					t.Error("a shape of a few names is truncated")
				}
			}
		})
	}
}

// jsonShape reads body through the mapping of items at /actas with id at
// /nro and status at /estado, both ways, and checks that they agree.
func jsonShape(t *testing.T, body string) *Shape {
	t.Helper()
	m := compile(t, Response{Items: one("/actas"), StatusMap: caba, Fields: plain(map[string]string{"id": "/nro", "status": "/estado"})})
	if !m.fast {
		t.Fatal("no fast path")
	}
	var shapes [2]*Shape
	for i, m := range []*Mapping{m, general(m)} {
		p, err := read(t, m, body, "application/json")
		if err != nil {
			t.Fatalf("Read (fast path %v): %v", m.fast, err)
		}
		shapes[i] = p.Health.Shape()
	}
	if !reflect.DeepEqual(shapes[0].Names(), shapes[1].Names()) || shapes[0].Sum() != shapes[1].Sum() {
		t.Errorf("the fast path names %q, the general one %q", shapes[0].Names(), shapes[1].Names())
	}
	return shapes[0]
}

func TestShapeNamesNoValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
		want       []string
	}{
		{"nested members and arrays", `{"actas": [{"nro": "A-1", "importe": {"valor": 1, "moneda": "ARS"},
			"infracciones": [{"desc": "x"}, {"desc": "y", "art": "5"}], "tags": ["a", "b"], "vacio": []}]}`,
			[]string{"/importe", "/importe/moneda", "/importe/valor", "/infracciones", "/infracciones/*",
				"/infracciones/*/art", "/infracciones/*/desc", "/nro", "/tags", "/tags/*", "/vacio"}},
		{"objects keyed by acta number, plate, CUIT or DNI", `{"actas": [{"nro": "A-1",
			"porActa": {"123456": {"monto": 1}, "654321": {"monto": 2}},
			"AB123CD": 1, "20-12345678-6": 2, "12.345.678": 3, "dominio": "AB123CD"}]}`,
			[]string{"/*", "/nro", "/porActa", "/porActa/*", "/porActa/*/monto", "/dominio"}},
		{"digits of other scripts, controls, invalid UTF-8, long keys", `{"actas": [{"nro": "A-1",
			"٣٤": 1, "a\u0000b": 2, "a\u200eb": 3, "` + strings.Repeat("k", MaxSegment+1) + `": 4, "ok": 5}]}`,
			[]string{"/*", "/nro", "/ok"}},
		{"keys holding a slash", `{"actas": [{"nro": "A-1", "a/b": 1, "c~d": 2}]}`,
			[]string{"/*", "/c~d", "/nro"}},
		{"union of the items", `{"actas": [{"nro": "A-1"}, {"nro": "A-2", "estado": "IMPAGA"}, {"nro": "A-3", "obs": null}]}`,
			[]string{"/estado", "/nro", "/obs"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			want := NewShape(tc.want).Names()
			if got := jsonShape(t, tc.body).Names(); !reflect.DeepEqual(got, want) {
				t.Errorf("shape %q, want %q", got, want)
			}
		})
	}
}

func TestShapeBounds(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"actas": [{"nro": "A-1"`)
	for i := range 300 {
		fmt.Fprintf(&b, `, "k%s": 1`, strings.Repeat("x", i%40)+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	b.WriteString(`, "deep": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}}}]}`)
	s := jsonShape(t, b.String())
	if s.Len() != MaxNames || !s.Truncated() {
		t.Errorf("%d names, truncated %v; want %d, truncated", s.Len(), s.Truncated(), MaxNames)
	}
	deep := jsonShape(t, `{"actas": [{"nro": "A-1", "deep": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {"i": 1}}}}}}}}}}]}`)
	for _, n := range deep.Names() {
		if strings.Count(n, "/") > maxShapeDepth {
			t.Errorf("name %q is deeper than %d segments", n, maxShapeDepth)
		}
	}
	if !deep.Has("/deep/a/b/c/d/e/f/g") || deep.Has("/deep/a/b/c/d/e/f/g/h") {
		t.Errorf("shape %q, want names down to %d segments", deep.Names(), maxShapeDepth)
	}
}

func TestShapeOfAnswersWithoutItems(t *testing.T) {
	t.Parallel()
	for _, body := range []string{`{"actas": []}`, `{"actas": null}`} {
		if s := jsonShape(t, body); s != nil {
			t.Errorf("%s: shape %q, want none", body, s.Names())
		}
	}
}

// TestShapeCache checks that answers of the same structure share one
// shape, and that another structure is told apart.
func TestShapeCache(t *testing.T) {
	t.Parallel()
	m := compile(t, Response{Items: one("/actas"), Fields: plain(map[string]string{"id": "/nro", "amount": "/monto"})})
	shape := func(body string) *Shape {
		t.Helper()
		p, err := read(t, m, body, "application/json")
		if err != nil {
			t.Fatal(err)
		}
		return p.Health.Shape()
	}
	a := shape(`{"actas": [{"nro": "A-1", "monto": 1}, {"nro": "A-2", "monto": 2}]}`)
	b := shape(`{"actas": [{"nro": "B-1", "monto": 5}]}`)
	if a != b {
		t.Error("two answers of one structure have shapes of their own")
	}
	renamed := shape(`{"actas": [{"nro": "B-1", "importe": 5}]}`)
	if renamed == a || renamed.Has("/monto") || !renamed.Has("/importe") {
		t.Errorf("after a rename the shape is %q", renamed.Names())
	}
	mixed := shape(`{"actas": [{"nro": "B-1", "importe": 5}, {"nro": "A-2", "monto": 2}]}`)
	if got := mixed.Names(); !reflect.DeepEqual(got, []string{"/importe", "/monto", "/nro"}) {
		t.Errorf("two structures in one answer: %q", got)
	}
	if again := shape(`{"actas": [{"nro": "A-2", "monto": 2}, {"nro": "B-1", "importe": 5}]}`); again != mixed {
		t.Error("the same two structures in another order make another shape")
	}
	many := `{"actas": [`
	for i := range 3 * maxDistinct {
		if i > 0 {
			many += ","
		}
		many += fmt.Sprintf(`{"nro": "A", "f%c%c": 1}`, 'a'+i%26, 'a'+i/26)
	}
	if s := shape(many + `]}`); s.Len() != 3*maxDistinct+1 {
		t.Errorf("%d structures in one answer: %d names, want %d", 3*maxDistinct, s.Len(), 3*maxDistinct+1)
	}
}

func TestHealthCountsAndUnion(t *testing.T) {
	t.Parallel()
	m := compile(t, Response{Items: one("/actas"), StatusMap: caba,
		Fields: plain(map[string]string{"id": "/nro", "status": "/estado", "place": "/lugar"})})
	p, err := read(t, m, `{"actas": [{"nro": "1", "estado": "IMPAGA", "lugar": "x"}, {"nro": "2", "estado": "VENCIDA"},
		{"nro": "3", "estado": "vencida", "lugar": "y"}, {"nro": "4", "estado": "VENCIDA", "lugar": "z"}]}`, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	h := p.Health
	if h.Mapped != 4 || h.Affected() != 3 {
		t.Errorf("Mapped, Affected = %d, %d; want 4, 3", h.Mapped, h.Affected())
	}
	got := map[string]int{}
	h.UnknownStatuses(func(text string, n int) { got[text] = n })
	if want := map[string]int{"VENCIDA": 2, "vencida": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("unknown statuses %v, want %v", got, want)
	}
	unmapped := map[string]int{}
	h.Unmapped(func(field, reason string, n int) { unmapped[field+" "+reason] = n })
	if want := map[string]int{"place missing": 1, "status unknown_status": 3}; !reflect.DeepEqual(unmapped, want) {
		t.Errorf("unmapped %v, want %v", unmapped, want)
	}

	q, err := read(t, m, `{"actas": [{"nro": "5", "estado": "VENCIDA", "lugar": "x", "obs": "o"}]}`, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	h.Add(q.Health)
	if h.Mapped != 5 || h.Affected() != 4 || !h.Shape().Has("/obs") || !h.Shape().Has("/lugar") {
		t.Errorf("after Add: Mapped %d, Affected %d, shape %q", h.Mapped, h.Affected(), h.Shape().Names())
	}
	got = map[string]int{}
	h.UnknownStatuses(func(text string, n int) { got[text] = n })
	if got["VENCIDA"] != 3 {
		t.Errorf("after Add, VENCIDA counted %d times, want 3", got["VENCIDA"])
	}
}

// TestShapeOfAFailedAnswer: the items read before the one that failed
// are the answer's shape, for the drift of a renamed id.
func TestShapeOfAFailedAnswer(t *testing.T) {
	t.Parallel()
	m := compile(t, Response{Items: one("/actas"), Fields: plain(map[string]string{"id": "/nro"})})
	p, err := read(t, m, `{"actas": [{"numero": "A-1"}]}`, "application/json")
	if err == nil {
		t.Fatal("an item without an id was read")
	}
	if s := p.Health.Shape(); !s.Has("/numero") {
		t.Errorf("shape of the failed answer: %q, want /numero", s.Names())
	}
}

// noValue matches what a name must never hold: a digit.
var noValue = regexp.MustCompile(`[0-9]`)

// checkNames fails t when a shape has too many names, or a name that
// holds a digit or is too deep.
func checkNames(t *testing.T, shapes ...*Shape) {
	t.Helper()
	for _, s := range shapes {
		if s.Len() > MaxNames {
			t.Fatalf("%d names", s.Len())
		}
		for _, n := range s.Names() {
			if noValue.MatchString(n) || strings.Count(n, "/") > maxShapeDepth {
				t.Fatalf("name %q", n)
			}
		}
	}
}

// FuzzShape maps arbitrary JSON both ways: it never panics, names never
// hold a digit nor exceed the bounds, and both ways name the same
// structure (the fast one through its cache, shared by every input).
func FuzzShape(f *testing.F) {
	for _, s := range []string{threeJSON, `{"actas": [{"nro": "A", "a": {"1": [[{}]]}}]}`, `{"actas": [1, "x", null, []]}`,
		`{"actas": [{"nro": "A", "\ud800": 1, "a\u0000": {"b": [1, {"c": 2}]}}]}`, `{"actas": {}}`} {
		f.Add([]byte(s))
	}
	m, err := Compile(Response{Items: one("/actas"), Fields: plain(map[string]string{"id": "/nro", "amount": "/a/b"})}, opts)
	if err != nil {
		f.Fatal(err)
	}
	g := general(m)
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := context.Background()
		fast, _ := m.Read(ctx, Answer{Status: 200, Body: body, ContentType: "application/json"}, domain)
		slow, _ := g.Read(ctx, Answer{Status: 200, Body: body, ContentType: "application/json"}, domain)
		checkNames(t, fast.Health.Shape(), slow.Health.Shape())
		// Both read the items only when the whole answer is valid JSON
		// whose items are an array; a fast read that stops at an item
		// names fewer items.
		if !json.Valid(body) || fast.Items != slow.Items || fast.Health.Mapped != fast.Items || slow.Health.Mapped != slow.Items ||
			fast.Health.Shape().Truncated() || slow.Health.Shape().Truncated() {
			return
		}
		if fn, sn := fast.Health.Shape().Names(), slow.Health.Shape().Names(); !reflect.DeepEqual(fn, sn) {
			t.Fatalf("fast path names %q, general %q", fn, sn)
		}
	})
}

// FuzzShapeMarkup reads arbitrary XML and HTML: the names stay bounded
// and never hold a digit.
func FuzzShapeMarkup(f *testing.F) {
	f.Add([]byte(threeSOAP), []byte(threeHTML))
	f.Add([]byte(`<r><acta nro="1"><a1 b2="3"><c/></a1></acta></r>`), []byte(`<table id="actas"><tbody><tr class="x1 y"><td><tr><td class="z">`))
	rs := threeResponses()
	x, h := compile(f, rs["xml"]), compile(f, rs["html"])
	f.Fuzz(func(t *testing.T, xml, html []byte) {
		ctx := context.Background()
		px, _ := x.Read(ctx, Answer{Status: 200, Body: xml, ContentType: "text/xml"}, domain)
		ph, _ := h.Read(ctx, Answer{Status: 200, Body: html, ContentType: "text/html"}, domain)
		checkNames(t, px.Health.Shape(), ph.Health.Shape())
	})
}

// BenchmarkShape measures the shape on the JSON fast path: answers of a
// structure seen before (the cache, as a portal answers day after day),
// and answers each of a structure never seen (names built every time).
func BenchmarkShape(b *testing.B) {
	m := compile(b, Response{Items: one("/actas"), StatusMap: caba, Fields: plain(map[string]string{
		"id": "/nro", "date": "/fecha", "amount": "/monto", "status": "/estado"})})
	body := func(extra string) []byte {
		var s strings.Builder
		s.WriteString(`{"actas": [`)
		for i := range 10 {
			if i > 0 {
				s.WriteString(",")
			}
			fmt.Fprintf(&s, `{"nro": "Q-%d", "fecha": "2026-03-14", "monto": 1, "estado": "IMPAGA", "lugar": {"calle": "x", "altura": 1}, "%s": 1}`, i, extra)
		}
		s.WriteString(`]}`)
		return []byte(s.String())
	}
	ctx := context.Background()
	b.Run("known structure", func(b *testing.B) {
		doc := body("obs")
		b.ReportAllocs()
		for b.Loop() {
			if _, err := m.Read(ctx, Answer{Status: 200, Body: doc}, domain); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new structure every answer", func(b *testing.B) {
		docs := make([][]byte, 512)
		for i := range docs {
			docs[i] = body(fmt.Sprintf("k%c%c", 'a'+i%26, 'a'+i/26))
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := m.Read(ctx, Answer{Status: 200, Body: docs[i%len(docs)]}, domain); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
