package portalsim_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"

	"github.com/multas/aggregator/portalsim"
)

// realRequest is a request to a SPEC 12 portal: a GET of path (with the
// header X-Requested-With its page sends, which only ShapeNested needs),
// or a SOAP call when soapOp is set.
type realRequest struct {
	path          string
	soapOp, param string
	noXHR         bool
}

func (rq realRequest) send(t *testing.T, client *http.Client, base string) answer {
	t.Helper()
	var req *http.Request
	if rq.soapOp != "" {
		body := `<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body><` + rq.soapOp +
			` xmlns="http://tempuri.org/">` + rq.param + `</` + rq.soapOp + `></soap:Body></soap:Envelope>`
		req, _ = http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/WebServices/ConsultaMultas.asmx", strings.NewReader(body))
		req.Header.Set("Content-Type", "text/xml; charset=utf-8")
		req.Header.Set("SOAPAction", `"http://tempuri.org/`+rq.soapOp+`"`)
	} else {
		req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, base+rq.path, nil)
		if !rq.noXHR {
			req.Header.Set("X-Requested-With", "XMLHttpRequest")
		}
	}
	got, err := doReq(client, req)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// parseUTF8 parses an HTML page whose bytes are UTF-8.
func parseUTF8(t *testing.T, b []byte) *html.Node {
	t.Helper()
	if !utf8.Valid(b) {
		t.Fatalf("the page is not UTF-8: %q", b)
	}
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// count is how many elements of doc sel selects.
func count(t *testing.T, doc *html.Node, sel string) int {
	t.Helper()
	n, err := css(doc, sel)
	if err != nil {
		t.Fatal(err)
	}
	return len(n)
}

// decodeJSON decodes b, keeping numbers as written.
func decodeJSON(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, b)
	}
	return v
}

// at is the value at ptr in v, failing the test when there is none.
func at(t *testing.T, v any, ptr string) any {
	t.Helper()
	got, ok := pointer(v, ptr)
	if !ok {
		t.Fatalf("nothing at %s in %v", ptr, v)
	}
	return got
}

func lenAt(t *testing.T, v any, ptr string) int {
	t.Helper()
	l, ok := at(t, v, ptr).([]any)
	if !ok {
		t.Fatalf("%s is not a list", ptr)
	}
	return len(l)
}

// contains checks that got's body holds every one of want, as bytes.
func contains(t *testing.T, got answer, want ...string) {
	t.Helper()
	for _, w := range want {
		if !bytes.Contains(got.body, []byte(w)) {
			t.Errorf("the body lacks %q:\n%s", w, got.body)
		}
	}
}

