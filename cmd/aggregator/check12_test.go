package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// SPEC 12: `sources check` exits 0 when everything mapped, 1 when a value
// did not normalise or an errors rule failed the source, 3 when everything
// mapped but a warning stands; it reports what match dropped and which
// rule matched.
func TestSourcesCheckSPEC12(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /rentas", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"data": {"contribuyentes": [{"objetos": [{"obligaciones": [{"id": "A", "monto": "$ 185.000"}, {"id": "B", "monto": "1.234"}]},
			{"obligaciones": [{"id": "C", "monto": "12,50"}]}]}]}}`)
	})
	mux.HandleFunc("GET /uy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Query().Get("m") == "CA123PT" {
			fmt.Fprint(w, `{"error": true, "mensaje": "Debe completar el captcha", "infracciones": []}`)
			return
		}
		fmt.Fprint(w, `{"error": false, "infracciones": [{"id": "U-1", "matricula": "AB 123 CD", "estado": "Pendiente"},
			{"id": "U-2", "matricula": "ZZ 999 ZZ", "estado": "Pendiente"}, {"id": "U-3", "matricula": "AB123CD", "estado": "Archivada"}]}`)
	})
	mux.HandleFunc("GET /br", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<table><tr><td>1</td><td>SÃ£o Paulo</td></tr></table>`)
	})
	portal := httptest.NewServer(mux)
	t.Cleanup(portal.Close)
	cfg := filepath.Join(t.TempDir(), "aggregator.yaml")
	writeFile(t, cfg, fmt.Sprintf(`sources:
  - id: indexed
    jurisdiction: Rentas
    base_url: %[1]s
    operations: {by_domain: {path: "/rentas?d={domain}"}}
    response:
      decimal: ","
      items: /data/contribuyentes/0/objetos/0/obligaciones
      fields: {id: /id, amount: /monto}
  - id: jsonpath
    jurisdiction: Rentas
    base_url: %[1]s
    operations: {by_domain: {path: "/rentas?d={domain}"}}
    response:
      decimal: ","
      items: "$.data.contribuyentes[*].objetos[*].obligaciones[*]"
      fields: {id: /id, amount: /monto}
  - id: ambiguous
    jurisdiction: Rentas
    base_url: %[1]s
    operations: {by_domain: {path: "/rentas?d={domain}"}}
    response:
      items: "$.data.contribuyentes[*].objetos[*].obligaciones[*]"
      fields: {id: /id, amount: /monto}
  - id: uy
    jurisdiction: Montevideo
    base_url: %[1]s
    operations: {by_domain: {path: "/uy?m={domain}"}}
    response:
      items: /infracciones
      match: {select: /matricula, equals: "{domain}"}
      fields: {id: /id, status: /estado}
      status_map: {pendiente: unpaid}
      errors: [{when: {select: /error, equals: true}, outcome: rejected, detail: /mensaje}]
  - id: br
    jurisdiction: São Paulo
    base_url: %[1]s
    operations: {by_domain: {path: "/br?p={domain}"}}
    response:
      format: html
      not_found: p.vazio
      items: tr
      fields: {id: "td:nth-child(1)", place: "td:nth-child(2)"}
`, portal.URL))
	tests := []struct {
		source, domain string
		status         int
		want           []string
	}{
		{"indexed", "AB123CD", 3, []string{`warning: items "/data/contribuyentes/0/objetos/0/obligaciones" takes element 0 of the array at "/data/contribuyentes/0/objetos", which has 2: the other 1 are dropped`,
			"$.data.contribuyentes[0].objetos[*].obligaciones", "WARNING: 2 infraction(s)", "1 with warnings"}},
		{"jsonpath", "AB123CD", 0, []string{"id=A", "amount=185000.00", "id=B", "amount=1234.00", "id=C", "amount=12.50", "OK: 3 infraction(s)"}},
		{"ambiguous", "AB123CD", 1, []string{`! not normalised: amount: "$ 185.000" is not an amount: ambiguous`, `(set response.decimal, or the field's decimal, to "," or ".")`, "FAILED"}},
		{"uy", "AB123CD", 3, []string{"info: answer 1: match kept 2 of 3 item(s), dropping 1 of other subjects", "id=U-1", "id=U-3",
			`! not normalised: status: "Archivada" is not in response.status_map (status unknown)`}},
		{"uy", "CA123PT", 1, []string{"info: answer 1: response.errors[0] matched: outcome rejected", "FAILED: source-rejected (HTTP 200)"}},
		{"br", "AB123CD", 3, []string{`! suspect text: place: "SÃ£o Paulo" holds U+FFFD or mojibake`}},
	}
	for _, tt := range tests {
		t.Run(tt.source+" "+tt.domain, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr syncBuffer
			err := run(context.Background(), []string{"sources", "check", "-config", cfg, "-source", tt.source, "-domain", tt.domain}, noEnv, &stdout, &stderr)
			if got := exitCode(err); got != tt.status {
				t.Errorf("exit status %d, want %d; stderr: %s\n%s", got, tt.status, stderr.String(), stdout.String())
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, stdout.String())
				}
			}
		})
	}
}
