package config

import (
	"strings"
	"testing"
)

// src is a valid source list item, with some of its top-level lines
// replaced (or added) by over, each written "key: value" on one line.
func src(over ...string) string {
	lines := []string{
		"id: caba",
		"jurisdiction: CABA",
		"base_url: http://127.0.0.1:9101",
		`operations: {by_domain: {path: "/actas?dominio={domain}"}}`,
		"response: {fields: {id: /nro}}",
	}
	for _, o := range over {
		key, _, _ := strings.Cut(o, ":")
		replaced := false
		for i, l := range lines {
			if strings.HasPrefix(l, key+":") {
				lines[i], replaced = o, true
			}
		}
		if !replaced {
			lines = append(lines, o)
		}
	}
	return "  - " + strings.Join(lines, "\n    ") + "\n"
}

// doc is a configuration with the top-level blocks top and the sources.
func doc(top string, sources ...string) string {
	if len(sources) == 0 {
		sources = []string{src()}
	}
	return top + "\nsources:\n" + strings.Join(sources, "")
}

// want is one expected problem: its key path and part of its message.
type want struct{ key, msg string }

func TestValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		data string
		want []want
	}{
		// server
		{"listen not host:port", doc(`server: {listen: "nonsense"}`), []want{{"server.listen", "want host:port"}}},
		{"listen bad port", doc(`server: {listen: "127.0.0.1:99999"}`), []want{{"server.listen", "want host:port"}}},
		{"listen empty", doc(`server: {listen: ""}`), []want{{"server.listen", "required"}}},
		{"max_in_flight zero", doc(`server: {max_in_flight: 0}`), []want{{"server.max_in_flight", "must be at least 1"}}},
		{"max_in_flight negative", doc(`server: {max_in_flight: -5}`), []want{{"server.max_in_flight", "must be at least 1"}}},
		{"read_timeout zero", doc(`server: {read_timeout: 0s}`), []want{{"server.read_timeout", "must be positive"}}},
		{"read_timeout negative", doc(`server: {read_timeout: -1s}`), []want{{"server.read_timeout", "must be positive"}}},
		{"api key incomplete", doc(`server: {api_keys: [{rps: 0, burst: -1}]}`), []want{
			{"server.api_keys[0].name", "required"},
			{"server.api_keys[0].key", "required"},
			{"server.api_keys[0].rps", "must be positive"},
			{"server.api_keys[0].burst", "must not be negative"},
		}},
		{"api keys repeated", doc(`server: {api_keys: [{name: a, key: k1, rps: 1}, {name: a, key: k1, rps: 1}]}`), []want{
			{"server.api_keys[1].name", `duplicate name "a" (also server.api_keys[0])`},
			{"server.api_keys[1].key", "same key as server.api_keys[0]"},
		}},
		// problems, query, store, async
		{"base_uri relative", doc(`problems: {base_uri: "/problems/"}`), []want{{"problems.base_uri", "want an absolute URI"}}},
		{"deadline above max", doc(`query: {deadline: 11s}`), []want{{"query.deadline", "must not exceed query.max_deadline (10s)"}}},
		{"deadline zero", doc(`query: {deadline: 0s}`), []want{{"query.deadline", "must be positive"}}},
		{"deadline negative", doc(`query: {deadline: -1s}`), []want{{"query.deadline", "must be positive"}}},
		{"max_deadline zero", doc(`query: {max_deadline: 0}`), []want{{"query.max_deadline", "must be positive"}}},
		{"redis_url scheme", doc(`store: {redis_url: "http://127.0.0.1:6379"}`), []want{{"store.redis_url", "want redis://"}}},
		{"redis_url unparseable", doc(`store: {redis_url: "redis://[::1"}`), []want{{"store.redis_url", "want redis://"}}},
		{"async max_wait", doc(`async: {max_wait: 0s}`), []want{{"async.max_wait", "must be positive"}}},
		{"async release_rps", doc(`async: {release_rps: 0}`), []want{{"async.release_rps", "must be positive"}}},
		// webhooks
		{"secret without prefix", doc(`webhooks: {signing_secret: "c2VjcmV0"}`), []want{{"webhooks.signing_secret", `want "whsec_"`}}},
		{"secret not base64", doc(`webhooks: {signing_secret: "whsec_!!!"}`), []want{{"webhooks.signing_secret", `want "whsec_"`}}},
		{"secret empty key", doc(`webhooks: {signing_secret: "whsec_"}`), []want{{"webhooks.signing_secret", `want "whsec_"`}}},
		{"webhook values", doc(`webhooks: {timeout: 0s, max_attempts: 0, backoff: -1s, breaker: {consecutive_failures: 0, open_for: 0s}}`), []want{
			{"webhooks.timeout", "must be positive"},
			{"webhooks.max_attempts", "must be at least 1"},
			{"webhooks.backoff", "must not be negative"},
			{"webhooks.breaker.consecutive_failures", "must be at least 1"},
			{"webhooks.breaker.open_for", "must be positive"},
		}},
		// defaults: reported once, not again for every source inheriting them
		{"defaults values", doc(`defaults: {timeout: 0s, time_zone: Mars/Olympus, currency: ars, max_response_bytes: 0}`, src(), src("id: other")), []want{
			{"defaults.timeout", "must be positive"},
			{"defaults.time_zone", `unknown time zone "Mars/Olympus"`},
			{"defaults.currency", `want a three-letter upper-case ISO 4217 code such as ARS, got "ars"`},
			{"defaults.max_response_bytes", "must be positive"},
		}},
		{"defaults vouchers", doc(`defaults: {voucher_types: [application/pdf, pdf, "image/*", "text/html; charset=utf-8", "a b/c"], voucher_max_bytes: 0}`, src(), src("id: other")), []want{
			{"defaults.voucher_types[1]", `want a media type such as application/pdf (type/subtype, no parameters, no wildcards), got "pdf"`},
			{"defaults.voucher_types[2]", `got "image/*"`},
			{"defaults.voucher_types[3]", `got "text/html; charset=utf-8"`},
			{"defaults.voucher_types[4]", `got "a b/c"`},
			{"defaults.voucher_max_bytes", "must be positive"},
		}},
		{"defaults voucher_types empty", doc(`defaults: {voucher_types: []}`), []want{{"defaults.voucher_types", "must list at least one media type"}}},
		{"source vouchers", doc("", src("voucher_types: []", "voucher_max_bytes: -1")), []want{
			{"sources[0].voucher_types", "must list at least one media type"},
			{"sources[0].voucher_max_bytes", "must be positive"},
		}},
		{"defaults time_zone empty", doc(`defaults: {time_zone: ""}`), []want{{"defaults.time_zone", "required"}}},
		{"defaults retry", doc(`defaults: {retry: {max_retries: -1, initial_backoff: -1s, max_backoff: -2s}}`), []want{
			{"defaults.retry.max_retries", "must not be negative"},
			{"defaults.retry.initial_backoff", "must not be negative"},
			{"defaults.retry.max_backoff", "must not be negative"},
		}},
		{"defaults retry order", doc(`defaults: {retry: {initial_backoff: 2s, max_backoff: 1s}}`), []want{
			{"defaults.retry.initial_backoff", "must not exceed max_backoff (1s)"},
		}},
		{"defaults breaker", doc(`defaults: {breaker: {window: 0s, min_calls: 0, failure_ratio: 0, consecutive_failures: -1, open_for: 0s, slow_call: -1s, failure_statuses: [404, 500, 600]}}`), []want{
			{"defaults.breaker.window", "must be positive"},
			{"defaults.breaker.min_calls", "must be at least 1"},
			{"defaults.breaker.failure_ratio", "must be greater than 0 and at most 1"},
			{"defaults.breaker.consecutive_failures", "must not be negative"},
			{"defaults.breaker.open_for", "must be positive"},
			{"defaults.breaker.slow_call", "must not be negative"},
			{"defaults.breaker.failure_statuses[0]", "got 404"},
			{"defaults.breaker.failure_statuses[2]", "got 600"},
		}},
		{"defaults failure_ratio above 1", doc(`defaults: {breaker: {failure_ratio: 1.01}}`), []want{{"defaults.breaker.failure_ratio", "must be greater than 0 and at most 1"}}},
		{"defaults drift", doc(`defaults: {drift: {window: 0s, unmapped_ratio: -0.1, empty_ratio: 1.5}}`), []want{
			{"defaults.drift.window", "must be positive"},
			{"defaults.drift.unmapped_ratio", "must be between 0 and 1"},
			{"defaults.drift.empty_ratio", "must be between 0 (off) and 1"},
		}},
		{"source drift", doc("", src("drift: {window: -1m, unmapped_ratio: 2}")), []want{
			{"sources[0].drift.window", "must be positive"},
			{"sources[0].drift.unmapped_ratio", "must be between 0 and 1"},
		}},
		{"defaults window negative", doc(`defaults: {breaker: {window: -5s}}`), []want{{"defaults.breaker.window", "must be positive"}}},
		{"defaults rate_limit", doc(`defaults: {rate_limit: {rps: -1, burst: -1, max_wait: -1ms, max_pause: 0s}}`), []want{
			{"defaults.rate_limit.rps", "must not be negative"},
			{"defaults.rate_limit.burst", "must not be negative"},
			{"defaults.rate_limit.max_wait", "must not be negative"},
			{"defaults.rate_limit.max_pause", "must be positive"},
		}},
		// a source's own settings
		{"source breaker", doc("", src("breaker: {failure_ratio: 1.5, min_calls: 0}")), []want{
			{"sources[0].breaker.min_calls", "must be at least 1"},
			{"sources[0].breaker.failure_ratio", "must be greater than 0 and at most 1"},
		}},
		{"source retry against inherited max", doc("", src("retry: {initial_backoff: 2m}")), []want{
			{"sources[0].retry.initial_backoff", "must not exceed max_backoff (1m0s)"},
		}},
		{"source settings", doc("", src("timeout: -1s", "time_zone: Nowhere/City", "currency: EURO", "max_response_bytes: -1", "rate_limit: {rps: -2}")), []want{
			{"sources[0].timeout", "must be positive"},
			{"sources[0].time_zone", `unknown time zone "Nowhere/City"`},
			{"sources[0].currency", `got "EURO"`},
			{"sources[0].max_response_bytes", "must be positive"},
			{"sources[0].rate_limit.rps", "must not be negative"},
		}},
		{"source fixes a defaults problem", doc(`defaults: {currency: x}`, src("currency: USD"), src("id: other")), []want{
			{"defaults.currency", `got "x"`},
		}},
		// identity
		{"id missing", doc("", src(`id: ""`)), []want{{"sources[0].id", "required"}}},
		{"id upper case", doc("", src("id: Caba")), []want{{"sources[0].id", `"Caba" must be lower-case`}}},
		{"id leading dash", doc("", src("id: -caba")), []want{{"sources[0].id", "must be lower-case"}}},
		{"id duplicate", doc("", src(), src("jurisdiction: Other")), []want{{"sources[1].id", `duplicate id "caba" (also sources[0])`}}},
		{"breaker_key invalid", doc("", src("breaker_key: Shared Key")), []want{{"sources[0].breaker_key", "must be lower-case"}}},
		{"jurisdiction missing", doc("", src(`jurisdiction: " "`)), []want{{"sources[0].jurisdiction", "required"}}},
		{"base_url missing", doc("", src(`base_url: ""`)), []want{{"sources[0].base_url", "required"}}},
		{"base_url relative", doc("", src("base_url: /api")), []want{{"sources[0].base_url", "want an absolute http:// or https:// URL"}}},
		{"base_url scheme", doc("", src("base_url: ftp://x.example")), []want{{"sources[0].base_url", "want an absolute http:// or https:// URL"}}},
		{"base_url no host", doc("", src("base_url: http://")), []want{{"sources[0].base_url", "want an absolute http:// or https:// URL"}}},
		{"base_url query", doc("", src("base_url: http://x.example/?a=1")), []want{{"sources[0].base_url", "must not have a query or fragment"}}},
		// headers
		{"header name", doc("", src(`headers: {"Bad Header": x}`)), []want{{`sources[0].headers["Bad Header"]`, "not a valid HTTP header name"}}},
		{"header value", doc("", src(`headers: {X-A: "a\u0007b"}`)), []want{{"sources[0].headers.X-A", "control character"}}},
		{"header repeated", doc("", src(`headers: {x-a: "1", X-A: "2"}`)), []want{{"sources[0].headers.x-a", `same header as "X-A"`}}},
		// operations
		{"no operations", doc("", src("operations: {}")), []want{{"sources[0].operations", "at least one operation"}}},
		{"operations null", doc("", src("operations:")), []want{{"sources[0].operations", "at least one operation"}}},
		{"unknown operation", doc("", src("operations: {by_plate: {path: /x}}")), []want{{"sources[0].operations.by_plate", "unknown operation"}}},
		{"method", doc("", src(`operations: {by_domain: {method: DELETE, path: "/a/{domain}"}}`)), []want{{"sources[0].operations.by_domain.method", `want GET or POST, got "DELETE"`}}},
		{"path missing", doc("", src(`operations: {by_domain: {method: GET}}`)), []want{{"sources[0].operations.by_domain.path", "required"}}},
		{"path no slash", doc("", src(`operations: {by_domain: {path: "a/{domain}"}}`)), []want{{"sources[0].operations.by_domain.path", `must start with a single "/"`}}},
		{"path double slash", doc("", src(`operations: {by_domain: {path: "//evil.example/{domain}"}}`)), []want{
			{"sources[0].operations.by_domain.path", `must start with a single "/"`},
			{"sources[0].operations.by_domain.path", "is not a URL path"},
		}},
		{"path without placeholder", doc("", src(`operations: {by_id: {path: "/personas"}}`)), []want{{"sources[0].operations.by_id.path", "must contain {id}"}}},
		{"voucher without placeholder", doc("", src(`operations: {voucher: {path: "/boleta/{id}"}}`)), []want{
			{"sources[0].operations.voucher.path", "{id} is not available to voucher"},
			{"sources[0].operations.voucher.path", "must contain {infraction_id}"},
		}},
		{"unknown placeholder", doc("", src(`operations: {by_domain: {path: "/a/{domain}/{plate}"}}`)), []want{
			{"sources[0].operations.by_domain.path", "unknown placeholder {plate} (by_domain has {domain})"},
		}},
		{"placeholder of another operation", doc("", src(`operations: {by_domain: {path: "/a/{domain}?k={id_kind}"}}`)), []want{
			{"sources[0].operations.by_domain.path", "{id_kind} is not available to by_domain"},
		}},
		{"unclosed placeholder", doc("", src(`operations: {by_domain: {path: "/a/{domain"}}`)), []want{
			{"sources[0].operations.by_domain.path", `has a "{" without "}"`},
			{"sources[0].operations.by_domain.path", "must contain {domain}"},
		}},
		{"stray brace", doc("", src(`operations: {by_domain: {path: "/a/{domain}}"}}`)), []want{
			{"sources[0].operations.by_domain.path", `has a "}" without "{"`},
		}},
		{"fragment", doc("", src(`operations: {by_domain: {path: "/a/{domain}#x"}}`)), []want{{"sources[0].operations.by_domain.path", "is not a URL path"}}},
		{"accepts on by_domain", doc("", src(`operations: {by_domain: {path: "/a/{domain}", accepts: [cuit]}}`)), []want{{"sources[0].operations.by_domain.accepts", "only by_id takes accepts"}}},
		{"accepts unknown kind", doc("", src(`operations: {by_id: {path: "/a/{id}", accepts: [cuit, passport]}}`)), []want{{"sources[0].operations.by_id.accepts[1]", `want cuit or dni, got "passport"`}}},
		{"accepts empty", doc("", src(`operations: {by_id: {path: "/a/{id}", accepts: []}}`)), []want{{"sources[0].operations.by_id.accepts", "at least one of cuit, dni"}}},
		{"accepts repeated", doc("", src(`operations: {by_id: {path: "/a/{id}", accepts: [dni, dni]}}`)), []want{{"sources[0].operations.by_id.accepts[1]", `"dni" is listed twice`}}},
		// response
		{"items not a pointer", doc("", src("response: {items: resultado, fields: {id: /nro}}")), []want{{"sources[0].response.items", "RFC 6901"}}},
		{"items bad escape", doc("", src(`response: {items: "/a~2b", fields: {id: /nro}}`)), []want{{"sources[0].response.items", "~0"}}},
		{"items trailing tilde", doc("", src(`response: {items: "/a~", fields: {id: /nro}}`)), []want{{"sources[0].response.items", "~0"}}},
		{"field pointer", doc("", src("response: {fields: {id: nro}}")), []want{{"sources[0].response.fields.id", "RFC 6901"}}},
		{"field unknown", doc("", src("response: {fields: {id: /nro, colour: /c}}")), []want{{"sources[0].response.fields.colour", "unknown field"}}},
		{"field id missing", doc("", src("response: {fields: {date: /fecha}}")), []want{{"sources[0].response.fields.id", "required when by_domain or by_id"}}},
		{"response missing", doc("", src(`operations: {by_id: {path: "/a/{id}"}}`, "response: {}")), []want{{"sources[0].response.fields.id", "required"}}},
		{"status_map value", doc("", src("response: {fields: {id: /nro}, status_map: {VENCIDA: overdue}}")), []want{{"sources[0].response.status_map.VENCIDA", `got "overdue"`}}},
		{"status_map conflict", doc("", src(`response: {fields: {id: /nro}, status_map: {impaga: unpaid, IMPAGA: paid}}`)), []want{{"sources[0].response.status_map.impaga", `conflicts with "IMPAGA"`}}},
		// shared breaker keys
		{"shared breaker key differs", doc("",
			src("id: a", "breaker_key: plat"),
			src("id: b", "breaker_key: plat", "breaker: {open_for: 5s, failure_statuses: [503]}")), []want{
			{"sources[1].breaker", `source "b" shares breaker_key "plat" with source "a" (sources[0]), so their breaker settings must be the same: open_for 30s vs 5s, failure_statuses [500 502 503 504] vs [503]`},
		}},
		{"breaker key defaults to another id", doc("",
			src("id: a"),
			src("id: b", "breaker_key: a", "breaker: {min_calls: 3}")), []want{
			{"sources[1].breaker", "min_calls 10 vs 3"},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := parseErrors(t, tc.data, nil)
			if len(errs) != len(tc.want) {
				t.Errorf("got %d errors, want %d:\n%v\nin:\n%s", len(errs), len(tc.want), errs, tc.data)
			}
			for _, w := range tc.want {
				found := false
				for _, e := range errs {
					if e.Key == w.key && strings.Contains(e.Msg, w.msg) {
						found = true
						if e.Line <= 0 || e.File != "test.yaml" {
							t.Errorf("%s: got file %q line %d, want test.yaml and a line", e.Key, e.File, e.Line)
						}
					}
				}
				if !found {
					t.Errorf("no error %s: …%s… in:\n%v", w.key, w.msg, errs)
				}
			}
		})
	}
}

