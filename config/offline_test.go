package config

import (
	"strings"
	"testing"
)

// offlineDoc references secrets that a CI runner does not have, in every
// place a secret goes: the admin token, the webhook signing secret (whose
// form is checked), a header, OAuth2 credentials, a path and a query.
const offlineDoc = `
server: {admin_token: "${ADMIN_TOKEN}"}
webhooks: {signing_secret: "${WEBHOOK_SECRET}"}
sources:
  - id: caba
    jurisdiction: CABA
    base_url: "${CABA_URL:-https://caba.example}"
    headers: {Authorization: "Bearer ${CABA_TOKEN}", X-Empty: "${EMPTY:-}", X-Set: "${SET}"}
    operations:
      by_domain: {path: "/k/${PATH_KEY}/actas", query: {dominio: "{domain}", key: "${QUERY_KEY}"}}
    auth: {oauth2: {token_url: "https://caba.example/token", client_id: "${CLIENT_ID}", client_secret: "${CLIENT_SECRET}"}}
    response: {items: /actas, fields: {id: /nro}}
`

// Offline, every ${NAME} without a value is ***, secrets included, and a
// value holding one is not validated; defaults and set values stay.
// Parse refuses the same document.
func TestParseOfflineMasksUnset(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{"SET": "s3t-value"})
	c, err := ParseOffline([]byte(offlineDoc), "ci.yaml", getenv)
	if err != nil {
		t.Fatalf("ParseOffline: %v", err)
	}
	s := c.Sources[0]
	tests := []struct{ name, got, want string }{
		{"admin token", c.Server.AdminToken, Masked},
		{"signing secret", c.Webhooks.SigningSecret, Masked},
		{"default", s.BaseURL, "https://caba.example"},
		{"header inside text", s.Headers["Authorization"], "Bearer " + Masked},
		{"empty default", s.Headers["X-Empty"], ""},
		{"set", s.Headers["X-Set"], "s3t-value"},
		{"path", s.Operations["by_domain"].Path, "/k/" + Masked + "/actas"},
		{"query", s.Operations["by_domain"].Query["key"], Masked},
		{"client id", s.Auth.OAuth2.ClientID, Masked},
		{"client secret", s.Auth.OAuth2.ClientSecret, Masked},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if _, err := Parse([]byte(offlineDoc), "ci.yaml", getenv); err == nil {
		t.Error("Parse accepts unset secrets")
	}
}

// Offline, the files a configuration names are never read: TLS files that
// do not exist are no error, while what does not need them is still
// checked (cert_file without key_file, a ratio out of range).
func TestParseOfflineReadsNoFile(t *testing.T) {
	t.Parallel()
	source := func(tls string) string {
		return `
sources:
  - id: caba
    jurisdiction: CABA
    base_url: https://caba.example
    operations: {by_domain: {path: "/actas?dominio={domain}"}}
    response: {fields: {id: /nro}}
    tls: ` + tls + "\n"
	}
	const store = "store: {redis_url: \"rediss://127.0.0.1:6380\", tls: {ca_file: /nonexistent/redis-ca.pem, cert_file: /nonexistent/redis.pem, key_file: /nonexistent/redis.key}}\n"
	tests := []struct {
		name, doc string
		online    []string // the keys Parse reports
		offline   []string // the keys ParseOffline reports
	}{
		{"source files", source("{ca_file: /nonexistent/ca.pem, cert_file: /nonexistent/c.pem, key_file: /nonexistent/c.key}"),
			[]string{"sources[0].tls.ca_file", "sources[0].tls.cert_file"}, nil},
		{"store files", store + source("{}"), []string{"store.tls.ca_file", "store.tls.cert_file"}, nil},
		{"a pair still goes together", source("{cert_file: /nonexistent/c.pem}"), []string{"sources[0].tls"}, []string{"sources[0].tls"}},
		{"other values still checked", "defaults: {breaker: {failure_ratio: 2}}\n" + source("{ca_file: /nonexistent/ca.pem}"),
			[]string{"defaults.breaker.failure_ratio", "sources[0].tls.ca_file"}, []string{"defaults.breaker.failure_ratio"}},
	}
	keys := func(err error) []string {
		var out []string
		if errs, ok := err.(Errors); ok {
			for _, e := range errs {
				out = append(out, e.Key)
			}
		} else if err != nil {
			out = append(out, err.Error())
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.doc), "t.yaml", nil)
			if got := strings.Join(keys(err), " "); got != strings.Join(tt.online, " ") {
				t.Errorf("Parse reports %q, want %q (%v)", got, strings.Join(tt.online, " "), err)
			}
			_, err = ParseOffline([]byte(tt.doc), "t.yaml", nil)
			if got := strings.Join(keys(err), " "); got != strings.Join(tt.offline, " ") {
				t.Errorf("ParseOffline reports %q, want %q (%v)", got, strings.Join(tt.offline, " "), err)
			}
		})
	}
}
