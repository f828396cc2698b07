package mapping

import (
	"context"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator"
)

// amountFormat is what every normalised amount looks like.
var amountFormat = regexp.MustCompile(`^-?(0|[1-9][0-9]*)\.[0-9]{2}$`)

// checkInfraction checks the invariants of a normalised infraction.
func checkInfraction(t *testing.T, inf aggregator.Infraction) {
	t.Helper()
	if inf.ID == "" || len([]rune(inf.ID)) > 200 || inf.Source != "caba" || !inf.Status.Valid() {
		t.Errorf("bad infraction %+v", inf)
	}
	if inf.Amount != "" && !amountFormat.MatchString(inf.Amount) {
		t.Errorf("amount %q is not a two-decimal string", inf.Amount)
	}
	if inf.Units != nil && !amountFormat.MatchString(inf.Units.Value) {
		t.Errorf("units %q is not a two-decimal string", inf.Units.Value)
	}
	if inf.Date != "" {
		if _, err := time.Parse(time.RFC3339, inf.Date); err != nil || len(inf.Date) > len("2006-01-02T15:04:05-07:00") {
			t.Errorf("date %q is not RFC 3339 at seconds precision", inf.Date)
		}
	}
	for _, s := range []string{inf.Description, inf.Place, inf.StatusRaw} {
		if len([]rune(s)) > 1000 {
			t.Errorf("a text of %d characters", len([]rune(s)))
		}
	}
}

// checkPage checks what Read made of body: bounded by its size, every
// infraction well formed.
func checkPage(t *testing.T, p Page, body []byte) {
	t.Helper()
	if len(p.Infractions) > len(body)+1 {
		t.Fatalf("%d infractions from %d bytes", len(p.Infractions), len(body))
	}
	for _, inf := range p.Infractions {
		checkInfraction(t, inf)
	}
}

