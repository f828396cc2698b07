package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/portalsim"
)

// The demo's portals, in every dialect that works without a session or a
// token (JSON, SOAP, an HTML table in windows-1252), check clean.
func TestSourcesCheckDemoDialects(t *testing.T) {
	t.Parallel()
	var js []portalsim.Jurisdiction
	for _, j := range portalsim.DemoAll() {
		switch j.ID {
		case "caba", "santafe", "neuquen", "tucuman":
			j.Fault = portalsim.Fault{Mode: portalsim.Healthy}
			js = append(js, j)
		}
	}
	sim, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	cfgPath := filepath.Join(t.TempDir(), "demo.yaml")
	writeFile(t, cfgPath, portalsim.AggregatorYAML(js, sim.URLs()))

	tests := []struct {
		name   string
		args   []string
		want   []string
		status int
	}{
		{"every source", []string{"-domain", "ab123cd"},
			[]string{
				"== caba (Ciudad de Buenos Aires): by_domain", "== santafe", "== neuquen", "== tucuman",
				"< 200 OK", "id=Q-10442 date=2026-03-14T09:12:00-03:00 amount=185000.00 currency=ARS units=- status=unpaid",
				"id=NQN-2026-001234", "id=TUC-26-004455", `place="Calle Córdoba 650, San Miguel de Tucumán"`,
				"4 of 4 source(s) answered and mapped",
			}, 0},
		{"SOAP request and HTML in windows-1252", []string{"-source", "neuquen", "-source", "tucuman", "-domain", portalsim.DemoPlate},
			[]string{"> POST ", "<soapenv:Envelope", `<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">`, "Tucumán", "2 of 2 source(s)"}, 0},
		{"comma-separated sources", []string{"-source", "caba,tucuman", "-domain", portalsim.DemoPlate}, []string{"2 of 2 source(s)"}, 0},
		{"by id", []string{"-source", "caba", "-id", portalsim.DemoCUIT}, []string{"== caba (Ciudad de Buenos Aires): by_id", "id=Q-10442", "OK: "}, 0},
		{"voucher", []string{"-source", "caba,tucuman", "-infraction", "Q-10442"},
			[]string{"== caba (Ciudad de Buenos Aires): voucher", "< 200 OK", "voucher: status 200 OK, type application/pdf, ", "bytes read, not shown", "== tucuman", "FAILED: source-rejected (HTTP 404)", "1 of 2 source(s)"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr syncBuffer
			err := run(context.Background(), append([]string{"sources", "check", "-config", cfgPath}, tt.args...), noEnv, &stdout, &stderr)
			if got := exitCode(err); got != tt.status {
				t.Errorf("exit status %d, want %d; stderr: %s", got, tt.status, stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}

// A portal written for the test: an HTML table whose place column the
// configured selector misses, and an amount that does not normalise; a
// JSON API behind a bearer token.
func TestSourcesCheckReports(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /actas", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		amount := "1.234,50"
		if r.URL.Query().Get("dominio") == "AC456DE" {
			amount = "no informado"
		}
		fmt.Fprintf(w, `<html><body><table id="actas"><tbody>
<tr><td>A-1</td><td>05/03/2026</td><td>Exceso de velocidad</td><td>%s</td><td>IMPAGA</td></tr>
</tbody></table></body></html>`, amount)
	})
	mux.HandleFunc("GET /api/multas", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cr3t" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"multas":[{"nro":"J-7","fecha":"2026-01-02T10:00:00","monto":"1500.00","estado":"IMPAGA","lugar":"Ruta 3"}]}`)
	})
	mux.HandleFunc("GET /esc", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "{\"x\":[{\"id\":\"\x1b[2J1\"}], \"y\": \"\x1b[31mred\"}")
	})
	mux.HandleFunc("GET /caido", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	portal := httptest.NewServer(mux)
	t.Cleanup(portal.Close)

	cfgPath := filepath.Join(t.TempDir(), "aggregator.yaml")
	writeFile(t, cfgPath, fmt.Sprintf(`sources:
  - id: html
    jurisdiction: Provincia HTML
    base_url: %[1]s
    time_zone: America/Argentina/Buenos_Aires
    currency: ARS
    operations:
      by_domain: {path: /actas, query: {dominio: "{domain}"}}
    response:
      format: html
      items: "table#actas tbody tr"
      not_found: p.sin-actas
      fields: {id: "td:nth-child(1)", date: "td:nth-child(2)", description: "td:nth-child(3)",
               amount: "td:nth-child(4)", status: "td:nth-child(5)", place: "td:nth-child(9)"}
      status_map: {IMPAGA: unpaid}
  - id: json
    jurisdiction: Provincia JSON
    base_url: %[1]s
    headers: {Authorization: "Bearer s3cr3t"}
    currency: ARS
    operations:
      by_domain: {path: /api/multas, query: {dominio: "{domain}"}}
    response:
      items: /multas
      fields: {id: /nro, date: /fecha, amount: /monto, status: /estado, place: /lugar}
      status_map: {IMPAGA: unpaid}
  - id: esc
    jurisdiction: Provincia Hostil
    base_url: %[1]s
    operations:
      by_domain: {path: /esc, query: {d: "{domain}"}}
    response:
      items: /x
      fields: {id: /id}
  - id: down
    jurisdiction: Provincia Caída
    base_url: %[1]s
    operations:
      by_domain: {path: /caido, query: {d: "{domain}"}}
    response:
      items: /x
      fields: {id: /id}
`, portal.URL))

	tests := []struct {
		name    string
		args    []string
		status  int
		want    []string
		wantErr []string
	}{
		{"masked secret, mapped item", []string{"-source", "json", "-domain", "AB123CD"}, 0,
			[]string{"> GET " + portal.URL + "/api/multas?dominio=AB123CD", "> Authorization: ***",
				`"nro":"J-7"`, "id=J-7 date=2026-01-02T10:00:00-03:00 amount=1500.00 currency=ARS units=- status=unpaid status_raw=IMPAGA",
				`place="Ruta 3"`, "OK: 1 infraction(s)", "1 of 1 source(s)"}, nil},
		{"place never matches", []string{"-source", "html", "-domain", "AB123CD"}, 1,
			[]string{"id=A-1 date=2026-03-05T00:00:00-03:00 amount=1234.50",
				`! not mapped: place: selector "td:nth-child(9)" matched nothing`,
				"field place: its selector matched in no item", "FAILED"}, nil},
		{"amount does not normalise", []string{"-source", "html", "-domain", "AC456DE"}, 1,
			[]string{`! not normalised: amount: "no informado" is not an amount`, "FAILED: source-error (HTTP 200): item 0: field amount", "0 of 1 source(s)"}, nil},
		{"a source down", []string{"-source", "down,json", "-domain", "AB123CD"}, 1,
			[]string{"< 503 Service Unavailable", "FAILED: source-unavailable (HTTP 503)", "1 of 2 source(s)"}, nil},
		{"terminal escapes", []string{"-source", "esc", "-domain", "AB123CD"}, 1, []string{"[31mred", "[2J1"}, nil},
		{"unknown source", []string{"-source", "atlantis", "-domain", "AB123CD"}, 2, nil,
			[]string{`unknown source "atlantis"`}},
		{"no query", []string{"-source", "json"}, 2, nil, []string{"exactly one of -domain, -id and -infraction"}},
		{"two queries", []string{"-domain", "AB123CD", "-id", "20123456786"}, 2, nil, []string{"exactly one of"}},
		{"bad plate", []string{"-domain", "??"}, 2, nil, []string{"-domain: not a plate"}},
		{"no by_id", []string{"-source", "json", "-id", "20123456786"}, 0, []string{"skipped"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr syncBuffer
			err := run(context.Background(), append([]string{"sources", "check", "-config", cfgPath}, tt.args...), noEnv, &stdout, &stderr)
			if got := exitCode(err); got != tt.status {
				t.Errorf("exit status %d, want %d; stdout:\n%s\nstderr: %s", got, tt.status, stdout.String(), stderr.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, stdout.String())
				}
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			if all := stdout.String() + stderr.String(); strings.ContainsAny(all, "\x1b\x07") {
				t.Errorf("control characters from the portal reach the terminal:\n%q", all)
			}
			if all := stdout.String() + stderr.String(); strings.Contains(all, "s3cr3t") {
				t.Errorf("a configured secret is printed:\n%s", all)
			}
		})
	}
}

// Usage errors exit 2 before anything is loaded or called.
func TestSourcesCheckUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"sources"}, "a subcommand is required"},
		{[]string{"sources", "list"}, `unknown subcommand "list"`},
		{[]string{"sources", "check", "-domain", "AB123CD"}, "-config FILE is required"},
		{[]string{"sources", "check", "-config", "x.yaml", "-domain", "AB123CD", "extra"}, "unexpected arguments: extra"},
		{[]string{"sources", "check", "-nope"}, "flag provided but not defined"},
	}
	for _, tt := range tests {
		var stdout, stderr syncBuffer
		err := run(context.Background(), tt.args, noEnv, &stdout, &stderr)
		if got := exitCode(err); got != 2 {
			t.Errorf("%v: exit status %d, want 2", tt.args, got)
		}
		if !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%v: stderr lacks %q:\n%s", tt.args, tt.want, stderr.String())
		}
	}
}

