package e2e

import (
	"encoding/json"
	"encoding/xml"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// received is what a portal saw of one request.
type received struct {
	method, path, query, contentType, body string
	header                                 http.Header
}

// recording answers with h and keeps what each request carried.
type recording struct {
	mu  sync.Mutex
	got []received
}

func (rec *recording) handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.got = append(rec.got, received{method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
			contentType: r.Header.Get("Content-Type"), body: string(body), header: r.Header.Clone()})
		rec.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (rec *recording) last(t *testing.T) received {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) == 0 {
		t.Fatal("the portal received no request")
	}
	return rec.got[len(rec.got)-1]
}

// TestRequestDialects configures each kind of request of SPEC 8 (query
// parameters, operation headers, form, JSON and XML bodies) and checks what
// the portal received, with the normalised plate or id in the right place.
func TestRequestDialects(t *testing.T) {
	t.Parallel()
	var form, js, soap recording
	pForm := newPortal(t, form.handler(one("F-1")))
	pJSON := newPortal(t, js.handler(one("J-1")))
	pSOAP := newPortal(t, soap.handler(one("S-1")))
	e := startWith(t,
		source{id: "form", url: pForm.URL, ops: `{by_domain: {method: POST, path: /consulta, query: {formato: json},
      headers: {X-Canal: web}, body: {form: {dominio: "{domain}", tipo: P}}}}`},
		source{id: "json", url: pJSON.URL, ops: `{by_id: {method: POST, path: "/personas/buscar", body: {json: {filtro: {documento: "{id}", tipo: "{id_kind}"}, pagina: 1, activo: true}}}}`},
		source{id: "soap", url: pSOAP.URL, ops: `{by_domain: {method: POST, path: /ws, headers: {SOAPAction: "urn:consultarActas"},
      body: {text: "<Envelope xmlns=\"http://schemas.xmlsoap.org/soap/envelope/\"><Body><consultar><dominio>{domain}</dominio></consultar></Body></Envelope>", content_type: "text/xml; charset=utf-8"}}}`},
	)

	a := e.byDomain("ab-123-cd")
	if a.status != http.StatusOK || !a.result.Complete {
		t.Fatalf("by domain: %d %+v", a.status, a.result)
	}
	got := form.last(t)
	if got.method != "POST" || got.path != "/consulta" || got.query != "formato=json" ||
		got.contentType != "application/x-www-form-urlencoded" || got.body != "dominio=AB123CD&tipo=P" ||
		got.header.Get("X-Canal") != "web" {
		t.Errorf("form portal received %+v", got)
	}
	got = soap.last(t)
	var env struct {
		Body struct {
			Consultar struct {
				Dominio string `xml:"dominio"`
			} `xml:"consultar"`
		} `xml:"Body"`
	}
	if err := xml.Unmarshal([]byte(got.body), &env); err != nil || env.Body.Consultar.Dominio != "AB123CD" ||
		got.header.Get("SOAPAction") != "urn:consultarActas" || got.contentType != "text/xml; charset=utf-8" {
		t.Errorf("SOAP portal received %+v (%v)", got, err)
	}

	a = e.query("id=20-12345678-6")
	if a.status != http.StatusOK || !a.result.Complete {
		t.Fatalf("by id: %d %+v", a.status, a.result)
	}
	got = js.last(t)
	var doc struct {
		Filtro struct{ Documento, Tipo string }
		Pagina int
		Activo bool
	}
	if err := json.Unmarshal([]byte(got.body), &doc); err != nil || got.contentType != "application/json" ||
		doc.Filtro.Documento != "20123456786" || doc.Filtro.Tipo != "cuit" || doc.Pagina != 1 || !doc.Activo {
		t.Errorf("JSON portal received %+v (%+v, %v)", got, doc, err)
	}
	if !strings.HasPrefix(got.body, `{"filtro":{"documento":`) {
		t.Errorf("JSON body %s: keys not in the configured order", got.body)
	}
}

// TestVoucherDotSegments checks that an infraction id that is a dot
// segment never reaches the portal: the client gets 400 invalid-query.
func TestVoucherDotSegments(t *testing.T) {
	t.Parallel()
	p := newPortal(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		_, _ = w.Write([]byte("%PDF-1.4"))
	}))
	e := startWith(t, source{id: "caba", url: p.URL})
	for _, id := range []string{"..", "%2e%2e", "%2E%2E", ".", "%2e"} {
		resp, body := e.get("/v1/sources/caba/infractions/" + id + "/voucher")
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("voucher %q: status %d, want 400: %s", id, resp.StatusCode, body)
			continue
		}
		var pd problemDoc
		_ = json.Unmarshal(body, &pd)
		checkType(t, pd, "invalid-query")
		if names := paramNames(pd); len(names) != 1 || names[0] != "infraction_id" {
			t.Errorf("voucher %q: invalid_params %v, want infraction_id", id, names)
		}
	}
	// An id with a slash or dots inside is one segment, escaped.
	resp, _ := e.get("/v1/sources/caba/infractions/a%2F..%2Fb/voucher")
	if resp.StatusCode != http.StatusOK {
		t.Errorf("voucher a/../b: status %d, want 200", resp.StatusCode)
	}
	if reqs := p.requests(); len(reqs) != 1 || reqs[0] != "/actas/a%2F..%2Fb/boleta" {
		t.Errorf("portal received %v, want only /actas/a%%2F..%%2Fb/boleta", reqs)
	}
}
