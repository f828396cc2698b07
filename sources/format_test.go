package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"

	"golang.org/x/text/encoding/charmap"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/document"
	"github.com/multas/aggregator/sources/mapping"
)

// The same three records, as three portals of different dialects write
// them: a JSON API, a SOAP service and an HTML page (package mapping's
// test data, which its own tests read too).
var (
	threeJSON = mustRead("mapping/testdata/three.json")
	threeSOAP = mustRead("mapping/testdata/three.xml")
	threeHTML = mustRead("mapping/testdata/three.html")
)

func mustRead(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// threeSpecs are the three portals' configurations.
func threeSpecs(base string) map[string]Spec {
	json := testSpec(base)

	xml := testSpec(base)
	xml.Response.Format = "xml"
	xml.Response.Namespaces = map[string]string{"s": "http://schemas.xmlsoap.org/soap/envelope/", "m": "urn:multas"}
	xml.Response.Items = items("/s:Envelope/s:Body/m:consultarActasResponse/m:acta")
	xml.Response.Fields = fields(map[string]string{
		"id": "@nro", "date": "m:fecha", "description": "m:detalle", "place": "m:lugar",
		"amount": "m:importe", "currency": "m:importe/@moneda", "status": "m:estado",
	})

	html := testSpec(base)
	html.Response.Format = "html"
	html.Response.NotFound = "p.sin-actas"
	html.Response.Items = items("table#actas tbody tr")
	html.Response.Fields = fields(map[string]string{
		"id": "@data-acta", "date": "td:nth-child(1)", "description": "td:nth-child(2)", "place": "td:nth-child(3)",
		"amount": "td:nth-child(4)", "currency": "td:nth-child(4)@data-moneda", "status": "td span.estado",
	})
	return map[string]Spec{"json": json, "xml": xml, "html": html}
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

// serve is a portal answering every request with body as contentType.
func serve(contentType string, body []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.Write(body)
	}
}

func TestFormatsMapTheSameInfractions(t *testing.T) {
	t.Parallel()
	got := map[string][]aggregator.Infraction{}
	var mu sync.Mutex
	t.Run("formats", func(t *testing.T) {
		for _, name := range []string{"json", "xml", "html"} {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				b := threeBodies[name]
				srv := portal(t, serve(b[0], []byte(b[1])))
				s := newSource(t, threeSpecs(srv.URL)[name], srv.Client())
				ans, err := s.Lookup(context.Background(), domainQuery)
				if err != nil {
					t.Fatalf("Lookup: %v", err)
				}
				if !reflect.DeepEqual(ans.Infractions, threeWant()) {
					t.Errorf("Infractions =\n%+v\nwant\n%+v", ans.Infractions, threeWant())
				}
				mu.Lock()
				got[name] = ans.Infractions
				mu.Unlock()
			})
		}
	})
	if !reflect.DeepEqual(got["json"], got["xml"]) || !reflect.DeepEqual(got["json"], got["html"]) {
		t.Errorf("the dialects disagree:\njson %+v\nxml  %+v\nhtml %+v", got["json"], got["xml"], got["html"])
	}
}