// The token request and answer of OAuth2, the session page, cookies and
// session values sent are never printed, whatever the portal's dialect.
func TestSourcesCheckMasksAuth(t *testing.T) {
	t.Parallel()
	sc := config.Source{
		ID: "x", BaseURL: "https://portal.example", Headers: map[string]string{"X-Api-Key": "k3y-k3y"},
		Operations: map[aggregator.Operation]config.Operation{
			aggregator.ByDomain: {Method: "POST", Path: "/consulta", Query: map[string]string{"t": "{session.token}"},
				Body: config.Body{Form: map[string]string{"csrf": "{session.token}", "dominio": "{domain}"}}},
		},
		Auth: config.Auth{
			OAuth2:  &config.OAuth2{TokenURL: "https://portal.example/oauth/token", ClientSecret: "cl13nt-s3cr3t"},
			Session: &config.Session{Path: "/consulta"},
		},
	}
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	exs := []exchange{
		{auth: true, method: "GET", url: "https://portal.example/consulta", status: 200, statusText: "200 OK",
			header: http.Header{"Set-Cookie": {"ASP.NET_SessionId=c00k13"}}, body: []byte(`<input name="t" value="s3ss10n">`)},
		{auth: true, method: "POST", url: "https://portal.example/oauth/token", reqHeader: form,
			reqBody: []byte("grant_type=client_credentials&client_secret=cl13nt-s3cr3t"),
			status:  200, statusText: "200 OK", body: []byte(`{"access_token":"t0k3n"}`)},
		{method: "POST", url: "https://portal.example/consulta?t=s3ss10n", reqHeader: http.Header{
			"Content-Type": {"application/x-www-form-urlencoded"}, "Cookie": {"ASP.NET_SessionId=c00k13"},
			"Authorization": {"Bearer t0k3n"}, "X-Api-Key": {"k3y-k3y"}},
			reqBody: []byte("csrf=s3ss10n&dominio=AB123CD"), status: 200, statusText: "200 OK", body: []byte("<p>ok</p>")},
	}
	var out strings.Builder
	printExchanges(&out, newMasker(sc), exs, true)
	for _, secret := range []string{"c00k13", "s3ss10n", "cl13nt-s3cr3t", "t0k3n", "k3y-k3y"} {
		if strings.Contains(out.String(), secret) {
			t.Errorf("%q is printed:\n%s", secret, out.String())
		}
	}
	for _, want := range []string{"> POST https://portal.example/consulta?t=***", "> csrf=***&dominio=AB123CD",
		"> X-Api-Key: ***", "> Cookie: ***", "< Set-Cookie: ***", "grant_type=***", "< <p>ok</p>"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
