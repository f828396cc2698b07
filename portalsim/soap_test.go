package portalsim_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/multas/aggregator/portalsim"
)

const soapEnv = "http://schemas.xmlsoap.org/soap/envelope/"

var soapNS = map[string]string{"s": soapEnv, "m": "urn:multas"}

// soapCall posts body to the SOAP endpoint with a SOAPAction header
// (none when action is "-") and a Content-Type.
func soapCall(ctx context.Context, client *http.Client, base, contentType, action, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/ws/MultasService", strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Content-Type", contentType)
	if action != "-" {
		req.Header.Set("SOAPAction", action)
	}
	return doReq(client, req)
}

func envelope(op, params string) string {
	return `<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="` + soapEnv + `" xmlns:m="urn:multas">` +
		`<soapenv:Header/><soapenv:Body><m:` + op + `>` + params + `</m:` + op + `></soapenv:Body></soapenv:Envelope>`
}

func TestSOAPAnswers(t *testing.T) {
	t.Parallel()
	const (
		xmlType = "text/xml; charset=utf-8"
		one     = `<?xml version="1.0" encoding="UTF-8"?>` + "\n" +
			`<S:Envelope xmlns:S="http://schemas.xmlsoap.org/soap/envelope/"><S:Body><ns2:ConsultarPorDominioResponse xmlns:ns2="urn:multas"><ns2:resultado>` +
			`<ns2:cantidad>1</ns2:cantidad><ns2:actas><ns2:acta><ns2:numero>T-1</ns2:numero><ns2:fecha>2026-03-14T09:12:00</ns2:fecha>` +
			`<ns2:descripcion>Exceso de velocidad</ns2:descripcion><ns2:lugar>Av. Lugones km 4</ns2:lugar>` +
			`<ns2:importe moneda="ARS">185000.50</ns2:importe><ns2:estado>IMPAGO</ns2:estado></ns2:acta></ns2:actas>` +
			`</ns2:resultado></ns2:ConsultarPorDominioResponse></S:Body></S:Envelope>`
	)
	byDomain := func(plate string) string { return envelope("ConsultarPorDominio", "<m:dominio>"+plate+"</m:dominio>") }
	tests := []struct {
		name, contentType, action, body string
		status                          int
		exact                           string // the whole body, when set
		count                           int    // acta elements, when no fault
		fault                           string // the faultcode, for a Fault
	}{
		{"by domain", xmlType, `"urn:multas#ConsultarPorDominio"`, byDomain(portalsim.DemoPlate), 200, one, 1, ""},
		{"by domain, action unquoted, plate with separators", "text/xml", "urn:multas#ConsultarPorDominio", byDomain("ab-123-cd"), 200, "", 1, ""},
		{"empty SOAPAction", xmlType, `""`, byDomain(portalsim.DemoPlate), 200, "", 1, ""},
		{"no records", xmlType, `""`, byDomain(portalsim.DemoPlateClean), 200, "", 0, ""},
		{"by CUIT", xmlType, `"urn:multas#ConsultarPorDocumento"`,
			envelope("ConsultarPorDocumento", "<m:numero>20123456786</m:numero><m:tipo>cuit</m:tipo>"), 200, "", 1, ""},
		{"by DNI, unqualified parameters", xmlType, `""`,
			envelope("ConsultarPorDocumento", "<numero>12345678</numero><tipo>DNI</tipo>"), 200, "", 1, ""},
		{"by DNI without tipo", xmlType, `""`, envelope("ConsultarPorDocumento", "<m:numero>12345678</m:numero>"), 200, "", 1, ""},
		{"tipo does not match", xmlType, `""`,
			envelope("ConsultarPorDocumento", "<m:numero>12345678</m:numero><m:tipo>cuit</m:tipo>"), 500, "", 0, "S:Client"},
		{"bad plate", xmlType, `""`, byDomain("--"), 500, "", 0, "S:Client"},
		{"missing parameter", xmlType, `""`, envelope("ConsultarPorDominio", ""), 500, "", 0, "S:Client"},
		{"unknown operation", xmlType, `""`, envelope("Borrar", "<m:dominio>AB123CD</m:dominio>"), 500, "", 0, "S:Client"},
		{"SOAPAction of another operation", xmlType, `"urn:multas#ConsultarPorDocumento"`, byDomain(portalsim.DemoPlate), 500, "", 0, "S:Client"},
		{"no SOAPAction", xmlType, "-", byDomain(portalsim.DemoPlate), 500, "", 0, "S:Client"},
		{"not XML", xmlType, `""`, "dominio=AB123CD", 500, "", 0, "S:Client"},
		{"cut short", xmlType, `""`, byDomain(portalsim.DemoPlate)[:120], 500, "", 0, "S:Client"},
		{"not an envelope", xmlType, `""`, `<m:ConsultarPorDominio xmlns:m="urn:multas"><m:dominio>AB123CD</m:dominio></m:ConsultarPorDominio>`, 500, "", 0, "S:Client"},
		{"SOAP 1.2 content type", "application/soap+xml", `""`, byDomain(portalsim.DemoPlate), 415, "", 0, "S:Client"},
	}
	p, base, client := startPortal(t, testJurisdiction(portalsim.ShapeSOAP, portalsim.Fault{}))
	for _, tt := range tests {
		got, err := soapCall(t.Context(), client, base, tt.contentType, tt.action, tt.body)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got.status != tt.status || got.header.Get("Content-Type") != "text/xml; charset=utf-8" {
			t.Errorf("%s: %d %q, want %d text/xml; charset=utf-8 (%s)", tt.name, got.status, got.header.Get("Content-Type"), tt.status, got.body)
			continue
		}
		if tt.exact != "" && string(got.body) != tt.exact {
			t.Errorf("%s: body\n%s\nwant\n%s", tt.name, got.body, tt.exact)
		}
		doc, err := parseXML(got.body)
		if err != nil {
			t.Errorf("%s: answer is not XML: %v", tt.name, err)
			continue
		}
		_, codes, _ := xpath(doc, doc, soapNS, "/s:Envelope/s:Body/s:Fault/faultcode")
		if tt.fault != "" {
			if len(codes) != 1 || codes[0] != tt.fault {
				t.Errorf("%s: faultcode %q, want %s (%s)", tt.name, codes, tt.fault, got.body)
			}
			continue
		}
		actas, _, _ := xpath(doc, doc, soapNS, "/s:Envelope/s:Body/*/m:resultado/m:actas/m:acta")
		_, cantidad, _ := xpath(doc, doc, soapNS, "/s:Envelope/s:Body/*/m:resultado/m:cantidad")
		if len(codes) != 0 || len(actas) != tt.count || len(cantidad) != 1 || cantidad[0] != itoa(tt.count) {
			t.Errorf("%s: %d actas, cantidad %q, want %d (%s)", tt.name, len(actas), cantidad, tt.count, got.body)
		}
		if strings.Contains(tt.body, "ConsultarPorDocumento") && !strings.Contains(string(got.body), "<ns2:ConsultarPorDocumentoResponse ") {
			t.Errorf("%s: answer is not ConsultarPorDocumentoResponse: %s", tt.name, got.body)
		}
	}
	// A GET is refused with a Fault too; the voucher is a plain download.
	got, err := get(t.Context(), client, base+"/ws/MultasService")
	if err != nil || got.status != http.StatusMethodNotAllowed || got.header.Get("Allow") != "POST" || !strings.Contains(string(got.body), "S:Client") {
		t.Errorf("GET: %d Allow %q %s, %v; want 405 with a Fault", got.status, got.header.Get("Allow"), got.body, err)
	}
	if got, err := get(t.Context(), client, base+"/ws/boletas/T-1"); err != nil || got.status != 200 || got.header.Get("Content-Type") != "application/pdf" {
		t.Errorf("voucher: %d %q, %v; want a PDF", got.status, got.header.Get("Content-Type"), err)
	}
	if got, err := get(t.Context(), client, base+"/ws/boletas/T-9"); err != nil || got.status != 404 {
		t.Errorf("unknown voucher: %d, %v; want 404", got.status, err)
	}
	calls := p.Calls()
	if calls.ByDomain != 5 || calls.ByID != 4 || calls.Voucher != 2 {
		t.Errorf("Calls() = %+v, want 5 by domain, 4 by id, 2 vouchers", calls)
	}
}