func TestValid(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, data string }{
		{"minimal", minimal},
		{"redis", doc(`store: {redis_url: "rediss://user:pw@127.0.0.1:6380/1"}`)},
		{"unpadded secret", doc(`webhooks: {signing_secret: "whsec_c2VjcmV0"}`)},
		{"api keys", doc(`server: {api_keys: [{name: a, key: k1, rps: 0.5}, {name: b, key: k2, rps: 10, burst: 20}]}`)},
		{"listen port 0", doc(`server: {listen: "127.0.0.1:0"}`)},
		{"post lower case", doc("", src(`operations: {by_domain: {method: post, path: "/a?d={domain}"}}`))},
		{"voucher only, no response", doc("", src(`operations: {voucher: {path: "/b/{infraction_id}"}}`, "response: {}"))},
		{"by_id with kind", doc("", src(`operations: {by_id: {path: "/p/{id_kind}/{id}", accepts: [dni]}}`))},
		{"escaped pointers", doc("", src(`response: {items: "/a~1b/c~0d", fields: {id: "", date: /x/0}}`))},
		{"failure ratio 1", doc(`defaults: {breaker: {failure_ratio: 1}}`)},
		{"same status map twice", doc("", src(`response: {fields: {id: /nro}, status_map: {impaga: unpaid, IMPAGA: unpaid}}`))},
		{"shared breaker key, same settings", doc(`defaults: {breaker: {open_for: 9s}}`,
			src("id: a", "breaker_key: plat", "breaker: {failure_statuses: [503, 500]}"),
			src("id: b", "breaker_key: plat", "breaker: {failure_statuses: [500, 503, 500], open_for: 9s}"))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := Parse([]byte(tc.data), "test.yaml", nil); err != nil {
				t.Errorf("Parse: %v\nin:\n%s", err, tc.data)
			}
		})
	}
}
