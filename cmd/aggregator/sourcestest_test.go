package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/text/encoding/charmap"
)

// browserConfig is the configuration of the browser recordings: an HTML
// table in windows-1252 (tucu), and an HTML page behind a session page
// that takes a form POST (misi). %[1]s is the base URL.
const browserConfig = `sources:
  - id: tucu
    jurisdiction: Provincia de Tucumán
    base_url: %[1]s
    currency: ARS
    operations:
      by_domain: {path: /consulta.asp, query: {patente: "{domain}", tipo: P}}
    response:
      format: html
      decimal: ","
      items: "table#actas tbody tr"
      not_found: p.sin-actas
      fields: {id: "td:nth-child(1)", date: {select: "td:nth-child(2)", layout: ["dd/MM/yyyy HH:mm"]}, description: "td:nth-child(3)",
               place: "td:nth-child(4)", amount: "td:nth-child(5)", status: "td:nth-child(6)"}
      status_map: {IMPAGA: unpaid, PAGADA: paid}
  - id: misi
    jurisdiction: Provincia de Misiones
    base_url: %[1]s
    headers: {X-Api-Key: "${MISI_KEY}"}
    currency: ARS
    operations:
      by_domain:
        method: POST
        path: /consulta.php
        body: {form: {dominio: "{domain}", __token: "{session.token}", accion: buscar}}
    auth: {session: {path: /index.php, format: html, extract: {token: "input[name=__token]@value"}}}
    response:
      format: html
      decimal: ","
      items: "table.multas tbody tr"
      not_found: div.sin-resultados
      fields: {id: "td:nth-child(1)", date: {select: "td:nth-child(2)", layout: ["dd/MM/yyyy"]}, place: "td:nth-child(3)",
               amount: "td:nth-child(4)", status: "td:nth-child(5)"}
      status_map: {PENDIENTE: unpaid}
`

// tucuPage is tucu's answer; the HAR holds it in windows-1252, base64.
const tucuPage = `<html><head><meta http-equiv="Content-Type" content="text/html; charset=windows-1252"><title>Consulta</title></head><body>
<table id="actas"><thead><tr><th>Acta</th><th>Fecha</th><th>Infracción</th><th>Lugar</th><th>Importe</th><th>Estado</th></tr></thead>
<tbody>
<tr><td>TUC-1</td><td>21/02/2026 10:45</td><td>Cruce de semáforo en rojo</td><td>Calle Córdoba 650, San Miguel de Tucumán</td><td>$ 87.300,00</td><td>Impaga</td></tr>
<tr><td>TUC-2</td><td>09/08/2025 19:30</td><td>Estacionar sobre la vereda</td><td>Av. Mate de Luna 1800</td><td>$ 12.345,68</td><td>Pagada</td></tr>
</tbody></table></body></html>`

// misiPage is misi's answer: Chrome writes it as text, transcoded to
// UTF-8 from the windows-1252 its Content-Type declares.
const misiPage = `<html><head><meta charset="windows-1252"></head><body><table class="multas"><tbody>
<tr><td>MIS-77</td><td>03/01/2026</td><td>Av. Uruguay 1200, Oberá</td><td>45.000,00</td><td>Pendiente</td></tr>
</tbody></table></body></html>`

