package config

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// A ${NAME} without value or default inside a secret is an error naming
// the key and the variable (never a value); elsewhere, and with a default
// (even an empty one), it is not.
func TestUnsetVariableInSecret(t *testing.T) {
	t.Parallel()
	const source = `
sources:
  - id: caba
    jurisdiction: CABA
    base_url: http://127.0.0.1:9101
    headers: %s
    operations: {by_domain: {path: "/actas?dominio={domain}"}}
    response: {fields: {id: /nro}}
`
	set := env(map[string]string{"SET": "s3cr3t-value", "WH": testSecret})
	tests := []struct {
		name    string
		server  string // the server block
		webhook string // the webhooks block
		headers string // the source's headers
		wantKey string // "" for no error
		wantVar string
	}{
		{"admin token unset", `{admin_token: "${ADMIN}"}`, "{}", "{}", "server.admin_token", "${ADMIN}"},
		{"signing secret unset", "{}", `{signing_secret: "${WH_UNSET}"}`, "{}", "webhooks.signing_secret", "${WH_UNSET}"},
		{"header unset inside text", "{}", "{}", `{Authorization: "Bearer ${CABA_TOKEN}"}`,
			"sources[0].headers.Authorization", "${CABA_TOKEN}"},
		{"header with a quoted key", "{}", "{}", `{"X-Portal Token": "${PT}"}`,
			`sources[0].headers["X-Portal Token"]`, "${PT}"},
		{"one of two unset", "{}", "{}", `{X-Key: "${SET}:${MISSING}"}`, "sources[0].headers.X-Key", "${MISSING}"},
		{"set", `{admin_token: "${SET}"}`, `{signing_secret: "${WH}"}`, `{Authorization: "Bearer ${SET}"}`, "", ""},
		{"empty default is explicit", `{admin_token: "${ADMIN:-}"}`, `{signing_secret: "${WH_UNSET:-}"}`,
			`{Authorization: "${T:-}"}`, "", ""},
		{"default", `{admin_token: "${ADMIN:-fallback}"}`, "{}", "{}", "", ""},
		{"literal dollar", `{admin_token: "pa$$${SET}"}`, "{}", "{}", "", ""},
		{"not a secret", `{listen: "${LISTEN:-127.0.0.1:8080}", admin_token: "x${NOPE:-}"}`, "{}", "{}", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			data := "server: " + tt.server + "\nwebhooks: " + tt.webhook + "\n" + strings.Replace(source, "%s", tt.headers, 1)
			if tt.wantKey == "" {
				mustParse(t, data, set)
				return
			}
			errs := parseErrors(t, data, set)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(errs), errs)
			}
			e := errs[0]
			if e.Key != tt.wantKey || !strings.Contains(e.Msg, tt.wantVar) || e.Line == 0 {
				t.Errorf("got %q (line %d), want an error on %s naming %s", e.Error(), e.Line, tt.wantKey, tt.wantVar)
			}
			if strings.Contains(e.Error(), "s3cr3t") {
				t.Errorf("the error shows a value: %v", e)
			}
		})
	}
}

// An unset variable in a plain value is still the empty string, as before.
func TestUnsetVariableOutsideSecrets(t *testing.T) {
	t.Parallel()
	c := mustParse(t, "problems: {base_uri: \"https://x.example/p${SUFFIX}/\"}\n"+minimal, nil)
	if c.Problems.BaseURI != "https://x.example/p/" {
		t.Errorf("base_uri = %q", c.Problems.BaseURI)
	}
}

func TestSecretKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		want bool
	}{
		{"server.admin_token", true},
		{"webhooks.signing_secret", true},
		{"sources[0].headers.Authorization", true},
		{`sources[12].headers["X-Portal Token"]`, true},
		// auth (SPEC 10): every scalar under it, whatever its shape.
		{"sources[3].auth.client_secret", true},
		{"sources[3].auth.oauth2.client_id", true},
		{"sources[3].auth.session.form.password", true},
		{"sources[3].auth.scopes[0]", true},
		{"sources[3].auth", true},
		{"memory.key", true},
		{"memory.previous_keys[0]", true},
		{"memory.previous_keys[12]", true},
		{"memory.previous_keys[]", false},
		{"memory.previous_keys[x]", false},
		{"memory.max_entries", false},
		{"server.listen", false},
		{"server.api_keys[0].name", false},
		{"webhooks.timeout", false},
		{"sources[0].base_url", false},
		{"sources[0].headersx", false},
		{"sources[0].author", false},
		{"sources[x].headers.A", false},
		{"sources[].headers.A", false},
		{"defaults.timeout", false},
		{"sources", false},
	}
	for _, tt := range tests {
		if got := secretKey(tt.path); got != tt.want {
			t.Errorf("secretKey(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestExpandUnset(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{"A": "alpha", "EMPTY": ""})
	tests := []struct {
		in   string
		want []string
	}{
		{"plain", nil},
		{"${A}", nil},
		{"${B}", []string{"B"}},
		{"${EMPTY}", []string{"EMPTY"}},
		{"${B:-}", nil},
		{"${B:-x}", nil},
		{"${B}${C}${B}", []string{"B", "C"}},
		{"$${B}", nil},
		{strings.Repeat("${V1}${V2}${V3}${V4}${V5}${V6}${V7}${V8}${V9}", 1000),
			[]string{"V1", "V2", "V3", "V4", "V5", "V6", "V7", "V8"}},
	}
	for _, tt := range tests {
		_, _, unset, err := expand(tt.in, getenv)
		if err != nil {
			t.Errorf("expand(%.40q): %v", tt.in, err)
			continue
		}
		if strings.Join(unset, ",") != strings.Join(tt.want, ",") {
			t.Errorf("expand(%.40q) unset %v, want %v", tt.in, unset, tt.want)
		}
	}
}

func TestShutdownSettings(t *testing.T) {
	t.Parallel()
	c := mustParse(t, minimal, nil)
	if c.Server.ShutdownDelay != Duration(5*time.Second) || c.Server.ShutdownTimeout != Duration(15*time.Second) {
		t.Errorf("defaults: shutdown_delay %v, shutdown_timeout %v; want 5s, 15s", c.Server.ShutdownDelay, c.Server.ShutdownTimeout)
	}
	c = mustParse(t, "server: {shutdown_delay: 0s, shutdown_timeout: 1m}\n"+minimal, nil)
	if c.Server.ShutdownDelay != 0 || c.Server.ShutdownTimeout != Duration(time.Minute) {
		t.Errorf("set: shutdown_delay %v, shutdown_timeout %v; want 0s, 1m0s", c.Server.ShutdownDelay, c.Server.ShutdownTimeout)
	}
	errs := parseErrors(t, "server: {shutdown_delay: -1s, shutdown_timeout: -2s}\n"+minimal, nil)
	for _, key := range []string{"server.shutdown_delay", "server.shutdown_timeout"} {
		if !strings.Contains(errs.Error(), key+": must not be negative") {
			t.Errorf("no error for a negative %s in:\n%v", key, errs)
		}
	}
	errs = parseErrors(t, "server: {shutdown_delay: soon}\n"+minimal, nil)
	if len(errs) != 1 || errs[0].Key != "server.shutdown_delay" {
		t.Errorf("got %v, want one error on server.shutdown_delay", errs)
	}
}

// Source.FromEnv holds every value ${NAME} put in a source's
// configuration, wherever it is (query parameters, bodies, paths, auth,
// defaults), each variable's value and the whole value it is part of; a
// default written in the file after :- only as part of the whole.
func TestFromEnv(t *testing.T) {
	t.Parallel()
	const data = `
defaults: {currency: "${CUR}"}
sources:
  - id: a
    jurisdiction: A
    base_url: http://127.0.0.1:9101
    headers: {X-Key: "k=${KEY}"}
    operations:
      by_domain:
        method: POST
        path: "/actas/${SEG}?d={domain}"
        query: {api_key: "${QKEY}", plain: x}
        body: {json: {user: "${USER:-anon}", n: 1}}
    auth: {oauth2: {token_url: "http://127.0.0.1:9101/t", client_id: "${ID}", client_secret: "${SECRET}"}}
    response: {fields: {id: /nro}}
  - id: b
    jurisdiction: B
    base_url: http://127.0.0.1:9102
    operations: {by_domain: {path: "/actas?d={domain}"}}
    response: {fields: {id: /nro}}
`
	c := mustParse(t, data, env(map[string]string{
		"CUR": "ARS", "KEY": "k3y-Zq8vT2", "SEG": "seg-Xy7Rw4", "QKEY": "qk-Lm3Np9", "ID": "id-Pq3Hs5", "SECRET": "s3cr3t-Jk8Fd2"}))
	tests := []struct {
		source    int
		want, not []string
	}{
		{0, []string{"ARS", "k3y-Zq8vT2", "k=k3y-Zq8vT2", "seg-Xy7Rw4", "/actas/seg-Xy7Rw4?d={domain}", "qk-Lm3Np9", "anon", "id-Pq3Hs5", "s3cr3t-Jk8Fd2"},
			[]string{"x", "", "http://127.0.0.1:9101"}},
		{1, []string{"ARS"}, []string{"k3y-Zq8vT2", "qk-Lm3Np9"}},
	}
	for _, tt := range tests {
		got := c.Sources[tt.source].FromEnv
		for _, w := range tt.want {
			if !slices.Contains(got, w) {
				t.Errorf("sources[%d].FromEnv = %q, want %q among them", tt.source, got, w)
			}
		}
		for _, w := range tt.not {
			if slices.Contains(got, w) {
				t.Errorf("sources[%d].FromEnv = %q, want no %q", tt.source, got, w)
			}
		}
	}
	// The list itself is never marshalled.
	b, err := json.Marshal(Source{FromEnv: []string{"only-here"}})
	if err != nil {
		t.Fatal(err)
	}
	y, err := yaml.Marshal(Source{FromEnv: []string{"only-here"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b)+string(y), "only-here") {
		t.Errorf("a source marshals FromEnv: %s\n%s", b, y)
	}
}