func TestAcceptFollowsTheFormat(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{"json": "application/json", "xml": "application/xml", "html": "text/html"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := threeBodies[name]
			srv := portal(t, func(w http.ResponseWriter, r *http.Request) {
				if got := r.Header.Get("Accept"); !strings.HasPrefix(got, want) {
					t.Errorf("Accept = %q, want it to start with %q", got, want)
				}
				serve(b[0], []byte(b[1]))(w, r)
			})
			s := newSource(t, threeSpecs(srv.URL)[name], srv.Client())
			if _, err := s.Lookup(context.Background(), domainQuery); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// latin1 encodes s in windows-1252, as a legacy portal sends it.
func latin1(t testing.TB, s string) []byte {
	t.Helper()
	b, err := charmap.Windows1252.NewEncoder().Bytes([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestCharsets(t *testing.T) {
	t.Parallel()
	const (
		xmlItem  = `<actas><acta><nro>1</nro><lugar>Córdoba</lugar></acta></actas>`
		htmlItem = `<table><tr><td>1</td><td>Córdoba</td></tr></table>`
		jsonItem = `{"resultado": {"actas": [{"nro": "1", "lugar": "Córdoba"}]}}`
	)
	tests := []struct {
		name, format, contentType, charset string
		body                               func(t testing.TB) []byte
	}{
		{"html, Content-Type charset", "html", "text/html; charset=windows-1252", "",
			func(t testing.TB) []byte { return latin1(t, "<html><body>"+htmlItem) }},
		{"html, Content-Type charset quoted", "html", `text/html;charset="ISO-8859-1"`, "",
			func(t testing.TB) []byte { return latin1(t, "<html><body>"+htmlItem) }},
		{"html, meta charset", "html", "text/html", "",
			func(t testing.TB) []byte {
				return latin1(t, `<html><head><meta charset="iso-8859-1"></head><body>`+htmlItem)
			}},
		{"html, meta http-equiv", "html", "", "",
			func(t testing.TB) []byte {
				return latin1(t, `<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252"></head><body>`+htmlItem)
			}},
		{"html, Content-Type beats meta", "html", "text/html; charset=utf-8", "",
			func(t testing.TB) []byte {
				return []byte(`<html><head><meta charset="windows-1252"></head><body>` + htmlItem)
			}},
		{"html, configured beats Content-Type and meta", "html", "text/html; charset=utf-8", "windows-1252",
			func(t testing.TB) []byte {
				return latin1(t, `<html><head><meta charset="utf-8"></head><body>`+htmlItem)
			}},
		{"html, UTF-8 by default", "html", "text/html", "",
			func(t testing.TB) []byte { return []byte("<html><body>" + htmlItem) }},
		{"xml, prolog encoding", "xml", "text/xml", "",
			func(t testing.TB) []byte { return latin1(t, `<?xml version="1.0" encoding="ISO-8859-1"?>`+xmlItem) }},
		{"xml, prolog encoding single quotes", "xml", "application/xml", "",
			func(t testing.TB) []byte {
				return latin1(t, `<?xml version='1.0' encoding='windows-1252' standalone='yes'?>`+xmlItem)
			}},
		{"xml, Content-Type charset", "xml", "text/xml; charset=ISO-8859-1", "",
			func(t testing.TB) []byte { return latin1(t, `<?xml version="1.0"?>`+xmlItem) }},
		{"xml, Content-Type beats prolog", "xml", "text/xml; charset=utf-8", "",
			func(t testing.TB) []byte { return []byte(`<?xml version="1.0" encoding="ISO-8859-1"?>` + xmlItem) }},
		{"xml, configured beats prolog", "xml", "text/xml", "latin1",
			func(t testing.TB) []byte { return latin1(t, `<?xml version="1.0" encoding="UTF-8"?>`+xmlItem) }},
		{"xml, UTF-16 with a byte order mark", "xml", "text/xml", "",
			func(t testing.TB) []byte {
				var b []byte
				b = append(b, 0xFF, 0xFE)
				for _, r := range `<?xml version="1.0" encoding="UTF-16"?>` + xmlItem {
					b = append(b, byte(r), byte(r>>8))
				}
				return b
			}},
		{"xml, UTF-8 byte order mark", "xml", "text/xml", "",
			func(t testing.TB) []byte { return []byte("\uFEFF" + xmlItem) }},
		{"json, Content-Type charset", "json", "application/json; charset=iso-8859-1", "",
			func(t testing.TB) []byte { return latin1(t, jsonItem) }},
		{"json, configured", "json", "application/json", "windows-1252",
			func(t testing.TB) []byte { return latin1(t, jsonItem) }},
		{"json, UTF-8 label", "json", "application/json; charset=UTF-8", "",
			func(t testing.TB) []byte { return []byte(jsonItem) }},
		{"json, unknown label is passed over", "json", "application/json; charset=klingon", "",
			func(t testing.TB) []byte { return []byte(jsonItem) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := portal(t, serve(tt.contentType, tt.body(t)))
			spec := testSpec(srv.URL)
			spec.Response.Format, spec.Response.Charset = tt.format, tt.charset
			switch tt.format {
			case "xml":
				spec.Response.Items, spec.Response.Fields = items("//acta"), fields(map[string]string{"id": "nro", "place": "lugar"})
			case "html":
				spec.Response.Items, spec.Response.Fields = items("tr"), fields(map[string]string{"id": "td:nth-child(1)", "place": "td:nth-child(2)"})
				spec.Response.NotFound = "p.sin-actas"
			default:
				spec.Response.Fields = fields(map[string]string{"id": "/nro", "place": "/lugar"})
			}
			s := newSource(t, spec, srv.Client())
			ans, err := s.Lookup(context.Background(), domainQuery)
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			if len(ans.Infractions) != 1 || ans.Infractions[0].Place != "Córdoba" {
				t.Errorf("Infractions = %+v, want one at Córdoba", ans.Infractions)
			}
		})
	}
}

func TestMarkers(t *testing.T) {
	t.Parallel()
	const (
		jsonNone  = `{"resultado": {"mensaje": "No se registran actas", "actas": null}}`
		jsonMaint = `{"estado": "mantenimiento", "detalle": "Volvemos pronto"}`
		xmlNone   = `<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><m:consultarActasResponse xmlns:m="urn:multas"><m:sinActas/></m:consultarActasResponse></s:Body></s:Envelope>`
		xmlMaint  = `<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body><s:Fault><faultcode>s:Server</faultcode><faultstring>Servicio en mantenimiento</faultstring></s:Fault></s:Body></s:Envelope>`
		htmlNone  = `<html><body><div class="alert">No se registran actas para el dominio</div><table id="actas"><tbody></tbody></table></body></html>`
		htmlMaint = `<html><body><div id="mantenimiento"><h1>Sitio en mantenimiento</h1></div></body></html>`
		htmlOther = `<html><body><p>Bienvenido</p></body></html>`
	)
	markers := map[string][2]string{ // not_found, unavailable
		"json": {"/resultado/mensaje", "/estado"},
		"xml":  {"//m:sinActas", "//s:Fault[contains(faultstring, 'mantenimiento')]"},
		"html": {"div.alert", "#mantenimiento"},
	}
	tests := []struct {
		format, body string
		want         int // infractions; -1: unavailable (503); -2: unreadable
	}{
		{"json", threeJSON, 3},
		{"json", jsonNone, 0},
		{"json", jsonMaint, -1},
		{"xml", threeSOAP, 3},
		{"xml", xmlNone, 0},
		{"xml", xmlMaint, -1},
		{"html", threeHTML, 3},
		{"html", htmlNone, 0},
		{"html", htmlMaint, -1},
		// A page that is neither items, nor not_found, nor maintenance:
		// with not_found configured, zero items is not an answer.
		{"html", htmlOther, -2},
		{"xml", `<otra/>`, -2},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%s %d", tt.format, i), func(t *testing.T) {
			t.Parallel()
			srv := portal(t, serve(threeBodies[tt.format][0], []byte(tt.body)))
			spec := threeSpecs(srv.URL)[tt.format]
			spec.Response.NotFound, spec.Response.Unavailable = markers[tt.format][0], markers[tt.format][1]
			s := newSource(t, spec, srv.Client())
			ans, err := s.Lookup(context.Background(), domainQuery)
			switch tt.want {
			case -1:
				e := checkError(t, err, aggregator.Unavailable, http.StatusServiceUnavailable, 0)
				if e != nil && !errors.Is(err, mapping.ErrMaintenance) {
					t.Errorf("err = %v, want the maintenance page", err)
				}
			case -2:
				checkError(t, err, aggregator.Unreadable, http.StatusOK, 0)
			default:
				if err != nil {
					t.Fatalf("Lookup: %v", err)
				}
				if len(ans.Infractions) != tt.want {
					t.Errorf("%d infractions, want %d", len(ans.Infractions), tt.want)
				}
			}
		})
	}
}

func TestMarkupZeroItems(t *testing.T) {
	t.Parallel()
	// Without not_found, zero matches in an answer of the right format is
	// a valid empty answer; in an answer of another format it is not.
	tests := []struct {
		format, contentType, body string
		ok                        bool
	}{
		{"xml", "text/xml", `<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body/></s:Envelope>`, true},
		{"xml", "text/html", `<html><body><p>Mantenimiento<br></p></body></html>`, false},
		{"xml", "application/json", `{"actas": []}`, false},
		{"xml", "text/xml", ``, false},
		// SPEC 12: an html page without items is "no infractions" only
		// when its marker says so; this one could be a captcha.
		{"html", "text/html", `<html><body><table id="actas"><tbody></tbody></table></body></html>`, false},
		{"html", "text/html", `<html><body><p class="sin-actas">Sin actas</p></body></html>`, true},
		{"html", "text/html", " \n ", false},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			srv := portal(t, serve(tt.contentType, []byte(tt.body)))
			s := newSource(t, threeSpecs(srv.URL)[tt.format], srv.Client())
			ans, err := s.Lookup(context.Background(), domainQuery)
			if !tt.ok {
				checkError(t, err, aggregator.Unreadable, http.StatusOK, 0)
				return
			}
			if err != nil || len(ans.Infractions) != 0 {
				t.Errorf("Lookup = %d infractions, %v; want none and no error", len(ans.Infractions), err)
			}
		})
	}
}

func TestMarkupUnreadable(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat("<a>", document.MaxDepth+1) + strings.Repeat("</a>", document.MaxDepth+1)
	laughs := `<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">` +
		`<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]><actas><acta><nro>&lol3;</nro></acta></actas>`
	external := `<?xml version="1.0"?><!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><actas><acta><nro>&x;</nro></acta></actas>`
	tests := []struct {
		name, format, body, msg string
	}{
		{"xml item without id", "xml", `<actas><acta><nro> </nro></acta></actas>`, "field id"},
		{"xml amount that does not parse", "xml", `<actas><acta><nro>1</nro><monto>mucho</monto></acta></actas>`, "field amount"},
		{"xml date that does not parse", "xml", `<actas><acta><nro>1</nro><fecha>ayer</fecha></acta></actas>`, "field date"},
		{"xml not well-formed", "xml", `<actas><acta></actas>`, "invalid XML"},
		{"xml cut short", "xml", `<actas><acta><nro>1</nro>`, "invalid XML"},
		{"xml two roots", "xml", `<actas/><actas/>`, "more than one root"},
		{"xml too deep", "xml", deep, "deeper than 512"},
		{"xml entity expansion", "xml", laughs, "invalid XML"},
		{"xml external entity", "xml", external, "invalid XML"},
		{"html item without id", "html", `<table><tr><td></td><td>x</td></tr></table>`, "field id"},
		{"html amount that does not parse", "html", `<table><tr><td>1</td><td>$ 1.2.3,4,5</td></tr></table>`, "field amount"},
		{"html too deep", "html", strings.Repeat("<div>", 600), "512"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := portal(t, serve("text/"+tt.format, []byte(tt.body)))
			spec := testSpec(srv.URL)
			spec.Response.Format = tt.format
			if tt.format == "xml" {
				spec.Response.Items, spec.Response.Fields = items("//acta"), fields(map[string]string{"id": "nro", "amount": "monto", "date": "fecha"})
			} else {
				spec.Response.Items, spec.Response.Fields = items("tr"), fields(map[string]string{"id": "td:nth-child(1)", "amount": "td:nth-child(2)"})
				spec.Response.NotFound = "p.sin-actas"
			}
			s := newSource(t, spec, srv.Client())
			_, err := s.Lookup(context.Background(), domainQuery)
			checkError(t, err, aggregator.Unreadable, http.StatusOK, 0)
			if err != nil && !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v, want it to mention %q", err, tt.msg)
			}
		})
	}
}