// TestRealShapesServeTheirDoc asks each SPEC 12 portal what its doc
// describes and reads the answer as its doc says it is written: the HTML
// parses, the entity-escaped JSON in an attribute decodes, the
// windows-1252 bytes are windows-1252, the misdeclared page is UTF-8, the
// JSON in SOAP and the HTML in JSON are documents of their own, and the
// no-results, captcha, maintenance and too-many-queries pages are the
// documented ones.
func TestRealShapesServeTheirDoc(t *testing.T) {
	t.Parallel()
	const plate, clean = "?dominio=" + portalsim.DemoPlate, "?dominio=" + portalsim.DemoPlateClean
	tests := []struct {
		shape       portalsim.Shape
		name        string
		fault       portalsim.Mode
		req         realRequest
		status      int
		contentType string
		check       func(t *testing.T, got answer)
	}{
		{portalsim.ShapeDataJSON, "actas in data-json", "", realRequest{path: "/infracciones/consulta" + plate}, 200, "text/html; charset=utf-8",
			func(t *testing.T, got answer) {
				contains(t, got, `name="actas[]" data-json="{&quot;numeroActa&quot;:&quot;RP-2026-0142&quot;,`,
					`14\/03\/2026 AS 09:12`, `Av. V\u00e9lez Sarsfield`, `&quot;montoActa&quot;:&quot;$ 185.000&quot;`, `$ 1.234&quot;`, `$ 1.234,56&quot;`)
				inputs, _ := css(parseUTF8(t, got.body), `input[name="actas[]"]`)
				if len(inputs) != 4 {
					t.Fatalf("%d actas, want 4", len(inputs))
				}
				for _, in := range inputs {
					text, _ := attrOf(in, "data-json")
					v := decodeJSON(t, []byte(text))
					if at(t, v, "/dominio") != portalsim.DemoPlate || at(t, v, "/numeroActa") == "" {
						t.Errorf("data-json %s", text)
					}
				}
				if v := decodeJSON(t, []byte(attrOrEmpty(inputs[0], "data-json"))); at(t, v, "/lugar") != "Av. Vélez Sarsfield 1200, Córdoba" {
					t.Errorf("lugar %v", at(t, v, "/lugar"))
				}
			}},
		{portalsim.ShapeDataJSON, "no actas", "", realRequest{path: "/infracciones/consulta" + clean}, 200, "text/html; charset=utf-8",
			func(t *testing.T, got answer) {
				doc := parseUTF8(t, got.body)
				if count(t, doc, "p.sin-actas") != 1 || count(t, doc, "input") != 0 || count(t, doc, "div.g-recaptcha") != 0 {
					t.Errorf("not the no-results page:\n%s", got.body)
				}
			}},
		{portalsim.ShapeDataJSON, "captcha", portalsim.Captcha, realRequest{path: "/infracciones/consulta" + plate}, 200, "text/html; charset=utf-8",
			func(t *testing.T, got answer) {
				doc := parseUTF8(t, got.body)
				if count(t, doc, "div.g-recaptcha") != 1 || count(t, doc, `input[name="actas[]"]`) != 0 || count(t, doc, "p.sin-actas") != 0 {
					t.Errorf("not the captcha page:\n%s", got.body)
				}
			}},
		{portalsim.ShapeDataJSON, "too many queries", portalsim.Busy, realRequest{path: "/infracciones/consulta" + plate}, 200, "text/html; charset=utf-8",
			func(t *testing.T, got answer) {
				h1, _ := css(parseUTF8(t, got.body), "h1")
				if len(h1) != 1 || textOf(h1[0]) != "Demasiadas consultas" || got.header.Get("Retry-After") != "" {
					t.Errorf("not the too-many-queries page:\n%s", got.body)
				}
			}},

		{portalsim.ShapeNested, "arrays inside arrays", "", realRequest{path: "/api/v1/contribuyentes/obligaciones" + plate}, 200, "application/json; charset=utf-8",
			func(t *testing.T, got answer) {
				v := decodeJSON(t, got.body)
				first := lenAt(t, v, "/data/contribuyentes/0/objetos/0/obligaciones")
				all := jsonPath(v, "$.data.contribuyentes[*].objetos[*].obligaciones[*]")
				if first != 2 || len(all) != 4 || lenAt(t, v, "/data/contribuyentes/0/objetos") != 2 {
					t.Errorf("%d in the first object, %d in all; want 2 of 4:\n%s", first, len(all), got.body)
				}
				o := all[0]
				if at(t, o, "/importe") != json.Number("185000") || at(t, o, "/uf") != json.Number("100") || at(t, o, "/fechaInfraccion") != "2026-03-14T09:12:00" {
					t.Errorf("obligation %v", o)
				}
				if _, ok := pointer(all[3], "/importe"); ok {
					t.Errorf("the warning has an amount: %v", all[3])
				}
			}},
		{portalsim.ShapeNested, "no obligations", "", realRequest{path: "/api/v1/contribuyentes/obligaciones" + clean}, 200, "application/json; charset=utf-8",
			func(t *testing.T, got answer) { contains(t, got, `{"data":{"contribuyentes":[]}}`) }},
		{portalsim.ShapeNested, "without its header", "", realRequest{path: "/api/v1/contribuyentes/obligaciones" + plate, noXHR: true}, 500, "application/json; charset=utf-8",
			func(t *testing.T, got answer) {
				contains(t, got, `{"code":"998","message":"missing header X-Requested-With"}`)
			}},
		{portalsim.ShapeNested, "captcha", portalsim.Captcha, realRequest{path: "/api/v1/contribuyentes/obligaciones" + plate}, 500, "application/json; charset=utf-8",
			func(t *testing.T, got answer) { contains(t, got, `{"code":"999","message":"missing captcha"}`) }},
		{portalsim.ShapeNested, "by DNI", "", realRequest{path: "/api/v1/contribuyentes/obligaciones?cuit=" + portalsim.DemoDNI}, 400, "application/json; charset=utf-8",
			func(t *testing.T, got answer) {}},

		{portalsim.ShapeArrays, "one array per situation", "", realRequest{path: "/consultas/infracciones" + plate}, 200, "application/json; charset=utf-8",
			func(t *testing.T, got answer) {
				v := decodeJSON(t, got.body)
				if lenAt(t, v, "/pendientes") != 1 || lenAt(t, v, "/pagadas") != 1 || lenAt(t, v, "/enTramite") != 2 || lenAt(t, v, "/otras") != 0 {
					t.Errorf("arrays:\n%s", got.body)
				}
				contains(t, got, `"uf":100`, `"uf":2.5`, `"fecha":"14/03/2026 09:12"`)
				for _, no := range []string{"situacion", "importe", "estado", "monto"} {
					if bytes.Contains(got.body, []byte(no)) {
						t.Errorf("an item has %s:\n%s", no, got.body)
					}
				}
			}},
		{portalsim.ShapeArrays, "no actas", "", realRequest{path: "/consultas/infracciones" + clean}, 200, "application/json; charset=utf-8",
			func(t *testing.T, got answer) {
				contains(t, got, `{"pendientes":[],"pagadas":[],"enTramite":[],"otras":[]}`)
			}},

		{portalsim.ShapeDetran, "windows-1252 page", "", realRequest{path: "/multas/consulta.asp?placa=" + portalsim.DemoPlate}, 200, "text/html",
			func(t *testing.T, got answer) {
				contains(t, got, `<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">`,
					"14/03/2026 \xe0s 09:12:00", "Situa\xe7\xe3o", "Munic\xedpio", "V\xe9lez", "R$ 185.000,00", "R$ 1.234,56", ">ISENTO<", ">----<")
				if bytes.Contains(got.body, []byte("\xc3")) {
					t.Errorf("UTF-8 bytes in a windows-1252 page")
				}
				doc, text := parse1252(t, got.body)
				if count(t, doc, "div.infracao") != 4 || count(t, doc, "span.ait") != 4 || !strings.Contains(text, "Situação") {
					t.Errorf("%d infractions:\n%s", count(t, doc, "div.infracao"), text)
				}
			}},
		{portalsim.ShapeDetran, "no fines", "", realRequest{path: "/multas/consulta.asp?placa=" + portalsim.DemoPlateClean}, 200, "text/html",
			func(t *testing.T, got answer) {
				if doc, _ := parse1252(t, got.body); count(t, doc, "p.semMultas") != 1 || count(t, doc, "div.infracao") != 0 {
					t.Errorf("not the no-results page")
				}
			}},
		{portalsim.ShapeDetran, "captcha", portalsim.Captcha, realRequest{path: "/multas/consulta.asp?placa=" + portalsim.DemoPlate}, 200, "text/html",
			func(t *testing.T, got answer) {
				if doc, text := parse1252(t, got.body); count(t, doc, "div.g-recaptcha") != 1 || !strings.Contains(text, "não é um robô") {
					t.Errorf("not the captcha page:\n%s", text)
				}
			}},
		{portalsim.ShapeDetran, "maintenance", portalsim.Maintenance, realRequest{path: "/multas/consulta.asp?placa=" + portalsim.DemoPlate}, 200, "text/html",
			func(t *testing.T, got answer) {
				if doc, _ := parse1252(t, got.body); count(t, doc, "div#manutencao") != 1 {
					t.Errorf("not the maintenance page")
				}
			}},
		{portalsim.ShapeDetran, "too many queries", portalsim.Busy, realRequest{path: "/multas/consulta.asp?placa=" + portalsim.DemoPlate}, 200, "text/html",
			func(t *testing.T, got answer) {
				if doc, _ := parse1252(t, got.body); count(t, doc, "h1") != 1 || !bytes.Contains(got.body, []byte("<h1>Excesso de consultas</h1>")) {
					t.Errorf("not the too-many-queries page")
				}
			}},

		{portalsim.ShapeSOAPJSON, "JSON in SOAP", "", realRequest{soapOp: "ConsultarMultasPorPlaca", param: "<placa>ab-123-cd</placa>"}, 200, "text/xml; charset=utf-8",
			func(t *testing.T, got answer) {
				v := soapResult(t, got)
				if lenAt(t, v, "/multas") != 4 || at(t, v, "/sucesso") != true {
					t.Fatalf("result %v", v)
				}
				m := at(t, v, "/multas/0")
				if at(t, m, "/dataInfracao") != "14/03/2026" || at(t, m, "/horaInfracao") != "09:12" || at(t, m, "/valor") != "R$ 185.000,00" {
					t.Errorf("multa %v", m)
				}
				if w := at(t, v, "/multas/3"); at(t, w, "/valor") != "ISENTO" || at(t, w, "/local") != "----" {
					t.Errorf("warning %v", w)
				}
			}},
		{portalsim.ShapeSOAPJSON, "by document", "", realRequest{soapOp: "ConsultarMultasPorDocumento", param: "<documento>" + portalsim.DemoCUIT + "</documento>"}, 200, "text/xml; charset=utf-8",
			func(t *testing.T, got answer) {
				contains(t, got, "<ConsultarMultasPorDocumentoResult>")
				if v := soapResult(t, got); lenAt(t, v, "/multas") != 5 {
					t.Errorf("result %v", v)
				}
			}},
		{portalsim.ShapeSOAPJSON, "maintenance", portalsim.Maintenance, realRequest{soapOp: "ConsultarMultasPorPlaca", param: "<placa>AB123CD</placa>"}, 200, "text/xml; charset=utf-8",
			func(t *testing.T, got answer) {
				if v := soapResult(t, got); at(t, v, "/manutencao") != true || lenAt(t, v, "/multas") != 0 {
					t.Errorf("result %v", v)
				}
			}},
		{portalsim.ShapeSOAPJSON, "no parameter", "", realRequest{soapOp: "ConsultarMultasPorPlaca"}, 500, "text/xml; charset=utf-8",
			func(t *testing.T, got answer) {
				contains(t, got, "<faultcode>S:Client</faultcode>", "falta el parámetro placa")
			}},

		{portalsim.ShapeColumns, "tables named by their header", "", realRequest{path: "/actas/consulta.php" + plate}, 200, "text/html",
			func(t *testing.T, got answer) {
				contains(t, got, `<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">`, "Infracci\xc3\xb3n", "<th>Fecha-Hola</th>", `<th colspan="2">Boleta</th>`, "<th>Puntos</th>")
				doc := parseUTF8(t, got.body)
				tables, _ := css(doc, "table.actas")
				if len(tables) != 2 || count(t, tables[0], "thead th") != 7 || count(t, tables[1], "thead th") != 7 ||
					count(t, tables[0], "tbody tr") != 2 || count(t, tables[1], "tbody tr") != 2 {
					t.Errorf("tables:\n%s", got.body)
				}
				// Read as the meta says, the page is mojibake.
				r, _ := charset.NewReader(bytes.NewReader(got.body), got.header.Get("Content-Type"))
				var b bytes.Buffer
				b.ReadFrom(r)
				if !strings.Contains(b.String(), "InfracciÃ³n") {
					t.Errorf("decoded as its meta says, the page reads right: the meta is not wrong")
				}
			}},
		{portalsim.ShapeColumns, "no actas", "", realRequest{path: "/actas/consulta.php" + clean}, 200, "text/html",
			func(t *testing.T, got answer) {
				if doc := parseUTF8(t, got.body); count(t, doc, "div.sin-resultados") != 1 || count(t, doc, "table") != 0 {
					t.Errorf("not the no-results page")
				}
			}},
		{portalsim.ShapeColumns, "too many queries", portalsim.Busy, realRequest{path: "/actas/consulta.php" + plate}, 200, "text/html",
			func(t *testing.T, got answer) { contains(t, got, "<h1>Demasiadas consultas</h1>") }},

		{portalsim.ShapeEnvelope, "HTML in JSON", "", realRequest{path: "/consultas/infracciones?placa=" + portalsim.DemoPlate}, 200, "application/json; charset=utf-8",
			func(t *testing.T, got answer) {
				contains(t, got, `[{"status":"ok","total":4},{"data":"<table id=\"tablaDatos\"`, `<\/td>`, `Ubicaci\u00f3n`, `14\/03\/2026 09:12 hrs.`, `$185,000.00`, `S\/D`)
				v := decodeJSON(t, got.body)
				inner, _ := at(t, v, "/1/data").(string)
				if doc := parseUTF8(t, []byte(inner)); count(t, doc, "table#tablaDatos tbody tr.infraccion") != 4 || count(t, doc, "td.uma") != 4 {
					t.Errorf("inner table:\n%s", inner)
				}
			}},
		{portalsim.ShapeEnvelope, "no infractions", "", realRequest{path: "/consultas/infracciones?placa=" + portalsim.DemoPlateClean}, 200, "application/json; charset=utf-8",
			func(t *testing.T, got answer) {
				contains(t, got, `[{"status":"ok","total":0},{"data":"<p class=\"sin-infracciones\">`)
			}},
		{portalsim.ShapeEnvelope, "maintenance", portalsim.Maintenance, realRequest{path: "/consultas/infracciones?placa=" + portalsim.DemoPlate}, 200, "application/json; charset=utf-8",
			func(t *testing.T, got answer) {
				if v := decodeJSON(t, got.body); lenAt(t, v, "") != 1 || at(t, v, "/0/status") != "mantenimiento" {
					t.Errorf("maintenance %s", got.body)
				}
			}},

		{portalsim.ShapeErrorFlag, "the owner's other plates too", "", realRequest{path: "/api/consultas/infracciones?matricula=" + portalsim.DemoPlate}, 200, "application/json; charset=utf-8",
			func(t *testing.T, got answer) {
				v := decodeJSON(t, got.body)
				if at(t, v, "/error") != false || lenAt(t, v, "/infracciones") != 5 || at(t, v, "/infracciones/4/matricula") != "A 123 BCD" {
					t.Errorf("answer %s", got.body)
				}
				contains(t, got, `"matricula":"AB 123 CD"`, `"valorUR":"2,5"`, `"importe":"$ 185.000,00"`)
			}},
		{portalsim.ShapeErrorFlag, "no infractions", "", realRequest{path: "/api/consultas/infracciones?matricula=" + portalsim.DemoPlateClean}, 200, "application/json; charset=utf-8",
			func(t *testing.T, got answer) {
				contains(t, got, `{"error":false,"mensaje":"No se encontraron infracciones","infracciones":[]}`)
			}},
		{portalsim.ShapeErrorFlag, "captcha", portalsim.Captcha, realRequest{path: "/api/consultas/infracciones?matricula=" + portalsim.DemoPlate}, 200, "application/json; charset=utf-8",
			func(t *testing.T, got answer) {
				contains(t, got, `{"error":true,"mensaje":"Debe completar el captcha","infracciones":[]}`)
			}},
	}
	for _, tt := range tests {
		t.Run(string(tt.shape)+"/"+tt.name, func(t *testing.T) {
			t.Parallel()
			portal, base, client := startPortal(t, portalsim.NewJurisdiction(tt.shape, "p", "Portal", portalsim.RealRecords()))
			if err := portal.SetFault(portalsim.Fault{Mode: tt.fault}); err != nil {
				t.Fatal(err)
			}
			got := tt.req.send(t, client, base)
			if got.status != tt.status || got.header.Get("Content-Type") != tt.contentType {
				t.Errorf("%d %q, want %d %q: %.300s", got.status, got.header.Get("Content-Type"), tt.status, tt.contentType, got.body)
			}
			tt.check(t, got)
		})
	}
}