func TestSOAPAnswerWithoutCurrencyAndEscaped(t *testing.T) {
	t.Parallel()
	j := portalsim.NewJurisdiction(portalsim.ShapeSOAP, "x", "X", []portalsim.Record{{
		Domain: portalsim.DemoPlate, ID: "A<1>&", Date: "2026-01-02T03:04:05", Description: `"Giro" <indebido> & más`,
		Amount: "10.5", Status: "prescripta",
	}})
	_, base, client := startPortal(t, j)
	got, err := soapCall(t.Context(), client, base, "text/xml", `""`, envelope("ConsultarPorDominio", "<m:dominio>AB123CD</m:dominio>"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := parseXML(got.body)
	if err != nil {
		t.Fatalf("not XML: %v\n%s", err, got.body)
	}
	acta, _, _ := xpath(doc, doc, soapNS, "/s:Envelope/s:Body/*/m:resultado/m:actas/m:acta")
	if len(acta) != 1 {
		t.Fatalf("%d actas: %s", len(acta), got.body)
	}
	for sel, want := range map[string]string{"m:numero": "A<1>&", "m:descripcion": `"Giro" <indebido> & más`, "m:importe": "10.5", "m:estado": "prescripta", "m:fecha": "2026-01-02T03:04:05"} {
		if _, v, _ := xpath(doc, acta[0], soapNS, sel); len(v) != 1 || v[0] != want {
			t.Errorf("%s = %q, want %q", sel, v, want)
		}
	}
	if _, v, _ := xpath(doc, acta[0], soapNS, "m:importe/@moneda"); len(v) != 0 {
		t.Errorf("moneda = %q, want no attribute", v)
	}
}

// FuzzSOAPRequest sends anything to the SOAP endpoint: the portal answers
// a Fault or an answer, never panics.
func FuzzSOAPRequest(f *testing.F) {
	f.Add(envelope("ConsultarPorDominio", "<m:dominio>AB123CD</m:dominio>"), `""`)
	f.Add(envelope("ConsultarPorDocumento", "<m:numero>20123456786</m:numero><m:tipo>cuit</m:tipo>"), "urn:multas#ConsultarPorDocumento")
	f.Add(`<?xml version="1.0" encoding="ISO-8859-1"?><a/>`, "")
	f.Add(`<!DOCTYPE x [<!ENTITY a "aaaa">]><x>&a;</x>`, "x")
	p := portalsim.New(testJurisdiction(portalsim.ShapeSOAP, portalsim.Fault{}))
	defer p.Close()
	f.Fuzz(func(t *testing.T, body, action string) {
		req, _ := http.NewRequest(http.MethodPost, "/ws/MultasService", strings.NewReader(body))
		req.Header.Set("Content-Type", "text/xml")
		req.Header["SOAPAction"] = []string{action}
		w := httptest.NewRecorder()
		p.ServeHTTP(w, req)
		if w.Code != 200 && w.Code != 500 {
			t.Errorf("status %d for %q", w.Code, body)
		}
		if _, err := parseXML(w.Body.Bytes()); err != nil {
			t.Errorf("answer is not XML: %v", err)
		}
	})
}