func TestItemRelativeSelectors(t *testing.T) {
	t.Parallel()
	// The item itself ("" and "."), its own attribute ("@attr"), and in
	// XPath an absolute path, which starts at the document.
	tests := []struct {
		format, body, items string
		fields              map[string]string
		want                [2]string // id, description
	}{
		{"html", `<ul><li class="acta" id="Z-9"> Mal <i>estacionado</i> </li></ul>`, "li.acta",
			map[string]string{"id": "@id", "description": ""}, [2]string{"Z-9", "Mal estacionado"}},
		{"html", `<ul><li class="acta" id="Z-9">Mal estacionado</li></ul>`, "li.acta",
			map[string]string{"id": ".@id", "description": "."}, [2]string{"Z-9", "Mal estacionado"}},
		{"xml", `<r><titulo>Actas</titulo><acta id="Z-9"> Mal estacionado </acta></r>`, "/r/acta",
			map[string]string{"id": "@id", "description": ""}, [2]string{"Z-9", "Mal estacionado"}},
		{"xml", `<r><titulo>Actas</titulo><acta id="Z-9">x</acta></r>`, "/r/acta",
			map[string]string{"id": ".//@id", "description": "/r/titulo"}, [2]string{"Z-9", "Actas"}},
		{"xml", `<r><acta><n>Z-9</n><d>a</d><d>b</d></acta></r>`, "//acta",
			map[string]string{"id": "normalize-space(n)", "description": "concat(n, ': ', d[2])"}, [2]string{"Z-9", "Z-9: b"}},
	}
	for i, tt := range tests {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			srv := portal(t, serve("text/"+tt.format, []byte(tt.body)))
			spec := testSpec(srv.URL)
			spec.Response.Format, spec.Response.Items, spec.Response.Fields = tt.format, items(tt.items), fields(tt.fields)
			if tt.format == "html" {
				spec.Response.NotFound = "p.sin-actas"
			}
			s := newSource(t, spec, srv.Client())
			ans, err := s.Lookup(context.Background(), domainQuery)
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			if len(ans.Infractions) != 1 {
				t.Fatalf("%d infractions, want 1", len(ans.Infractions))
			}
			got := [2]string{ans.Infractions[0].ID, ans.Infractions[0].Description}
			if got != tt.want {
				t.Errorf("id, description = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewChecksFormats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*Spec)
		want   []string
	}{
		{"unknown format", func(s *Spec) { s.Response.Format = "yaml" }, []string{"response.format", `"yaml"`}},
		{"unknown charset", func(s *Spec) { s.Response.Charset = "klingon" }, []string{"response.charset", "klingon"}},
		{"namespaces with json", func(s *Spec) { s.Response.Namespaces = map[string]string{"m": "urn:x"} }, []string{"response.namespaces: only with xml"}},
		{"xml, every problem at once", func(s *Spec) {
			s.Response.Format = "xml"
			s.Response.Namespaces = map[string]string{"a:b": "urn:x", "m": ""}
			s.Response.Items = items("//q:acta")
			s.Response.Fields = fields(map[string]string{"id": "nro[", "date": "fecha"})
			s.Response.NotFound, s.Response.Unavailable = "//(", "//m:x"
		}, []string{
			`response.namespaces["a:b"]: "a:b" is not a namespace prefix`, "response.namespaces.m: empty namespace URI",
			"response.items: not an XPath", "prefix q not defined", "response.fields.id: not an XPath",
			"response.not_found: not an XPath",
		}},
		{"xml, items required", func(s *Spec) { s.Response.Format, s.Response.Items = "xml", nil }, []string{"response.items: required with format xml"}},
		{"html, every problem at once", func(s *Spec) {
			s.Response.Format = "html"
			s.Response.Items = items("tr@id")
			s.Response.Fields = fields(map[string]string{"id": "td:nth-child(", "place": "td@", "date": "td"})
			s.Response.Unavailable = "div[["
		}, []string{
			`response.items: selects item elements`, "response.fields.id: not a CSS selector",
			`response.fields.place: "@" must be followed`, "response.unavailable: not a CSS selector",
			"response.not_found: an html source must say how its no-results page looks",
		}},
		{"html, items required", func(s *Spec) { s.Response.Format, s.Response.Items = "html", nil }, []string{"response.items: required with format html"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := testSpec("http://portal")
			tt.change(&spec)
			_, err := New(spec, nil, nil)
			if err == nil {
				t.Fatal("New accepted the spec")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestXPathConcurrent evaluates one source's XPath selectors, functions
// included, from many goroutines at once (run it with -race).
func TestXPathConcurrent(t *testing.T) {
	t.Parallel()
	srv := portal(t, serve("text/xml", []byte(threeSOAP)))
	spec := threeSpecs(srv.URL)["xml"]

	s := newSource(t, spec, srv.Client())
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 10 {
				ans, err := s.Lookup(context.Background(), domainQuery)
				if err != nil || !reflect.DeepEqual(ans.Infractions, threeWant()) {
					t.Errorf("Lookup = %+v, %v", ans.Infractions, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestMarkupSizeLimit(t *testing.T) {
	t.Parallel()
	// An answer over max_response_bytes is refused before any parsing.
	big := "<r>" + strings.Repeat("<acta><nro>1</nro></acta>", 100) + "</r>"
	srv := portal(t, func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, big) })
	spec := testSpec(srv.URL)
	spec.Response.Format, spec.Response.Items, spec.Response.Fields = "xml", items("//acta"), fields(map[string]string{"id": "nro"})
	spec.MaxResponseBytes = int64(len(big) - 1)
	s := newSource(t, spec, srv.Client())
	_, err := s.Lookup(context.Background(), domainQuery)
	checkError(t, err, aggregator.Unreadable, http.StatusOK, 0)
}