func attrOrEmpty(n *html.Node, name string) string {
	v, _ := attrOf(n, name)
	return v
}

// soapResult is the JSON document in the result element of an ASMX answer.
func soapResult(t *testing.T, got answer) any {
	t.Helper()
	doc, err := parseXML(got.body)
	if err != nil {
		t.Fatalf("not XML: %v\n%s", err, got.body)
	}
	_, vals, err := xpath(doc, doc, map[string]string{"s": "http://schemas.xmlsoap.org/soap/envelope/"}, "/s:Envelope/s:Body/*/*")
	if err != nil || len(vals) != 1 {
		t.Fatalf("no result element (%v) in %s", err, got.body)
	}
	return decodeJSON(t, []byte(vals[0]))
}

// TestOAuth2BodyRefusesBasic: ShapeOAuth2Body's token endpoint takes the
// client's credentials in the form only; the API wants its token.
func TestOAuth2BodyRefusesBasic(t *testing.T) {
	t.Parallel()
	p, base, client := startPortal(t, portalsim.NewJurisdiction(portalsim.ShapeOAuth2Body, "p", "Portal", portalsim.RealRecords()))
	creds := url.Values{"client_id": {portalsim.DemoClientID}, "client_secret": {portalsim.DemoClientSecret}}
	token := func(form url.Values, basic bool) answer {
		form.Set("grant_type", "client_credentials")
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/oauth/token", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if basic {
			req.SetBasicAuth(portalsim.DemoClientID, portalsim.DemoClientSecret)
		}
		got, err := doReq(client, req)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := token(url.Values{}, true); got.status != 401 || !bytes.Contains(got.body, []byte(`"error":"invalid_client"`)) {
		t.Errorf("HTTP Basic: %d %s, want 401 invalid_client", got.status, got.body)
	}
	if got := token(url.Values{"client_id": {portalsim.DemoClientID}, "client_secret": {"otro"}}, false); got.status != 401 {
		t.Errorf("a wrong secret in the form: %d, want 401", got.status)
	}
	got := token(creds, false)
	var tok struct {
		AccessToken string `json:"access_token"`
	}
	if json.Unmarshal(got.body, &tok); got.status != 200 || tok.AccessToken == "" {
		t.Fatalf("credentials in the form: %d %s, want a token", got.status, got.body)
	}
	if got := bearerGet(t, client, base+"/api/v2/infracciones?placa="+portalsim.DemoPlate, ""); got.status != 401 {
		t.Errorf("without a token: %d, want 401", got.status)
	}
	got = bearerGet(t, client, base+"/api/v2/infracciones?placa="+portalsim.DemoPlate, tok.AccessToken)
	v := decodeJSON(t, got.body)
	if got.status != 200 || lenAt(t, v, "/resultados") != 4 || at(t, v, "/resultados/0/importe") != "$185,000.00" || at(t, v, "/resultados/0/fechaHora") != "2026-03-14 09:12:00" {
		t.Errorf("with a token: %d %s", got.status, got.body)
	}
	if c := p.Calls(); c.TokensIssued != 1 || c.Refused < 3 {
		t.Errorf("calls %+v, want 1 token issued and 3 refusals", c)
	}
}