// harJSON is v as JSON, for a HAR written by hand.
func harJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// browserEntry is one entry as Chrome's developer tools save it, with the
// members Chrome adds (_initiator, _priority, _resourceType, …), request
// headers a browser sends (HTTP/2 pseudo-headers, cookies, client hints),
// and timings.
func browserEntry(t *testing.T, method, rawURL string, post map[string]any, status int, headers [][2]string, content map[string]any) map[string]any {
	reqHeaders := []map[string]string{{"name": ":authority", "value": "portal.example"}, {"name": ":method", "value": method},
		{"name": "accept-language", "value": "es-AR,es;q=0.9"}, {"name": "cookie", "value": "PHPSESSID=9f8e7d; _ga=GA1.1.123"},
		{"name": "sec-ch-ua", "value": `"Chromium";v="126"`}, {"name": "user-agent", "value": "Mozilla/5.0 (X11; Linux x86_64) Chrome/126.0"}}
	var respHeaders []map[string]string
	for _, h := range headers {
		respHeaders = append(respHeaders, map[string]string{"name": h[0], "value": h[1]})
	}
	req := map[string]any{"method": method, "url": rawURL, "httpVersion": "http/2.0", "headers": reqHeaders,
		"queryString": []any{}, "cookies": []map[string]any{{"name": "PHPSESSID", "value": "9f8e7d", "httpOnly": true}}, "headersSize": -1, "bodySize": 0}
	if post != nil {
		req["postData"] = post
	}
	return map[string]any{
		"_initiator": map[string]any{"type": "parser", "url": "https://portal.example/", "lineNumber": 12}, "_priority": "VeryHigh", "_resourceType": "document",
		"cache": map[string]any{}, "connection": "443", "pageref": "page_1", "serverIPAddress": "200.0.0.1",
		"startedDateTime": "2026-03-20T14:03:11.118Z", "time": 182.4, "request": req,
		"response": map[string]any{"status": status, "statusText": "", "httpVersion": "http/2.0", "headers": respHeaders, "cookies": []any{},
			"content": content, "redirectURL": "", "headersSize": -1, "bodySize": -1, "_transferSize": 2211, "_error": nil, "_fetchedViaServiceWorker": false},
		"timings": map[string]any{"blocked": 2.1, "dns": -1, "ssl": -1, "connect": -1, "send": 0.2, "wait": 178.9, "receive": 1.2, "_blocked_queueing": 1.4},
	}
}

// browserHAR is a HAR as Chrome saves it: a page, then entries.
func browserHAR(t *testing.T, entries ...map[string]any) string {
	return harJSON(t, map[string]any{"log": map[string]any{
		"version": "1.2", "creator": map[string]any{"name": "WebInspector", "version": "537.36"},
		"pages":   []any{map[string]any{"startedDateTime": "2026-03-20T14:03:10.900Z", "id": "page_1", "title": "Consulta de infracciones", "pageTimings": map[string]any{}}},
		"entries": entries,
	}})
}

