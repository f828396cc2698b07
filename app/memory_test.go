package app_test

import (
	"regexp"
	"testing"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
)

// TestFingerprint: a source's fingerprint changes with what shapes its
// answers (requests, mapping, time zone, currency), never with what
// bounds or guards its calls, nor with the values of its headers (secrets,
// such as a token that rotates).
func TestFingerprint(t *testing.T) {
	t.Parallel()
	const base = `
sources:
  - id: caba
    jurisdiction: CABA
    base_url: http://127.0.0.1:9101
    headers: {Authorization: "Bearer ${TOKEN}"}
    operations: {by_domain: {path: "/actas?dominio={domain}"}}
    response: {items: /actas, fields: {id: /nro, amount: /monto}, status_map: {IMPAGA: unpaid}}
`
	fingerprint := func(t *testing.T, extra string, env map[string]string) string {
		t.Helper()
		cfg, err := config.Parse([]byte(base+extra), "test.yaml", func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return app.Fingerprint(cfg.Sources[0])
	}
	token := map[string]string{"TOKEN": "t1"}
	want := fingerprint(t, "", token)
	if !regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(want) {
		t.Fatalf("fingerprint %q: want 16 hex digits", want)
	}
	tests := []struct {
		name    string
		extra   string
		env     map[string]string
		changes bool
	}{
		{"the same", "", token, false},
		{"another token", "", map[string]string{"TOKEN": "t2"}, false},
		{"a timeout", "    timeout: 5s\n", token, false},
		{"breaker settings", "    breaker: {open_for: 1m}\n", token, false},
		{"a rate limit", "    rate_limit: {rps: 3}\n", token, false},
		{"retries", "    retry: {max_retries: 0}\n", token, false},
		{"remember", "    remember: {fresh: 1m}\nmemory: {key: \"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\"}\n", token, false},
		{"a response size bound", "    max_response_bytes: 1024\n", token, false},
		{"a time zone", "    time_zone: America/Argentina/Cordoba\n", token, true},
		{"a currency", "    currency: USD\n", token, true},
		{"a breaker key", "    breaker_key: shared\n", token, false},
	}
	for _, tt := range tests {
		if got := fingerprint(t, tt.extra, tt.env); (got != want) != tt.changes {
			t.Errorf("%s: fingerprint %s (base %s), want changed %v", tt.name, got, want, tt.changes)
		}
	}
	// The mapping and the requests, key by key.
	for _, c := range []struct{ name, from, to string }{
		{"items", "items: /actas", "items: /resultado/actas"},
		{"a field", "amount: /monto", "amount: /importe"},
		{"the status map", "IMPAGA: unpaid", "IMPAGA: in_process"},
		{"the path", "dominio={domain}", "patente={domain}"},
		{"the portal", "9101", "9102"},
		{"a header's name", "Authorization:", "X-Token:"},
	} {
		changed := regexp.MustCompile(regexp.QuoteMeta(c.from)).ReplaceAllLiteralString(base, c.to)
		cfg, err := config.Parse([]byte(changed), "test.yaml", func(k string) string { return token[k] })
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if app.Fingerprint(cfg.Sources[0]) == want {
			t.Errorf("%s changed, the fingerprint did not", c.name)
		}
	}
}