// TestCaptchaAndBusyOfOlderShapes: the shapes of SPEC 6 and 8 have no
// challenge of their own (403 with their error body); HTML ones say "too
// many queries" in a 200 page, the others in a 429. Other calls than
// lookups are served.
func TestCaptchaAndBusyOfOlderShapes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		shape  portalsim.Shape
		mode   portalsim.Mode
		status int
		body   string
	}{
		{portalsim.ShapeActas, portalsim.Captcha, 403, `{"error":"Debe completar el captcha"}`},
		{portalsim.ShapeActas, portalsim.Busy, 429, `{"error":"Demasiadas consultas"}`},
		{portalsim.ShapeHTML, portalsim.Captcha, 403, "<p class=\"error\">Debe completar el captcha</p>"},
		{portalsim.ShapeHTML, portalsim.Busy, 200, "<h1>Demasiadas consultas</h1>"},
		{portalsim.ShapeSession, portalsim.Busy, 200, "<h1>Demasiadas consultas</h1>"},
	}
	for _, tt := range tests {
		t.Run(string(tt.shape)+"/"+string(tt.mode), func(t *testing.T) {
			t.Parallel()
			_, base, client := startPortal(t, testJurisdiction(tt.shape, portalsim.Fault{Mode: tt.mode}))
			var got answer
			var err error
			if tt.shape == portalsim.ShapeActas {
				got, err = get(t.Context(), client, base+byDomainPath(tt.shape))
			} else {
				got, err = doReq(client, lookupRequest(t, tt.shape, base, client)(t.Context()))
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.status != tt.status || !bytes.Contains(got.body, []byte(tt.body)) || got.header.Get("Retry-After") != "" {
				t.Errorf("%d Retry-After %q %s, want %d with %s", got.status, got.header.Get("Retry-After"), got.body, tt.status, tt.body)
			}
		})
	}
	// A voucher is no lookup: served.
	_, base, client := startPortal(t, testJurisdiction(portalsim.ShapeActas, portalsim.Fault{Mode: portalsim.Captcha}))
	if got, err := get(t.Context(), client, base+"/api/v2/actas/T-1/boleta"); err != nil || got.status != 200 {
		t.Errorf("voucher in captcha mode: %d %v", got.status, err)
	}
}