// browserRecordings writes, in a directory of its own, the configuration
// (base_url: a portal that fails the test when called) and the HARs of
// tucu and misi as a browser saves them: unrelated entries (analytics, a
// script, an icon), the query's parameters and the form's fields in
// another order than the adapter's, a windows-1252 page in base64, one
// transcoded to UTF-8 as text, session values as the browser saw them.
func browserRecordings(t *testing.T) (dir, cfgPath string) {
	t.Helper()
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the replay called the portal: %s %s", r.Method, r.URL)
		http.Error(w, "offline", http.StatusTeapot)
	}))
	t.Cleanup(portal.Close)
	dir = t.TempDir()
	cfgPath = filepath.Join(dir, "aggregator.yaml")
	writeFile(t, cfgPath, fmt.Sprintf(browserConfig, portal.URL))

	win, err := charmap.Windows1252.NewEncoder().String(tucuPage)
	if err != nil {
		t.Fatal(err)
	}
	html := [][2]string{{"content-type", "text/html; charset=windows-1252"}, {"content-encoding", "gzip"}, {"content-length", "812"}}
	writeFile(t, filepath.Join(dir, "tucu.har"), browserHAR(t,
		browserEntry(t, "GET", "https://infracciones.tucuman.example/estilos.css?v=3", nil, 200, [][2]string{{"content-type", "text/css"}},
			map[string]any{"size": 12, "mimeType": "text/css", "text": "body{margin:0}"}),
		browserEntry(t, "GET", "https://infracciones.tucuman.example/consulta.asp?tipo=P&patente=AB123CD", nil, 200,
			[][2]string{{"content-type", "text/html"}, {"content-encoding", "gzip"}, {"x-powered-by", "ASP.NET"}},
			map[string]any{"size": len(win), "mimeType": "text/html", "encoding": "base64", "text": base64.StdEncoding.EncodeToString([]byte(win))}),
	))
	icon := base64.StdEncoding.EncodeToString([]byte("\x00\x00\x01\x00\x01\x00\x10\x10"))
	form := map[string]any{"mimeType": "application/x-www-form-urlencoded", "text": "accion=buscar&__token=t0k-REAL-9&dominio=AB123CD",
		"params": []map[string]string{{"name": "accion", "value": "buscar"}, {"name": "__token", "value": "t0k-REAL-9"}, {"name": "dominio", "value": "AB123CD"}}}
	writeFile(t, filepath.Join(dir, "misi.har"), browserHAR(t,
		browserEntry(t, "GET", "https://misiones.example/index.php", nil, 200, append(html, [2]string{"set-cookie", "PHPSESSID=9f8e7d; path=/; HttpOnly"}),
			map[string]any{"size": 170, "mimeType": "text/html", "text": `<html><head><meta charset="windows-1252"><title>Consulta de multas – Sesión</title></head>` +
				`<body><form method="post" action="/consulta.php"><input type="hidden" name="__token" value="t0k-REAL-9"><input name="dominio"></form></body></html>`}),
		browserEntry(t, "GET", "https://misiones.example/js/app.js", nil, 200, [][2]string{{"content-type", "application/javascript"}},
			map[string]any{"size": 20, "mimeType": "application/javascript", "text": "console.log('hola')"}),
		browserEntry(t, "POST", "https://www.google-analytics.com/g/collect?v=2&tid=G-ABC123&en=page_view", map[string]any{"mimeType": "text/plain", "text": ""}, 204, nil,
			map[string]any{"size": 0, "mimeType": "text/plain"}),
		browserEntry(t, "GET", "https://misiones.example/favicon.ico", nil, 200, [][2]string{{"content-type", "image/x-icon"}},
			map[string]any{"size": 8, "mimeType": "image/x-icon", "encoding": "base64", "text": icon}),
		browserEntry(t, "POST", "https://misiones.example/consulta.php", form, 200, html,
			map[string]any{"size": len(misiPage), "mimeType": "text/html", "text": misiPage}),
	))
	return dir, cfgPath
}

// sourcesTest runs `aggregator sources test` with args and an empty
// environment (CI).
func runSourcesTest(t *testing.T, args ...string) (status int, stdout, stderr string) {
	t.Helper()
	var out, errOut syncBuffer
	err := run(context.Background(), append([]string{"sources", "test"}, args...), noEnv, &out, &errOut)
	return exitCode(err), out.String(), errOut.String()
}

