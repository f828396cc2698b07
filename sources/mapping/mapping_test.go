package mapping

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/multas/aggregator"
)

// The same three records, as three portals of different dialects write
// them: a JSON API, a SOAP service and an HTML page.
var (
	threeJSON = mustRead("testdata/three.json")
	threeSOAP = mustRead("testdata/three.xml")
	threeHTML = mustRead("testdata/three.html")
)

func mustRead(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// loc is the demo sources' zone.
var loc = mustLocation("America/Argentina/Buenos_Aires")

func mustLocation(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

// opts are the options of the test mappings: a CABA-like source with
// vouchers.
var opts = Options{Source: "caba", Jurisdiction: "Ciudad de Buenos Aires", Currency: "ARS", Location: loc,
	VoucherPrefix: "/v1/sources/caba/infractions/", Now: func() time.Time { return time.Date(2026, 6, 1, 0, 0, 0, 0, loc) }}

// domain is the subject of the test lookups.
var domain = Subject{Op: aggregator.ByDomain, Value: "AB123CD"}

// sel is a field of one selector.
func sel(s string) Field { return Field{Select: List{s}} }

// plain is a fields block of plain selectors.
func plain(m map[string]string) map[string]Field {
	out := make(map[string]Field, len(m))
	for k, v := range m {
		out[k] = sel(v)
	}
	return out
}

// one is the items block of one selector.
func one(s string) Items { return Items{{Select: s}} }

var caba = map[string]string{"IMPAGA": "unpaid", "PAGADA": "paid", "EN GESTION": "in_process"}

// threeResponses are the three portals' mappings.
func threeResponses() map[string]Response {
	return map[string]Response{
		"json": {Items: one("/resultado/actas"), StatusMap: caba, Fields: plain(map[string]string{
			"id": "/nro", "date": "/fecha", "description": "/detalle", "place": "/lugar",
			"amount": "/monto", "currency": "/moneda", "status": "/estado"})},
		"xml": {Format: "xml", StatusMap: caba,
			Namespaces: map[string]string{"s": "http://schemas.xmlsoap.org/soap/envelope/", "m": "urn:multas"},
			Items:      one("/s:Envelope/s:Body/m:consultarActasResponse/m:acta"),
			Fields: plain(map[string]string{
				"id": "@nro", "date": "m:fecha", "description": "m:detalle", "place": "m:lugar",
				"amount": "m:importe", "currency": "m:importe/@moneda", "status": "m:estado"})},
		"html": {Format: "html", StatusMap: caba, NotFound: "p.sin-actas", Items: one("table#actas tbody tr"),
			Fields: plain(map[string]string{
				"id": "@data-acta", "date": "td:nth-child(1)", "description": "td:nth-child(2)", "place": "td:nth-child(3)",
				"amount": "td:nth-child(4)", "currency": "td:nth-child(4)@data-moneda", "status": "td span.estado"})},
	}
}

// threeBodies are the three answers, with their content types.
var threeBodies = map[string][2]string{
	"json": {"application/json", threeJSON},
	"xml":  {"text/xml; charset=utf-8", threeSOAP},
	"html": {"text/html", threeHTML},
}

// threeWant is what every dialect must come out as.
func threeWant() []aggregator.Infraction {
	base := aggregator.Infraction{Source: "caba", Jurisdiction: "Ciudad de Buenos Aires", Currency: "ARS"}
	one, two, three := base, base, base
	one.ID, one.Date, one.Description, one.Place, one.Amount = "A-1", "2026-03-14T09:12:00-03:00", "Exceso de velocidad", "Av. Lugones km 4", "185000.50"
	one.Status, one.StatusRaw, one.Voucher = aggregator.Unpaid, "IMPAGA", "/v1/sources/caba/infractions/A-1/voucher"
	two.ID, two.Date, two.Description, two.Place, two.Amount = "B-2", "2026-02-01T10:00:00-05:00", "Semáforo en rojo", "Córdoba y Callao", "1234.50"
	two.Status, two.StatusRaw, two.Voucher = aggregator.Paid, "pagada", "/v1/sources/caba/infractions/B-2/voucher"
	three.ID, three.Date, three.Description, three.Amount, three.Currency = "C 3", "2026-03-14T09:12:00-03:00", "Estacionamiento", "12345.67", "USD"
	three.Status, three.StatusRaw, three.Voucher = aggregator.InProcess, "En Gestion", "/v1/sources/caba/infractions/C%203/voucher"
	return []aggregator.Infraction{one, two, three}
}

// compile compiles r with the test options.
func compile(t testing.TB, r Response) *Mapping {
	t.Helper()
	m, err := Compile(r, opts)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return m
}

// read maps a 200 answer.
func read(t testing.TB, m *Mapping, body, contentType string) (Page, error) {
	t.Helper()
	return m.Read(context.Background(), Answer{Status: 200, Body: []byte(body), ContentType: contentType}, domain)
}

// general is m without its fast path: every JSON answer goes through the
// general one.
func general(m *Mapping) *Mapping {
	g := *m
	g.fast = false
	return &g
}

func TestFormatsMapTheSameInfractions(t *testing.T) {
	t.Parallel()
	for name, r := range threeResponses() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m := compile(t, r)
			for _, m := range []*Mapping{m, general(m)} {
				p, err := read(t, m, threeBodies[name][1], threeBodies[name][0])
				if err != nil {
					t.Fatalf("Read: %v", err)
				}
				if !reflect.DeepEqual(p.Infractions, threeWant()) {
					t.Errorf("infractions:\n%+v\nwant\n%+v", p.Infractions, threeWant())
				}
				if p.Items != 3 || p.Health.Mapped != 3 {
					t.Errorf("Items, Mapped = %d, %d; want 3, 3", p.Items, p.Health.Mapped)
				}
			}
		})
	}
}

func TestFastPathIsTaken(t *testing.T) {
	t.Parallel()
	if m := compile(t, threeResponses()["json"]); !m.fast {
		t.Error("a JSON mapping of pointers does not take the fast path")
	}
	r := threeResponses()["json"]
	r.Fields["description"] = Field{Select: List{"$.detalle"}}
	if m := compile(t, r); m.fast {
		t.Error("a mapping with a JSONPath field takes the fast path")
	}
}

// TestFastPathCopiesWhatItKeeps: the fast path reads values in place;
// the infractions must not share the answer's bytes, which the caller
// reuses for the next answer.
func TestFastPathCopiesWhatItKeeps(t *testing.T) {
	t.Parallel()
	m := compile(t, threeResponses()["json"])
	body := []byte(`{"resultado": {"actas": [{"nro": "A-1", "fecha": "2026-03-14T09:12:00-03:00", "detalle": "Exceso",
		"lugar": "Lugones", "monto": "185000.50", "moneda": "usd", "estado": "impaga"}]}}`)
	p, err := m.Read(context.Background(), Answer{Status: 200, Body: body}, domain)
	if err != nil || len(p.Infractions) != 1 {
		t.Fatalf("Read = %+v, %v", p.Infractions, err)
	}
	want := fmt.Sprintf("%+v", p.Infractions[0])
	for i := range body {
		body[i] = 'x'
	}
	if got := fmt.Sprintf("%+v", p.Infractions[0]); got != want {
		t.Errorf("the infraction changed with the answer's buffer:\n%s\nwas\n%s", got, want)
	}
}