// FuzzMap maps any JSON answer both ways, in place and through decoded
// values, which must agree.
func FuzzMap(f *testing.F) {
	for _, seed := range []string{
		threeJSON,
		`{"resultado": {"actas": null}}`,
		`{"resultado": null}`,
		`{"resultado": {"actas": [{"nro": 1, "monto": 1.5e3, "fecha": 1773490320000, "estado": true}]}}`,
		`{"resultado": {"actas": [{"nro": "x", "monto": "$ 1.234,565", "fecha": "14/03/2026 09:12", "moneda": " usd "}]}}`,
		`{"resultado": {"actas": [{"nro": "x", "monto": "1e999999999"}]}}`,
		`{"resultado": {"actas": [{"nro": {"a": [1, 2]}}]}}`,
		`{"resultado": {"actas": [null, {"nro": "\u00e9\ud800", "nro": "dup"}]}}`,
		`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
		`{"resultado": {"actas": []}} trailing`,
		"\uFEFF{\"resultado\": {\"actas\": [{\"nro\": \"A\"}]}}",
		``,
	} {
		f.Add([]byte(seed))
	}
	r := threeResponses()["json"]
	r.NullValues = []string{"----"}
	r.Items = Items{{Select: "/resultado/actas", Set: map[string]string{"place": "fijo"}}}
	fast, err := Compile(r, opts)
	if err != nil || !fast.fast {
		f.Fatalf("Compile: %v (fast %v)", err, fast != nil && fast.fast)
	}
	slow := general(fast)
	f.Fuzz(func(t *testing.T, doc []byte) {
		a := Answer{Status: 200, Body: doc, ContentType: "application/json"}
		p1, err1 := fast.Read(context.Background(), a, domain)
		p2, err2 := slow.Read(context.Background(), a, domain)
		if (err1 == nil) != (err2 == nil) {
			t.Fatalf("fast: %v; general: %v", err1, err2)
		}
		if err1 != nil {
			return
		}
		if !reflect.DeepEqual(p1.Infractions, p2.Infractions) {
			t.Fatalf("fast:\n%+v\ngeneral:\n%+v", p1.Infractions, p2.Infractions)
		}
		checkPage(t, p1, doc)
	})
}

// fuzzResponses are mappings of every format and most SPEC 12 keys.
func fuzzResponses() []Response {
	three := threeResponses()
	columns := Response{Format: "html", NotFound: "p.vacio", Items: one("table tr"), Header: "tr:first-child > *",
		Fields: map[string]Field{"id": {Column: List{"Acta"}}, "date": {Column: List{"Fecha", "Fecha y Hora"}, Layout: List{"dd/MM/yyyy HH:mm", "d 'de' MMMM 'de' yyyy"}},
			"amount": {Column: List{"Monto"}}, "place": {Select: List{"td.a", "td.b"}, Join: ptr(", ")}},
		Match: &Match{Column: List{"Dominio"}, Equals: "{domain}"}}
	embedded := Response{Format: "html", NotFound: "p.vacio", Decimal: ",",
		Items:  Items{{Select: "input@data-json", Format: "json"}, {Select: "li", Set: map[string]string{"status_raw": "IMPAGA"}}},
		Fields: map[string]Field{"id": {Select: List{"/id"}}, "units": {Select: List{"/uf"}, Code: "UF"}}}
	embedded.Items[1].Format = "json" // fields select in the documents of both entries
	rules := Response{Items: Items{{Select: "$..actas[*]"}}, Unwrap: []Unwrap{{Select: "/d"}},
		Fields: map[string]Field{"id": {Select: List{"/nro"}}, "description": {Select: List{"$..d"}, Join: ptr("; ")}},
		Errors: []Rule{{When: &When{Select: "/error", Equals: &Scalar{Raw: []byte("true")}}, Outcome: "rejected", Detail: "/m"},
			{Status: []int{500}, Outcome: "unavailable"}, {When: &When{Select: "/m", Matches: ptr("(?i)captcha")}, Outcome: "rate_limited"}}}
	return []Response{three["xml"], three["html"], columns, embedded, rules}
}

func ptr[T any](v T) *T { return &v }

// FuzzRead reads any answer with any status through mappings of every
// format and key: never a panic, results bounded by the answer.
func FuzzRead(f *testing.F) {
	for _, seed := range []struct {
		which  uint8
		status int
		body   string
	}{
		{0, 200, threeSOAP}, {1, 200, threeHTML},
		{2, 200, `<table><tr><th colspan="2">Acta</th><th>Dominio</th><th>Fecha y Hora</th></tr><tr><td>1</td><td>x</td><td>AB123CD</td><td>14 de marzo de 2026</td></tr></table>`},
		{3, 200, `<input data-json='{"id":"1","uf":"1,5"}'><ul><li>&lt;b&gt;x&lt;/b&gt;</li></ul>`},
		{4, 200, `{"d": "{\"actas\": [{\"nro\": \"1\", \"d\": \"a\"}]}"}`},
		{4, 500, `{"error": true, "m": "captcha"}`},
		{1, 200, strings.Repeat("<div>", 600)},
		{0, 200, `<!DOCTYPE r [<!ENTITY x "xx">]><r>&x;</r>`},
	} {
		f.Add(seed.which, seed.status, []byte(seed.body))
	}
	var ms []*Mapping
	for _, r := range fuzzResponses() {
		m, err := Compile(r, opts)
		if err != nil {
			f.Fatal(err)
		}
		ms = append(ms, m)
	}
	f.Fuzz(func(t *testing.T, which uint8, status int, body []byte) {
		m := ms[int(which)%len(ms)]
		a := Answer{Status: 100 + (status%500+500)%500, Body: body}
		p, err := m.Read(context.Background(), a, domain)
		if err == nil {
			checkPage(t, p, body)
		}
		ins, _ := m.Inspect(context.Background(), a, domain)
		if len(ins.Items) > len(body)+1 {
			t.Fatalf("%d inspected items from %d bytes", len(ins.Items), len(body))
		}
	})
}