// A session saved from a browser's developer tools replays: -update (which
// needs -domain or -id: a browser's HAR does not say what it looked up)
// writes golden files whose infractions read the windows-1252 page byte
// for byte and the page the browser transcoded as UTF-8, both right; the
// replay then matches them. Nothing reaches the portal.
func TestSourcesTestBrowserHAR(t *testing.T) {
	t.Parallel()
	dir, cfgPath := browserRecordings(t)

	if status, out, _ := runSourcesTest(t, "-config", cfgPath, "-update", dir); status != 1 ||
		!strings.Contains(out, "tucu.har does not say what it looked up (a browser's HAR does not): give -domain or -id") {
		t.Errorf("-update without a subject: exit status %d, want 1:\n%s", status, out)
	}
	status, out, errOut := runSourcesTest(t, "-config", cfgPath, "-update", "-domain", "ab123cd", dir)
	if status != 0 {
		t.Fatalf("-update: exit status %d:\n%s\n%s", status, out, errOut)
	}
	for _, want := range []string{"== misi (Provincia de Misiones): by_domain AB123CD, 5 entries in misi.har", "written: misi.golden.json, 1 infraction(s)",
		"== tucu (Provincia de Tucumán): by_domain AB123CD, 2 entries in tucu.har", "written: tucu.golden.json, 2 infraction(s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	wantGolden := map[string][]string{
		"tucu": {`"subject": {
    "domain": "AB123CD"
  },
  "operation": "by_domain"`, `"id": "TUC-1"`, `"place": "Calle Córdoba 650, San Miguel de Tucumán"`, `"description": "Cruce de semáforo en rojo"`,
			`"amount": "87300.00"`, `"date": "2026-02-21T10:45:00-03:00"`, `"status": "paid"`, `"amount": "12345.68"`},
		"misi": {`"id": "MIS-77"`, `"place": "Av. Uruguay 1200, Oberá"`, `"amount": "45000.00"`, `"status": "unpaid"`, `"status_raw": "Pendiente"`},
	}
	for source, wants := range wantGolden {
		b, err := os.ReadFile(filepath.Join(dir, source+".golden.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range wants {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s.golden.json lacks %s:\n%s", source, want, b)
			}
		}
	}
	status, out, _ = runSourcesTest(t, "-config", cfgPath, dir)
	if status != 0 || !strings.Contains(out, "OK: 2 infraction(s), as in tucu.golden.json") || !strings.Contains(out, "2 of 2 source(s) replayed as their golden files say") {
		t.Errorf("replay: exit status %d:\n%s", status, out)
	}
	// Without -domain, the golden files being rewritten say the subject.
	status, out, _ = runSourcesTest(t, "-config", cfgPath, "-update", dir)
	if status != 0 || !strings.Contains(out, "unchanged: tucu.golden.json, 2 infraction(s)") {
		t.Errorf("-update with golden files: exit status %d:\n%s", status, out)
	}
}

