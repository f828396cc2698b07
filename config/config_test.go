package config

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/mapping"
)

// testSecret is a valid Standard Webhooks secret.
const testSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// env is a getenv over a map.
func env(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// exampleEnv is the environment the SPEC 6 example refers to.
func exampleEnv() func(string) string {
	return env(map[string]string{
		"AGGREGATOR_ADMIN_TOKEN": "admin-secret",
		"WEBHOOK_SECRET":         testSecret,
		"CABA_TOKEN":             "caba-secret",
	})
}

// mustParse parses data and fails the test on any error.
func mustParse(t *testing.T, data string, getenv func(string) string) *Config {
	t.Helper()
	c, err := Parse([]byte(data), "test.yaml", getenv)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

// parseErrors parses data and returns its Errors, failing the test when
// the error is of another type or absent.
func parseErrors(t *testing.T, data string, getenv func(string) string) Errors {
	t.Helper()
	c, err := Parse([]byte(data), "test.yaml", getenv)
	if err == nil {
		t.Fatalf("Parse succeeded, want errors")
	}
	if c != nil {
		t.Errorf("Parse returned a config with its errors")
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Parse error is %T, want Errors: %v", err, err)
	}
	return errs
}

func d(s string) Duration {
	v, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return Duration(v)
}

func TestLoadExample(t *testing.T) {
	t.Parallel()
	c, err := Load(filepath.Join("testdata", "example.yaml"), exampleEnv())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(c.Sources) != 1 {
		t.Fatalf("got %d sources, want 1", len(c.Sources))
	}
	s := c.Sources[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"server.listen", c.Server.Listen, "127.0.0.1:8080"},
		{"server.admin_token", c.Server.AdminToken, "admin-secret"},
		{"server.api_keys", len(c.Server.APIKeys), 0},
		{"problems.base_uri", c.Problems.BaseURI, "https://api.example.com/problems/"},
		{"query.deadline", c.Query.Deadline, d("3s")},
		{"query.max_deadline", c.Query.MaxDeadline, d("10s")},
		{"store.redis_url", c.Store.RedisURL, ""},
		{"store.key_prefix", c.Store.KeyPrefix, "aggregator:"},
		{"async.max_wait", c.Async.MaxWait, d("1h")},
		{"async.release_rps", c.Async.ReleaseRPS, 5.0},
		{"webhooks.signing_secret", c.Webhooks.SigningSecret, testSecret},
		{"webhooks.timeout", c.Webhooks.Timeout, d("10s")},
		{"webhooks.max_attempts", c.Webhooks.MaxAttempts, 5},
		{"webhooks.backoff", c.Webhooks.Backoff, d("1s")},
		{"webhooks.allow_private", c.Webhooks.AllowPrivate, false},
		{"webhooks.breaker", c.Webhooks.Breaker, WebhookBreaker{5, d("10s")}},
		{"id", s.ID, "caba"},
		{"jurisdiction", s.Jurisdiction, "Ciudad de Buenos Aires"},
		{"base_url", s.BaseURL, "http://127.0.0.1:9101"},
		{"breaker_key", s.BreakerKey, "caba"},
		{"headers", s.Headers["Authorization"], "Bearer caba-secret"},
		{"by_domain", s.Operations[aggregator.ByDomain].Path, "/api/v2/actas?dominio={domain}"},
		{"by_domain.method", s.Operations[aggregator.ByDomain].Method, "GET"},
		{"by_id.accepts", len(s.Operations[aggregator.ByID].Accepts), 2},
		{"voucher", s.Operations[aggregator.Voucher].Path, "/api/v2/actas/{infraction_id}/boleta"},
		{"voucher.accepts", s.Operations[aggregator.Voucher].Accepts == nil, true},
		{"items", s.Response.Items, mapping.Items{{Select: "/resultado/actas"}}},
		{"fields", len(s.Response.Fields), 7},
		{"fields.amount", s.Response.Fields["amount"], mapping.Field{Select: mapping.List{"/monto"}}},
		{"status_map", s.Response.StatusMap["EN GESTION"], "in_process"},
		{"timeout", s.Timeout, d("2s")},
		{"time_zone", s.TimeZone, "America/Argentina/Buenos_Aires"},
		{"location", s.Location.String(), "America/Argentina/Buenos_Aires"},
		{"currency", s.Currency, "ARS"},
		{"max_response_bytes", s.MaxResponseBytes, int64(2097152)},
		{"retry", s.Retry, Retry{2, d("100ms"), d("60s")}},
		{"breaker.window", s.Breaker.Window, d("60s")},
		{"breaker.min_calls", s.Breaker.MinCalls, 10},
		{"breaker.failure_ratio", s.Breaker.FailureRatio, 0.5},
		{"breaker.open_for", s.Breaker.OpenFor, d("30s")},
		{"breaker.failure_statuses", s.Breaker.FailureStatuses, []int{500, 502, 503, 504}},
		{"rate_limit", s.RateLimit, RateLimit{0, 0, d("500ms"), d("10m")}},
		{"drift", s.Drift, Drift{Window: d("1h"), UnmappedRatio: 0.2}},
		{"defaults", c.Defaults, builtin().Defaults},
	}
	for _, tc := range checks {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	first := mustParse(t, string(data), exampleEnv())
	out, err := yaml.Marshal(first)
	if err != nil {
		t.Fatalf("Marshal: %v", err)
	}
	// The marshalled form holds no ${...}: it parses without an environment.
	second := mustParse(t, string(out), nil)
	for i := range first.Sources {
		if got, want := second.Sources[i].Location.String(), first.Sources[i].Location.String(); got != want {
			t.Errorf("sources[%d].Location: got %s, want %s", i, got, want)
		}
		first.Sources[i].Location, second.Sources[i].Location = nil, nil
		// Which values came from the environment is not written out.
		if len(first.Sources[i].FromEnv) == 0 {
			t.Errorf("sources[%d].FromEnv is empty; the example takes secrets from the environment", i)
		}
		first.Sources[i].FromEnv = nil
	}
	if !reflect.DeepEqual(first, second) {
		t.Errorf("round trip changed the config:\nfirst:  %+v\nsecond: %+v\nyaml:\n%s", first, second, out)
	}

	// And through JSON, the admin API's encoding.
	j, err := json.Marshal(first.Sources[0].Breaker)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"window":"1m0s","min_calls":10,"failure_ratio":0.5,"consecutive_failures":5,"open_for":"30s","slow_call":"0s","failure_statuses":[500,502,503,504]}`
	if string(j) != want {
		t.Errorf("breaker JSON: got %s, want %s", j, want)
	}
	var back Breaker
	if err := json.Unmarshal(j, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, first.Sources[0].Breaker) {
		t.Errorf("breaker JSON round trip: got %+v, want %+v", back, first.Sources[0].Breaker)
	}
}

// minimal is the smallest valid configuration.
const minimal = `
sources:
  - id: caba
    jurisdiction: CABA
    base_url: http://127.0.0.1:9101
    operations: {by_domain: {path: "/actas?dominio={domain}"}}
    response: {fields: {id: /nro}}
`

func TestBuiltinDefaults(t *testing.T) {
	t.Parallel()
	c := mustParse(t, minimal, nil)
	s := c.Sources[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"server.listen", c.Server.Listen, "127.0.0.1:8080"},
		{"problems.base_uri", c.Problems.BaseURI, "http://127.0.0.1:8080/problems/"},
		{"query", c.Query, Query{d("3s"), d("10s")}},
		{"store", c.Store, Store{KeyPrefix: "aggregator:", Timeout: d("250ms"), FlushInterval: d("20ms")}},
		{"async", c.Async, Async{d("1h"), 5}},
		{"webhooks", c.Webhooks, Webhooks{Timeout: d("10s"), MaxAttempts: 5, Backoff: d("1s"), Breaker: WebhookBreaker{5, d("10s")}}},
		{"defaults.timeout", c.Defaults.Timeout, d("2s")},
		{"defaults.time_zone", c.Defaults.TimeZone, "America/Argentina/Buenos_Aires"},
		{"defaults.currency", c.Defaults.Currency, "ARS"},
		{"defaults.max_response_bytes", c.Defaults.MaxResponseBytes, int64(2097152)},
		{"defaults.voucher_types", c.Defaults.VoucherTypes, []string{"application/pdf", "image/png", "image/jpeg"}},
		{"defaults.voucher_max_bytes", c.Defaults.VoucherMaxBytes, int64(10485760)},
		{"server.max_in_flight", c.Server.MaxInFlight, 1024},
		{"server.read_timeout", c.Server.ReadTimeout, d("5s")},
		{"defaults.retry", c.Defaults.Retry, Retry{2, d("100ms"), d("60s")}},
		{"defaults.breaker", c.Defaults.Breaker, Breaker{d("60s"), 10, 0.5, 5, d("30s"), 0, []int{500, 502, 503, 504}}},
		{"defaults.rate_limit", c.Defaults.RateLimit, RateLimit{0, 0, d("500ms"), d("10m")}},
		{"source breaker_key", s.BreakerKey, "caba"},
		{"source method", s.Operations[aggregator.ByDomain].Method, "GET"},
		{"source items", s.Response.Items, mapping.Items(nil)},
		{"source settings", s.settings(), c.Defaults},
		{"source location", s.Location.String(), "America/Argentina/Buenos_Aires"},
	}
	for _, tc := range checks {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, tc.got, tc.want)
		}
	}
}

func TestMerge(t *testing.T) {
	t.Parallel()
	const data = `
sources:
  - id: a
    jurisdiction: A
    base_url: http://a.example
    operations: {voucher: {path: "/v/{infraction_id}"}}
    breaker: {open_for: 5s, consecutive_failures: 0}
    retry: {max_retries: 0}
    rate_limit: {max_wait: 0s, rps: 2.5}
    currency: USD
    drift: {empty_ratio: 0.9}
  - id: b
    jurisdiction: B
    base_url: http://b.example
    operations: {voucher: {path: "/v/{infraction_id}"}}
    breaker: {failure_statuses: [503]}
    rate_limit: {rps: 10, burst: 3}
    time_zone: UTC
  - id: c
    jurisdiction: C
    base_url: http://c.example
    operations: {voucher: {path: "/v/{infraction_id}"}}
    breaker: {failure_statuses: []}
# defaults after sources: position does not matter
defaults:
  timeout: 4s
  breaker: {consecutive_failures: 3, min_calls: 20}
  retry: {initial_backoff: 0s}
  rate_limit: {max_pause: 1m}
  drift: {window: 10m}
`
	c := mustParse(t, data, nil)
	a, b, cc := c.Sources[0], c.Sources[1], c.Sources[2]
	checks := []struct {
		name      string
		got, want any
	}{
		// defaults over built-in defaults, key by key, explicit zero kept
		{"defaults.timeout", c.Defaults.Timeout, d("4s")},
		{"defaults.breaker.consecutive_failures", c.Defaults.Breaker.ConsecutiveFailures, 3},
		{"defaults.breaker.min_calls", c.Defaults.Breaker.MinCalls, 20},
		{"defaults.breaker.open_for", c.Defaults.Breaker.OpenFor, d("30s")},
		{"defaults.breaker.failure_ratio", c.Defaults.Breaker.FailureRatio, 0.5},
		{"defaults.retry.initial_backoff (explicit 0)", c.Defaults.Retry.InitialBackoff, Duration(0)},
		{"defaults.retry.max_retries", c.Defaults.Retry.MaxRetries, 2},
		{"defaults.rate_limit.max_pause", c.Defaults.RateLimit.MaxPause, d("1m")},
		{"defaults.rate_limit.max_wait", c.Defaults.RateLimit.MaxWait, d("500ms")},
		{"defaults.drift", c.Defaults.Drift, Drift{Window: d("10m"), UnmappedRatio: 0.2}},
		// source a over defaults
		{"a.drift", a.Drift, Drift{Window: d("10m"), UnmappedRatio: 0.2, EmptyRatio: 0.9}},
		{"b.drift", b.Drift, Drift{Window: d("10m"), UnmappedRatio: 0.2}},
		{"a.timeout", a.Timeout, d("4s")},
		{"a.breaker.open_for", a.Breaker.OpenFor, d("5s")},
		{"a.breaker.consecutive_failures (explicit 0 over 3)", a.Breaker.ConsecutiveFailures, 0},
		{"a.breaker.min_calls", a.Breaker.MinCalls, 20},
		{"a.breaker.window", a.Breaker.Window, d("60s")},
		{"a.breaker.failure_statuses", a.Breaker.FailureStatuses, []int{500, 502, 503, 504}},
		{"a.retry.max_retries (explicit 0 over 2)", a.Retry.MaxRetries, 0},
		{"a.retry.initial_backoff", a.Retry.InitialBackoff, Duration(0)},
		{"a.retry.max_backoff", a.Retry.MaxBackoff, d("60s")},
		{"a.rate_limit.max_wait (explicit 0 over 500ms)", a.RateLimit.MaxWait, Duration(0)},
		{"a.rate_limit.max_pause", a.RateLimit.MaxPause, d("1m")},
		{"a.rate_limit.burst (ceil of rps)", a.RateLimit.Burst, 3},
		{"a.currency", a.Currency, "USD"},
		{"a.time_zone", a.TimeZone, "America/Argentina/Buenos_Aires"},
		{"b.breaker.failure_statuses", b.Breaker.FailureStatuses, []int{503}},
		{"b.breaker.consecutive_failures", b.Breaker.ConsecutiveFailures, 3},
		{"b.rate_limit.burst (explicit)", b.RateLimit.Burst, 3},
		{"b.time_zone", b.TimeZone, "UTC"},
		{"b.location", b.Location, time.UTC},
		{"b.currency", b.Currency, "ARS"},
		{"c.breaker.failure_statuses (explicit empty)", cc.Breaker.FailureStatuses, []int{}},
		{"defaults.rate_limit.burst stays as written", c.Defaults.RateLimit.Burst, 0},
		{"burst(1e12, 0)", burst(1e12, 0), math.MaxInt32},
		{"burst(0.2, 0)", burst(0.2, 0), 1},
		{"burst(0, 0)", burst(0, 0), 0},
	}
	for _, tc := range checks {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	// Sources do not share the defaults' slices.
	a.Breaker.FailureStatuses[0] = 599
	if c.Defaults.Breaker.FailureStatuses[0] != 500 {
		t.Errorf("source and defaults share failure_statuses")
	}
}

func TestMergeKeysAndAliases(t *testing.T) {
	t.Parallel()
	const data = `
x-common: &common
  jurisdiction: Shared
  base_url: http://shared.example
  operations: {voucher: {path: "/v/{infraction_id}"}}
  breaker: &br {open_for: 7s}
sources:
  - <<: *common
    id: one
  - <<: *common
    id: two
    jurisdiction: Own
    breaker: *br
`
	// x-common is not a known key: the anchor must live somewhere known.
	errs := parseErrors(t, data, nil)
	if len(errs) != 1 || errs[0].Key != "x-common" || errs[0].Line != 2 {
		t.Fatalf("got %v, want one unknown key x-common on line 2", errs)
	}

	const ok = `
sources:
  - &first
    id: one
    jurisdiction: Shared
    base_url: http://shared.example
    operations: {voucher: {path: "/v/{infraction_id}"}}
    breaker: &br {open_for: 7s}
  - <<: *first
    id: two
    jurisdiction: Own
    breaker: *br
`
	c := mustParse(t, ok, nil)
	if got, want := len(c.Sources), 2; got != want {
		t.Fatalf("got %d sources, want %d", got, want)
	}
	two := c.Sources[1]
	if two.ID != "two" || two.Jurisdiction != "Own" || two.BaseURL != "http://shared.example" || two.Breaker.OpenFor != d("7s") {
		t.Errorf("merged source: got %+v", two)
	}
}

func TestExcessiveAliasing(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("a0: &a0 {open_for: 1s}\n")
	for i := 1; i < 30; i++ {
		b.WriteString("a" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " {<<: [")
		for j := range 10 {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*a" + strconv.Itoa(i-1))
		}
		b.WriteString("]}\n")
	}
	b.WriteString("defaults: {breaker: *a29}\n")
	start := time.Now()
	_, err := Parse([]byte(b.String()), "bomb.yaml", nil)
	if err == nil {
		t.Fatal("Parse succeeded, want errors")
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("Parse took %v", elapsed)
	}
	if !strings.Contains(err.Error(), "too complex") {
		t.Errorf("got %v, want a too complex error", err)
	}
}

func TestEnvInjection(t *testing.T) {
	t.Parallel()
	const data = `
server: {admin_token: "${TOKEN}"}
sources:
  - id: caba
    jurisdiction: ${JUR}
    base_url: http://127.0.0.1:9101
    operations: {by_domain: {path: "/actas?dominio={domain}"}}
    response: {fields: {id: /nro}}
`
	inject := "x\nfoo: bar\nsources: []"
	c := mustParse(t, data, env(map[string]string{"TOKEN": inject, "JUR": "{a: b}, [c]"}))
	if c.Server.AdminToken != inject {
		t.Errorf("admin_token: got %q, want %q", c.Server.AdminToken, inject)
	}
	if got := c.Sources[0].Jurisdiction; got != "{a: b}, [c]" {
		t.Errorf("jurisdiction: got %q", got)
	}
	if len(c.Sources) != 1 {
		t.Errorf("got %d sources, want 1", len(c.Sources))
	}

	// A value with YAML syntax in a typed field is a bad value, not
	// structure, and is not shown.
	errs := parseErrors(t, "query: {deadline: \"${D}\"}\n"+minimal, env(map[string]string{"D": "1s\nmax_deadline: 1h"}))
	if len(errs) != 1 || errs[0].Key != "query.deadline" {
		t.Fatalf("got %v, want one error on query.deadline", errs)
	}
	if strings.Contains(errs.Error(), "max_deadline: 1h") {
		t.Errorf("error shows the environment value: %v", errs)
	}
}

func TestEnvDefaults(t *testing.T) {
	t.Parallel()
	data := "server: {listen: \"${LISTEN:-127.0.0.1:9999}\", admin_token: \"pa$$word${EMPTY:-}\"}\nquery: {deadline: \"${D}\"}\n" + minimal
	c := mustParse(t, data, env(map[string]string{"D": "2s"}))
	if c.Server.Listen != "127.0.0.1:9999" {
		t.Errorf("listen: got %q", c.Server.Listen)
	}
	if c.Server.AdminToken != "pa$word" {
		t.Errorf("admin_token: got %q", c.Server.AdminToken)
	}
	if c.Query.Deadline != d("2s") {
		t.Errorf("deadline: got %v", c.Query.Deadline)
	}
	if c.Problems.BaseURI != "http://127.0.0.1:9999/problems/" {
		t.Errorf("base_uri: got %q", c.Problems.BaseURI)
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	getenv := env(map[string]string{"A": "alpha", "B_2": "beta", "EMPTY": ""})
	tests := []struct {
		in, want string
		fromEnv  bool
		wantErr  bool
	}{
		{"plain", "plain", false, false},
		{"${A}", "alpha", true, false},
		{"x${A}y${B_2}z", "xalphaybetaz", true, false},
		{"${UNSET}", "", true, false},
		{"${UNSET:-dflt}", "dflt", true, false},
		{"${EMPTY:-dflt}", "dflt", true, false},
		{"${A:-dflt}", "alpha", true, false},
		{"${A:-}", "alpha", true, false},
		{"$$", "$", false, false},
		{"$${A}", "${A}", false, false},
		{"cost $5", "cost $5", false, false},
		{"end$", "end$", false, false},
		{"$A", "$A", false, false},
		{"${A", "", false, true},
		{"${}", "", false, true},
		{"${1A}", "", false, true},
		{"${A B}", "", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, fromEnv, _, err := expand(tc.in, getenv)
			if (err != nil) != tc.wantErr {
				t.Fatalf("expand(%q): err %v, want error %v", tc.in, err, tc.wantErr)
			}
			if got != tc.want || fromEnv != tc.fromEnv {
				t.Errorf("expand(%q): got %q, %v, want %q, %v", tc.in, got, fromEnv, tc.want, tc.fromEnv)
			}
		})
	}
}

func TestUnknownKeys(t *testing.T) {
	t.Parallel()
	const data = `server:
  listen: 127.0.0.1:8080
  listn: 1
qurey: {deadline: 3s}
defaults:
  breaker:
    open_fro: 5s
sources:
  - id: caba
    jurisdiction: CABA
    base_url: http://127.0.0.1:9101
    operations:
      by_domain: {path: "/actas?dominio={domain}", verb: GET}
    response: {fields: {id: /nro}}
    extra: true
`
	errs := parseErrors(t, data, nil)
	want := []Error{
		{"test.yaml", 3, "server.listn", `unknown key (did you mean "listen"?)`},
		{"test.yaml", 4, "qurey", `unknown key (did you mean "query"?)`},
		{"test.yaml", 7, "defaults.breaker.open_fro", `unknown key (did you mean "open_for"?)`},
		{"test.yaml", 13, "sources[0].operations.by_domain.verb", "unknown key"},
		{"test.yaml", 15, "sources[0].extra", "unknown key"},
	}
	if !slices.Equal(errs, want) {
		t.Errorf("got\n%v\nwant\n%v", errs, Errors(want))
	}
	if got, want := errs[0].Error(), `test.yaml:3: server.listn: unknown key (did you mean "listen"?)`; got != want {
		t.Errorf("Error(): got %q, want %q", got, want)
	}
}

func TestSyntaxAndShape(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, data string
		wantKey    string
		wantLine   int
		wantMsg    string
	}{
		{"syntax", "server: {listen: [}\n", "", 1, "invalid YAML"},
		{"syntax later", "query: {}\nserver: {listen: [}\n", "", 2, "invalid YAML: did not find expected node content"},
		{"unclosed flow", "query: {}\nserver: {listen: ${X}}\n", "", 2, "invalid YAML: did not find expected ',' or '}'"},
		{"scanner", "query: {}\nserver: {}\nstore: \"abc\n", "", 3, "invalid YAML: found unexpected end of stream"},
		{"scanner first line", "query: {}: x\n", "", 1, "invalid YAML"},
		{"unknown anchor", "query: *nope\n", "", 0, "invalid YAML: unknown anchor"},
		{"tab", "server:\n\tlisten: x\n", "", 2, "invalid YAML"},
		{"two documents", minimal + "---\nserver: {}\n", "", 8, "more than one YAML document"},
		{"not a mapping", "- a\n- b\n", "", 1, "want a mapping"},
		{"duplicate key", "query: {deadline: 1s}\nquery: {deadline: 2s}\n" + minimal, "query", 2, "duplicate key (first written on line 1)"},
		{"sources not a list", "sources: {id: x}\n", "sources", 1, "want a list of sources"},
		{"wrong kind", "server: [a]\n" + minimal, "server", 1, "want a mapping"},
		{"bad duration", "query: {deadline: 3}\n" + minimal, "query.deadline", 1, `want a Go duration such as "3s" or "500ms", got "3"`},
		{"bad int", "webhooks: {max_attempts: 2.5}\n" + minimal, "webhooks.max_attempts", 1, `want an integer, got "2.5"`},
		{"bad float", "async: {release_rps: .inf}\n" + minimal, "async.release_rps", 1, "want a finite number"},
		{"bad bool", "webhooks: {allow_private: yes}\n" + minimal, "webhooks.allow_private", 1, `want true or false, got "yes"`},
		{"list for string", "server: {listen: [a]}\n" + minimal, "server.listen", 1, "want a string, got a list"},
		{"bad env syntax", "server: {admin_token: \"${X\"}\n" + minimal, "server.admin_token", 1, "unterminated ${"},
		{"empty file", "", "sources", 0, "at least one source is required"},
		{"null sources", "sources:\n", "sources", 1, "at least one source is required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := parseErrors(t, tc.data, nil)
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1:\n%v", len(errs), errs)
			}
			e := errs[0]
			if e.Key != tc.wantKey || e.Line != tc.wantLine || !strings.Contains(e.Msg, tc.wantMsg) || e.File != "test.yaml" {
				t.Errorf("got %#v, want key %q line %d msg containing %q", e, tc.wantKey, tc.wantLine, tc.wantMsg)
			}
		})
	}
}

func TestMultipleErrors(t *testing.T) {
	t.Parallel()
	const data = `query: {deadline: 0s}
webhooks: {max_attempts: 0}
sources:
  - id: Bad Id
    jurisdiction: ""
    base_url: ftp://x
    operations: {by_domain: {path: "no-slash"}}
    breaker: {failure_ratio: 1.5, window: -1s}
  - id: ok
    jurisdiction: OK
    base_url: http://ok.example
    operations: {voucher: {path: "/v"}}
    colour: blue
`
	errs := parseErrors(t, data, nil)
	want := []string{
		"test.yaml:1: query.deadline: must be positive",
		"test.yaml:2: webhooks.max_attempts: must be at least 1",
		`test.yaml:4: sources[0].id: "Bad Id" must be lower-case letters, digits, _ and -, starting with a letter or digit`,
		"test.yaml:4: sources[0].response.fields.id: required when by_domain or by_id is configured",
		"test.yaml:5: sources[0].jurisdiction: required",
		"test.yaml:6: sources[0].base_url: want an absolute http:// or https:// URL",
		`test.yaml:7: sources[0].operations.by_domain.path: must start with a single "/"`,
		"test.yaml:7: sources[0].operations.by_domain.path: must contain {domain} (here, or in query, headers or body)",
		"test.yaml:8: sources[0].breaker.window: must be positive",
		"test.yaml:8: sources[0].breaker.failure_ratio: must be greater than 0 and at most 1",
		"test.yaml:12: sources[1].operations.voucher.path: must contain {infraction_id} (here, or in query, headers or body)",
		"test.yaml:13: sources[1].colour: unknown key",
	}
	got := strings.Split(errs.Error(), "\n")
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSecretsNotInErrors(t *testing.T) {
	t.Parallel()
	secrets := map[string]string{
		"HDR":    "s3cr3t-header\r\nX-Evil: 1",
		"REDIS":  "redis//user:s3cr3t-redis@host",
		"WH":     "s3cr3t-webhook",
		"KEY":    "s3cr3t-apikey",
		"TOKEN":  "s3cr3t-token",
		"DUR":    "s3cr3t-duration",
		"SOURCE": "http://user:s3cr3t-url@[::1",
	}
	const data = `
server:
  admin_token: ${TOKEN}
  api_keys:
    - {name: a, key: "${KEY}", rps: 1}
    - {name: b, key: "${KEY}", rps: 1}
store: {redis_url: "${REDIS}"}
webhooks: {signing_secret: "${WH}", timeout: "${DUR}"}
sources:
  - id: caba
    jurisdiction: CABA
    base_url: ${SOURCE}
    headers: {Authorization: "${HDR}"}
    operations: {by_domain: {path: "/actas?dominio={domain}"}}
    response: {fields: {id: /nro}}
`
	errs := parseErrors(t, data, env(secrets))
	msg := errs.Error()
	if strings.Contains(msg, "s3cr3t") {
		t.Errorf("errors show a secret:\n%s", msg)
	}
	for _, key := range []string{
		"server.api_keys[1].key", "store.redis_url", "webhooks.signing_secret",
		"webhooks.timeout", "sources[0].base_url", "sources[0].headers.Authorization",
	} {
		if !strings.Contains(msg, key+":") {
			t.Errorf("no error for %s in:\n%s", key, msg)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		e    Error
		want string
	}{
		{Error{"c.yaml", 3, "a.b", "bad"}, "c.yaml:3: a.b: bad"},
		{Error{"c.yaml", 0, "a.b", "bad"}, "c.yaml: a.b: bad"},
		{Error{"c.yaml", 2, "", "bad"}, "c.yaml:2: bad"},
		{Error{"", 0, "window", "bad"}, "window: bad"},
		{Error{"", 4, "", "bad"}, "line 4: bad"},
	}
	for _, tc := range tests {
		if got := tc.e.Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
	if got, want := (Errors{{Msg: "a"}, {Msg: "b"}}).Error(), "a\nb"; got != want {
		t.Errorf("Errors: got %q, want %q", got, want)
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load(filepath.Join(t.TempDir(), "nope.yaml"), nil)
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("got %v, want a not-exist error", err)
	}
}

func TestDefaultBaseURI(t *testing.T) {
	t.Parallel()
	tests := []struct{ listen, want string }{
		{"127.0.0.1:8080", "http://127.0.0.1:8080/problems/"},
		{":8080", "http://localhost:8080/problems/"},
		{"0.0.0.0:80", "http://localhost:80/problems/"},
		{"[::]:80", "http://localhost:80/problems/"},
		{"[::1]:80", "http://[::1]:80/problems/"},
		{"api.example.com:443", "http://api.example.com:443/problems/"},
	}
	for _, tc := range tests {
		if got := DefaultBaseURI(tc.listen); got != tc.want {
			t.Errorf("DefaultBaseURI(%q): got %q, want %q", tc.listen, got, tc.want)
		}
	}
}

func TestSetListen(t *testing.T) {
	t.Parallel()
	c := mustParse(t, minimal, nil)
	if err := c.SetListen("127.0.0.1:9000"); err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != "127.0.0.1:9000" || c.Problems.BaseURI != "http://127.0.0.1:9000/problems/" {
		t.Errorf("got listen %q base_uri %q", c.Server.Listen, c.Problems.BaseURI)
	}
	if err := c.SetListen("nonsense"); err == nil {
		t.Errorf("SetListen(nonsense) succeeded")
	}

	c = mustParse(t, "problems: {base_uri: \"https://x.example/p/\"}\n"+minimal, nil)
	if err := c.SetListen("127.0.0.1:9000"); err != nil {
		t.Fatal(err)
	}
	if c.Problems.BaseURI != "https://x.example/p/" {
		t.Errorf("explicit base_uri changed to %q", c.Problems.BaseURI)
	}
}

func TestDuration(t *testing.T) {
	t.Parallel()
	tests := []struct {
		json    string
		want    Duration
		wantErr bool
	}{
		{`"3s"`, d("3s"), false},
		{`"1h30m"`, d("90m"), false},
		{`"0s"`, 0, false},
		{`0`, 0, false},
		{`"0"`, 0, false},
		{`5`, 0, true},
		{`"5"`, 0, true},
		{`"abc"`, 0, true},
		{`true`, 0, true},
		{`null`, 0, true},
	}
	for _, tc := range tests {
		var got Duration
		err := json.Unmarshal([]byte(tc.json), &got)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("Unmarshal(%s): got %v, %v, want %v, error %v", tc.json, got, err, tc.want, tc.wantErr)
		}
	}
	var y struct {
		D Duration `yaml:"d"`
	}
	if err := yaml.Unmarshal([]byte("d: 250ms"), &y); err != nil || y.D != d("250ms") {
		t.Errorf("yaml.Unmarshal: got %v, %v", y.D, err)
	}
	out, err := yaml.Marshal(y)
	if err != nil || string(out) != "d: 250ms\n" {
		t.Errorf("yaml.Marshal: got %q, %v", out, err)
	}
}

// voucher_types and voucher_max_bytes are inherited from defaults and
// overridden per source like max_response_bytes (SPEC 9); a source's list
// replaces the inherited one whole, and owns its copy.
func TestVoucherSettingsMerge(t *testing.T) {
	t.Parallel()
	const data = `
server: {max_in_flight: 4, read_timeout: 750ms}
defaults: {voucher_types: [application/pdf], voucher_max_bytes: 2048}
sources:
  - id: a
    jurisdiction: A
    base_url: http://a.example
    operations: {voucher: {path: "/v/{infraction_id}"}}
  - id: b
    jurisdiction: B
    base_url: http://b.example
    operations: {voucher: {path: "/v/{infraction_id}"}}
    voucher_types: [image/png, IMAGE/JPEG]
    voucher_max_bytes: 1
`
	c := mustParse(t, data, nil)
	a, b := c.Sources[0], c.Sources[1]
	checks := []struct {
		name      string
		got, want any
	}{
		{"server.max_in_flight", c.Server.MaxInFlight, 4},
		{"server.read_timeout", c.Server.ReadTimeout, Duration(750 * time.Millisecond)},
		{"a.voucher_types", a.VoucherTypes, []string{"application/pdf"}},
		{"a.voucher_max_bytes", a.VoucherMaxBytes, int64(2048)},
		{"b.voucher_types", b.VoucherTypes, []string{"image/png", "IMAGE/JPEG"}},
		{"b.voucher_max_bytes", b.VoucherMaxBytes, int64(1)},
	}
	for _, tc := range checks {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	a.VoucherTypes[0] = "text/html"
	if c.Defaults.VoucherTypes[0] != "application/pdf" {
		t.Errorf("source and defaults share voucher_types")
	}
}