// A golden file edited by hand makes the replay differ: exit 1, and each
// difference said per infraction id, field by field; so does a subject the
// HAR has no answer for, or a HAR that lacks a request of the lookup.
func TestSourcesTestDiffers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		edit func(t *testing.T, dir string)
		want []string
	}{
		{"golden edited", func(t *testing.T, dir string) {
			editGolden(t, filepath.Join(dir, "tucu.golden.json"), func(infs []map[string]any) []map[string]any {
				infs[0]["amount"] = "87.30"
				delete(infs[0], "place")
				infs[1]["status"] = "unpaid"
				infs[1]["units"] = map[string]any{"value": "10.00", "code": "UF"}
				return append(infs, map[string]any{"id": "TUC-9", "status": "paid"})
			})
		}, []string{
			"DIFFERS from tucu.golden.json: 6 difference(s)",
			`infraction "TUC-1": amount: golden "87.30", replayed "87300.00"`,
			`infraction "TUC-1": place: golden nothing, replayed "Calle Córdoba 650, San Miguel de Tucumán"`,
			`infraction "TUC-2": status: golden "unpaid", replayed "paid"`,
			`infraction "TUC-2": units.code: golden "UF", replayed nothing`,
			`infraction "TUC-2": units.value: golden "10.00", replayed nothing`,
			`infraction "TUC-9": only in the golden file`,
			"1 of 2 source(s) replayed as their golden files say",
		}},
		{"an infraction gone", func(t *testing.T, dir string) {
			editGolden(t, filepath.Join(dir, "tucu.golden.json"), func(infs []map[string]any) []map[string]any { return infs[:1] })
		}, []string{`infraction "TUC-2": only in the replay: {"source":"tucu",`}},
		{"order", func(t *testing.T, dir string) {
			editGolden(t, filepath.Join(dir, "tucu.golden.json"), func(infs []map[string]any) []map[string]any {
				return []map[string]any{infs[1], infs[0]}
			})
		}, []string{"the order differs: golden TUC-2, TUC-1; replayed TUC-1, TUC-2"}},
		{"another subject", func(t *testing.T, dir string) {
			b, _ := os.ReadFile(filepath.Join(dir, "tucu.golden.json"))
			writeFile(t, filepath.Join(dir, "tucu.golden.json"), strings.Replace(string(b), "AB123CD", "AC456DE", 1))
		}, []string{"no recorded answer for GET ", "/consulta.asp?patente=AC456DE&tipo=P (1 entry of this method and path, but the query differs)",
			"FAILED: the adapter made 1 request(s) that tucu.har has no answer for"}},
		{"a request not recorded", func(t *testing.T, dir string) {
			var doc map[string]any
			b, _ := os.ReadFile(filepath.Join(dir, "misi.har"))
			json.Unmarshal(b, &doc)
			log := doc["log"].(map[string]any)
			entries := log["entries"].([]any)
			log["entries"] = entries[:len(entries)-1] // the POST
			writeFile(t, filepath.Join(dir, "misi.har"), harJSON(t, doc))
		}, []string{"no recorded answer for POST ", "/consulta.php (no entry has this method and path)", "  body: __token=***&accion=buscar&dominio=AB123CD",
			"== misi (Provincia de Misiones): by_domain AB123CD, 4 entries in misi.har"}},
		{"a golden file that is not one", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "misi.golden.json"), `{"subject": {"plate": "AB123CD"}}`)
		}, []string{`misi.golden.json: not a golden file ({"subject", "operation", "infractions"}): json: unknown field "plate"`}},
		{"a golden file without its HAR", func(t *testing.T, dir string) {
			os.Rename(filepath.Join(dir, "misi.golden.json"), filepath.Join(dir, "other.golden.json"))
		}, []string{"FAILED: no misi.golden.json: write it with -update", "== other.golden.json\nFAILED: no other.har to replay it", "1 of 2 source(s)"}},
		{"a HAR of no source", func(t *testing.T, dir string) {
			os.Rename(filepath.Join(dir, "misi.har"), filepath.Join(dir, "portal.example.har"))
		}, []string{`FAILED: the configuration has no source "portal.example"`}},
		{"a HAR that is not one", func(t *testing.T, dir string) {
			writeFile(t, filepath.Join(dir, "misi.har"), `{"log": {"entries": [{"request": `)
		}, []string{"FAILED: misi.har: not a HAR: entry 0: the document ends early"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir, cfgPath := browserRecordings(t)
			if status, out, _ := runSourcesTest(t, "-config", cfgPath, "-update", "-domain", "AB123CD", dir); status != 0 {
				t.Fatalf("-update: exit status %d:\n%s", status, out)
			}
			tt.edit(t, dir)
			status, out, _ := runSourcesTest(t, "-config", cfgPath, dir)
			if status != 1 {
				t.Errorf("exit status %d, want 1:\n%s", status, out)
			}
			for _, want := range tt.want {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

// editGolden rewrites the infractions of a golden file.
func editGolden(t *testing.T, path string, edit func([]map[string]any) []map[string]any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var g struct {
		Subject     map[string]string `json:"subject"`
		Operation   string            `json:"operation"`
		Infractions []map[string]any  `json:"infractions"`
	}
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	g.Infractions = edit(g.Infractions)
	writeFile(t, path, harJSON(t, g))
}

// A command line that cannot be run exits 2, before anything is replayed.
func TestSourcesTestUsage(t *testing.T) {
	t.Parallel()
	dir, cfgPath := browserRecordings(t)
	empty := t.TempDir()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"-config", cfgPath}, "the directory of recordings DIR is required"},
		{[]string{"-config", cfgPath, dir, "extra"}, "unexpected arguments: extra"},
		{[]string{dir}, "-config FILE is required"},
		{[]string{"-config", cfgPath, "-domain", "AB123CD", dir}, "-domain and -id go with -update"},
		{[]string{"-config", cfgPath, "-update", "-domain", "AB123CD", "-id", "20123456786", dir}, "give at most one of -domain and -id"},
		{[]string{"-config", cfgPath, "-update", "-domain", "ZZ", dir}, "-domain: not a plate"},
		{[]string{"-config", cfgPath, "-update", "-id", "123", dir}, "-id: not a CUIT"},
		{[]string{"-config", cfgPath, filepath.Join(dir, "nowhere")}, "nowhere is not a directory"},
		{[]string{"-config", cfgPath, filepath.Join(dir, "tucu.har")}, "tucu.har is not a directory"},
		{[]string{"-config", cfgPath, empty}, "no *.har file in " + empty},
		{[]string{"-config", cfgPath, "-source", "atlantis", dir}, `-source: unknown source "atlantis"`},
		{[]string{"-config", cfgPath, "-source", "tucu", empty}, "-source tucu: no tucu.har in " + empty},
		{[]string{"-config", cfgPath, "-nope", dir}, "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		status, out, errOut := runSourcesTest(t, tt.args...)
		if status != 2 {
			t.Errorf("%v: exit status %d, want 2\n%s", tt.args, status, out)
		}
		if !strings.Contains(errOut, tt.want) || !strings.Contains(errOut, "usage: aggregator sources test") {
			t.Errorf("%v: stderr lacks %q and the usage:\n%s", tt.args, tt.want, errOut)
		}
		if out != "" {
			t.Errorf("%v: output on stdout:\n%s", tt.args, out)
		}
	}
}

// In CI there are no secrets nor key files: every unset ${NAME} is ***
// (a header, a query parameter, OAuth2 credentials, a webhook secret whose
// form is otherwise checked), the TLS files named are never read (they do
// not exist), and the HAR recorded with the secrets masked replays.
func TestSourcesTestWithoutSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "aggregator.yaml")
	writeFile(t, cfgPath, `
server: {admin_token: "${ADMIN_TOKEN}"}
webhooks: {signing_secret: "${WEBHOOK_SECRET}"}
sources:
  - id: jujuy
    jurisdiction: Provincia de Jujuy
    base_url: https://portal.jujuy.invalid
    headers: {Authorization: "Bearer ${JUJUY_TOKEN}"}
    tls: {ca_file: /nonexistent/ca.pem, cert_file: /nonexistent/client.pem, key_file: /nonexistent/client.key}
    auth: {oauth2: {token_url: "https://portal.jujuy.invalid/token", client_id: "${JUJUY_ID}", client_secret: "${JUJUY_SECRET}"}}
    operations:
      by_domain: {path: /api/actas, query: {dominio: "{domain}", key: "${JUJUY_KEY}"}}
    response: {items: /actas, fields: {id: /nro, amount: /monto}, decimal: "."}
`)
	writeFile(t, filepath.Join(dir, "jujuy.har"), browserHAR(t,
		browserEntry(t, "POST", "https://portal.jujuy.invalid/token", map[string]any{"mimeType": "application/x-www-form-urlencoded", "text": "grant_type=***"}, 200,
			[][2]string{{"Content-Type", "application/json"}}, map[string]any{"mimeType": "application/json", "text": `{"access_token": "***", "token_type": "Bearer", "expires_in": 3600}`}),
		browserEntry(t, "GET", "https://portal.jujuy.invalid/api/actas?key=***&dominio=AB123CD", nil, 200,
			[][2]string{{"Content-Type", "application/json"}}, map[string]any{"mimeType": "application/json", "text": `{"actas": [{"nro": "JUJ-1", "monto": 1500.5}]}`}),
	))
	if status, out, errOut := runSourcesTest(t, "-config", cfgPath, "-update", "-domain", "AB123CD", dir); status != 0 {
		t.Fatalf("-update: exit status %d:\n%s\n%s", status, out, errOut)
	}
	status, out, errOut := runSourcesTest(t, "-config", cfgPath, dir)
	if status != 0 || !strings.Contains(out, "OK: 1 infraction(s), as in jujuy.golden.json") {
		t.Errorf("exit status %d:\n%s\n%s", status, out, errOut)
	}
	// The same configuration is refused where it runs for real.
	var stdout, stderr syncBuffer
	if err := run(context.Background(), []string{"validate", "-config", cfgPath}, noEnv, &stdout, &stderr); exitCode(err) == 0 {
		t.Errorf("validate accepts it:\n%s", stdout.String())
	}
}
