package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/api"
	"github.com/multas/aggregator/internal/apitest"
	"github.com/multas/aggregator/problem"
)

func loadSpec(t *testing.T) *openapi3.T {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.Spec)
	if err != nil {
		t.Fatalf("loading openapi.yaml: %v", err)
	}
	return doc
}

func TestSpecLoadsAndValidates(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Errorf("openapi.yaml does not validate: %v", err)
	}
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != "/" {
		t.Errorf("servers = %v, want the single relative server /", doc.Servers)
	}
}

// endpoint is one operation of SPEC.md and the statuses it must document.
type endpoint struct {
	method, path string
	statuses     []int
}

// client and admin are the statuses every client (/v1/, X-API-Key) and
// admin (/v1/admin, bearer) operation can answer.
// Every operation but health, readiness and metrics may answer 503
// overloaded (SPEC 9).
var (
	client = []int{401, 429, 500, 503}
	admin  = []int{401, 403, 500, 503}
)

// specEndpoints mirrors every endpoint of SPEC.md (sections 3, 5 and 7).
var specEndpoints = []endpoint{
	{"GET", "/v1/infractions", append([]int{200, 204, 400, 503}, client...)},
	{"GET", "/v1/sources/{source}/infractions/{infraction_id}/voucher", append([]int{200, 404, 502, 503, 504}, client...)},
	{"GET", "/v1/sources", append([]int{200}, client...)},
	{"POST", "/v1/queries", append([]int{202, 400, 408, 413}, client...)},
	{"GET", "/v1/queries/{qid}", append([]int{200, 404}, client...)},
	{"POST", "/v1/watches", append([]int{201, 400, 404, 408, 409, 413}, client...)},
	{"GET", "/v1/watches", append([]int{200, 400, 404}, client...)},
	{"GET", "/v1/watches/{wid}", append([]int{200, 404}, client...)},
	{"DELETE", "/v1/watches/{wid}", append([]int{204, 404}, client...)},
	{"GET", "/v1/admin/breakers", append([]int{200}, admin...)},
	{"POST", "/v1/admin/breakers/{key}/{operation}/reset", append([]int{200, 404, 408, 413}, admin...)},
	{"POST", "/v1/admin/breakers/{key}/{operation}/open", append([]int{200, 404, 408, 413}, admin...)},
	{"PUT", "/v1/admin/sources/{id}/breaker", append([]int{200, 400, 404, 408, 413}, admin...)},
	{"GET", "/v1/admin/events", append([]int{200, 400}, admin...)},
	{"GET", "/v1/admin/sources", append([]int{200}, admin...)},
	{"GET", "/v1/admin/history", append([]int{200, 400}, admin...)},
	{"GET", "/v1/admin/dlq", append([]int{200}, admin...)},
	{"POST", "/v1/admin/dlq/{id}/redeliver", append([]int{202, 404, 408, 413}, admin...)},
	{"DELETE", "/v1/admin/dlq/{id}", append([]int{204, 404, 408, 413}, admin...)},
	{"GET", "/v1/admin/readyz", append([]int{200}, admin...)},
	{"DELETE", "/v1/admin/memory", append([]int{204, 400, 404}, admin...)},
	// Runtime profiles for operators (issue 23): the admin token, never
	// overloaded.
	{"GET", "/debug/pprof", []int{200, 401, 403, 500}},
	{"GET", "/debug/pprof/{profile}", []int{200, 400, 401, 403, 404, 500}},
	{"GET", "/v1/admin/watches", append([]int{200, 404}, admin...)},
	{"GET", "/problems/{slug}", []int{200, 404, 503}},
	{"GET", "/", []int{200, 503}},
	{"GET", "/metrics", []int{200}},
	{"GET", "/healthz", []int{200}},
	{"GET", "/readyz", []int{200, 503}},
	{"GET", "/openapi.yaml", []int{200, 503}},
}

func TestEveryEndpointOfSpecIsDocumented(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	for _, e := range specEndpoints {
		item := doc.Paths.Value(e.path)
		if item == nil {
			t.Errorf("path %s is missing", e.path)
			continue
		}
		op := item.GetOperation(e.method)
		if op == nil {
			t.Errorf("%s %s is missing", e.method, e.path)
			continue
		}
		for _, s := range e.statuses {
			if op.Responses.Status(s) == nil {
				t.Errorf("%s %s does not document status %d", e.method, e.path, s)
			}
		}
		for code, ref := range op.Responses.Map() {
			if n, err := strconv.Atoi(code); (err != nil || n >= 400) && e.path != "/readyz" {
				for mt := range ref.Value.Content {
					if mt != "application/problem+json" {
						t.Errorf("%s %s: error status %s is %s, want application/problem+json", e.method, e.path, code, mt)
					}
				}
			}
		}
		isAdmin := strings.HasPrefix(e.path, "/v1/admin/") || strings.HasPrefix(e.path, "/debug/pprof")
		isClient := strings.HasPrefix(e.path, "/v1/") && !isAdmin
		var want []string
		switch {
		case isAdmin:
			want = []string{"AdminBearer"}
		case strings.HasPrefix(e.path, "/v1/watches"):
			want = []string{"ApiKey"} // a watch belongs to a key: always required
		case isClient:
			want = []string{"ApiKey", ""} // optional: only when api_keys is configured
		}
		if got := securityOf(doc, op); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s %s: security = %q, want %q", e.method, e.path, got, want)
		}
	}
	listed := map[string]bool{}
	for _, e := range specEndpoints {
		listed[e.method+" "+e.path] = true
	}
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !listed[method+" "+path] {
				t.Errorf("%s %s is documented but not in SPEC's list", method, path)
			}
		}
	}
}

// securityOf lists the scheme names of op's alternatives ("" for none).
func securityOf(doc *openapi3.T, op *openapi3.Operation) []string {
	reqs := doc.Security
	if op.Security != nil {
		reqs = *op.Security
	}
	var out []string
	for _, r := range reqs {
		name := ""
		for k := range r {
			name = k
		}
		out = append(out, name)
	}
	return out
}

func TestEveryProblemSlugHasItsPage(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	enum := doc.Components.Schemas["ProblemSlug"].Value.Enum
	have := map[string]bool{}
	for _, e := range enum {
		have[fmt.Sprint(e)] = true
	}
	for _, k := range problem.Catalogue {
		if !have[string(k.Slug)] {
			t.Errorf("ProblemSlug lacks %q", k.Slug)
		}
	}
	if len(enum) != len(problem.Catalogue) {
		t.Errorf("ProblemSlug has %d slugs, the catalogue %d", len(enum), len(problem.Catalogue))
	}
}

// recorder captures the failures Check reports instead of failing the test.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

const validResult = `{
  "query": {"domain": "AB123CD"},
  "complete": false,
  "summary": {"total": 2, "succeeded": 1, "failed": 0, "skipped": 1, "stale": 0},
  "infractions": [
    {"source": "caba", "jurisdiction": "Ciudad de Buenos Aires", "id": "Q-10442",
     "date": "2026-03-14T09:12:00-03:00", "description": "Exceso de velocidad",
     "place": "Av. Lugones km 4", "amount": "185000.00", "currency": "ARS",
     "status": "unpaid", "status_raw": "IMPAGA",
     "voucher": "/v1/sources/caba/infractions/Q-10442/voucher"},
    {"source": "caba", "jurisdiction": "Ciudad de Buenos Aires", "id": "Q-2", "status": "unknown"}
  ],
  "sources": [
    {"source": "caba", "jurisdiction": "Ciudad de Buenos Aires", "operation": "by_domain",
     "status": "succeeded", "count": 2, "duration_ms": 41},
    {"source": "cordoba", "jurisdiction": "Provincia de Córdoba", "operation": "by_domain",
     "status": "skipped",
     "problem": {"type": "https://aggregator.example/problems/circuit-open",
                 "title": "Source not consulted: circuit open", "status": 503,
                 "detail": "open", "retry_after": 17}}
  ],
  "future_member": {"forward": "compatible"}
}`

const validBreaker = `{"breakers": [{
  "breaker_key": "caba", "operation": "by_domain", "sources": ["caba"],
  "state": "closed", "since": "2026-03-14T09:12:00-03:00", "open_until": null, "open_seconds_total": 0,
  "window": {"calls": 0, "failures": 0, "ratio": 0},
  "last_transition": %s,
  "settings": {"window": "1m0s", "min_calls": 10, "failure_ratio": 0.5,
               "consecutive_failures": 0, "open_for": "30s", "slow_call": "0s",
               "failure_statuses": [500, 502, 503, 504]}}]}`

const event = `{"time": "2026-03-14T09:12:00-03:00", "breaker_key": "caba", "operation": "by_domain",
  "from": "open", "to": "closed", "reason": "manual reset", "evidence": {}}`

func TestCheck(t *testing.T) {
	t.Parallel()
	v := apitest.New(t)

	nosniff := []string{"nosniff"}
	noStore := http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}, "X-Content-Type-Options": nosniff}
	jsonCT := http.Header{"Content-Type": {"application/json; charset=utf-8"}, "X-Content-Type-Options": nosniff}
	problemCT := http.Header{"Content-Type": {"application/problem+json"}, "X-Content-Type-Options": nosniff}
	with := func(h http.Header, kv ...string) http.Header {
		h = h.Clone()
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	without := func(h http.Header, k string) http.Header {
		h = h.Clone()
		h.Del(k)
		return h
	}
	voucherHeaders := http.Header{"Content-Type": {"application/pdf"}, "Cache-Control": {"no-store"},
		"X-Content-Type-Options": {"nosniff"}, "Content-Security-Policy": {"sandbox; default-src 'none'"},
		"Content-Disposition": {`attachment; filename="caba-Q-1.pdf"`}}
	edit := func(doc, old, new string) string {
		if !strings.Contains(doc, old) {
			t.Fatalf("test bug: %q not in document", old)
		}
		return strings.Replace(doc, old, new, 1)
	}
	const (
		invalidQuery = `{"type": "https://x.example/problems/invalid-query", "title": "Invalid query", "status": 400,
			"invalid_params": [{"name": "domain", "reason": "not a plate"}]}`
		notFound = `{"type": "https://x.example/problems/not-found", "title": "Not found", "status": 404}`
	)

	cases := []struct {
		name, method, url string
		status            int
		header            http.Header
		body              string
		ok                bool
	}{
		{"valid result", "GET", "/v1/infractions?domain=AB123CD", 200, noStore, validResult, true},
		{"weird infraction status", "GET", "/v1/infractions?domain=AB123CD", 200, noStore,
			edit(validResult, `"status": "unpaid"`, `"status": "weird"`), false},
		{"weird source status", "GET", "/v1/infractions?domain=AB123CD", 200, noStore,
			edit(validResult, `"status": "succeeded"`, `"status": "weird"`), false},
		{"one-decimal amount", "GET", "/v1/infractions?domain=AB123CD", 200, noStore,
			edit(validResult, `"185000.00"`, `"185000.5"`), false},
		{"numeric amount", "GET", "/v1/infractions?domain=AB123CD", 200, noStore,
			edit(validResult, `"185000.00"`, `185000.00`), false},
		{"skipped source without problem", "GET", "/v1/infractions?domain=AB123CD", 200, noStore,
			edit(validResult, `"problem": {"type"`, `"not_problem": {"type"`), false},
		{"date without offset", "GET", "/v1/infractions?domain=AB123CD", 200, noStore,
			edit(validResult, `"2026-03-14T09:12:00-03:00"`, `"2026-03-14T09:12:00"`), false},
		{"completed_at not a time", "GET", "/v1/queries/q1", 200, noStore,
			`{"id": "q1", "status": "completed", "created_at": "2026-03-14T09:12:00Z", "completed_at": 5}`, false},
		{"last_transition not an event", "GET", "/v1/admin/breakers", 200, jsonCT, fmt.Sprintf(validBreaker, `{"time": "x"}`), false},
		{"query echo by id", "GET", "/v1/infractions?id=20123456786", 200, noStore,
			edit(validResult, `"query": {"domain": "AB123CD"}`, `"query": {"id": "20123456786"}`), true},
		{"query echo with domain and id", "GET", "/v1/infractions?domain=AB123CD", 200, noStore,
			edit(validResult, `"query": {"domain": "AB123CD"}`, `"query": {"domain": "AB123CD", "id": "20123456786"}`), false},
		{"query echo without either", "GET", "/v1/infractions?domain=AB123CD", 200, noStore,
			edit(validResult, `"query": {"domain": "AB123CD"}`, `"query": {}`), false},
		{"infraction without id", "GET", "/v1/infractions?domain=AB123CD", 200, noStore,
			edit(validResult, `"id": "Q-2", `, ``), false},
		{"result without summary", "GET", "/v1/infractions?domain=AB123CD", 200, noStore,
			edit(validResult, `"summary": {"total": 2, "succeeded": 1, "failed": 0, "skipped": 1, "stale": 0},`, ``), false},
		{"result without Cache-Control", "GET", "/v1/infractions?domain=AB123CD", 200, jsonCT, validResult, false},
		{"result as problem+json", "GET", "/v1/infractions?domain=AB123CD", 200,
			with(noStore, "Content-Type", "application/problem+json"), validResult, false},
		{"result not JSON", "GET", "/v1/infractions?domain=AB123CD", 200, noStore, `{"query":`, false},
		{"undocumented status", "GET", "/v1/infractions?domain=AB123CD", 418, problemCT, notFound, false},
		{"invalid query", "GET", "/v1/infractions", 400, problemCT, invalidQuery, true},
		{"invalid query without invalid_params", "GET", "/v1/infractions", 400, problemCT,
			`{"type": "https://x.example/problems/invalid-query", "title": "Invalid query", "status": 400}`, false},
		{"no source available", "GET", "/v1/infractions?id=20123456786", 503,
			with(problemCT, "Cache-Control", "no-store", "Retry-After", "17"),
			`{"type": "https://x.example/problems/no-source-available", "title": "No source available", "status": 503,
			  "sources": [{"source": "caba", "jurisdiction": "CABA", "operation": "by_id", "status": "failed",
			    "problem": {"type": "https://x.example/problems/source-timeout", "title": "Source timed out", "status": 504}}]}`, true},
		// problems.base_uri is any prefix: the slug need not follow a "/".
		{"no source available under a fragment base", "GET", "/v1/infractions?id=20123456786", 503,
			with(problemCT, "Cache-Control", "no-store"),
			`{"type": "https://docs.example/errors#no-source-available", "title": "No source available", "status": 503,
			  "sources": [{"source": "caba", "jurisdiction": "CABA", "operation": "by_id", "status": "failed",
			    "problem": {"type": "https://docs.example/errors#source-timeout", "title": "Source timed out", "status": 504}}]}`, true},
		{"overloaded under a fragment base", "GET", "/v1/sources", 503, with(problemCT, "Retry-After", "1", "Cache-Control", "no-store"),
			`{"type": "https://docs.example/errors#overloaded", "title": "Overloaded", "status": 503, "retry_after": 1}`, true},
		{"no source available with a retry_after", "GET", "/v1/infractions?id=20123456786", 503,
			with(problemCT, "Cache-Control", "no-store", "Retry-After", "1"),
			`{"type": "https://x.example/problems/no-source-available", "title": "No source available", "status": 503, "retry_after": 1,
			  "sources": [{"source": "caba", "jurisdiction": "CABA", "operation": "by_id", "status": "skipped",
			    "problem": {"type": "https://x.example/problems/rate-limited", "title": "Rate limited", "status": 503, "retry_after": 1}}]}`, true},
		{"overloaded with sources but no retry_after", "GET", "/v1/infractions?id=20123456786", 503,
			with(problemCT, "Cache-Control", "no-store", "Retry-After", "1"),
			`{"type": "https://x.example/problems/overloaded", "title": "Overloaded", "status": 503,
			  "sources": [{"source": "caba", "jurisdiction": "CABA", "operation": "by_id", "status": "failed",
			    "problem": {"type": "https://x.example/problems/source-timeout", "title": "Source timed out", "status": 504}}]}`, false},
		{"no source available without sources", "GET", "/v1/infractions?id=20123456786", 503,
			with(problemCT, "Cache-Control", "no-store"),
			`{"type": "https://x.example/problems/no-source-available", "title": "No source available", "status": 503}`, false},
		{"too many requests", "GET", "/v1/sources", 429,
			with(problemCT, "Retry-After", "3", "RateLimit", `"default";r=0;t=3`, "RateLimit-Policy", `"default";q=5;w=1`),
			`{"type": "https://x.example/problems/too-many-requests", "title": "Too many requests", "status": 429}`, true},
		{"too many requests without Retry-After", "GET", "/v1/sources", 429, problemCT,
			`{"type": "https://x.example/problems/too-many-requests", "title": "Too many requests", "status": 429}`, false},
		{"coverage", "GET", "/v1/sources", 200, jsonCT,
			`{"sources": [{"id": "caba", "jurisdiction": "CABA", "operations": {"by_domain": {"available": true}, "voucher": {"available": false}}}]}`, true},
		{"voucher pdf", "GET", "/v1/sources/caba/infractions/Q%2F10442/voucher", 200,
			with(voucherHeaders, "Content-Disposition", `attachment; filename="caba-Q_10442.pdf"`), "%PDF-1.7\n…", true},
		{"voucher other type", "GET", "/v1/sources/caba/infractions/Q-1/voucher", 200,
			with(voucherHeaders, "Content-Type", "image/png", "Content-Disposition", `attachment; filename="caba-Q-1.png"`), "\x89PNG", true},
		{"voucher circuit open", "GET", "/v1/sources/caba/infractions/Q-1/voucher", 503,
			with(problemCT, "Retry-After", "17"),
			`{"type": "https://x.example/problems/circuit-open", "title": "Source not consulted: circuit open", "status": 503, "retry_after": 17}`, true},
		{"voucher circuit open without Retry-After", "GET", "/v1/sources/caba/infractions/Q-1/voucher", 503, problemCT,
			`{"type": "https://x.example/problems/circuit-open", "title": "Source not consulted: circuit open", "status": 503}`, false},
		{"async accepted", "POST", "/v1/queries", 202, with(jsonCT, "Location", "/v1/queries/q1"),
			`{"id": "q1", "status": "pending", "created_at": "2026-03-14T09:12:00Z", "completed_at": null}`, true},
		{"async accepted without Location", "POST", "/v1/queries", 202, jsonCT,
			`{"id": "q1", "status": "pending", "created_at": "2026-03-14T09:12:00Z"}`, false},
		{"async query", "GET", "/v1/queries/q1", 200, noStore,
			`{"id": "q1", "status": "completed", "created_at": "2026-03-14T09:12:00Z", "result": ` + validResult + `}`, true},
		{"async query weird status", "GET", "/v1/queries/q1", 200, noStore,
			`{"id": "q1", "status": "done", "created_at": "2026-03-14T09:12:00Z"}`, false},
		{"breakers, no transition yet", "GET", "/v1/admin/breakers", 200, jsonCT, fmt.Sprintf(validBreaker, "null"), true},
		{"breakers with a transition", "GET", "/v1/admin/breakers", 200, jsonCT, fmt.Sprintf(validBreaker, event), true},
		{"breakers, bad duration", "GET", "/v1/admin/breakers", 200, jsonCT,
			edit(fmt.Sprintf(validBreaker, "null"), `"30s"`, `30`), false},
		{"breakers, no last_transition", "GET", "/v1/admin/breakers", 200, jsonCT,
			edit(fmt.Sprintf(validBreaker, "null"), `"last_transition": null,`, ``), false},
		{"admin unauthorized", "GET", "/v1/admin/breakers", 401, with(problemCT, "WWW-Authenticate", "Bearer"),
			`{"type": "https://x.example/problems/unauthorized", "title": "Unauthorized", "status": 401}`, true},
		{"admin unauthorized without WWW-Authenticate", "GET", "/v1/admin/breakers", 401, problemCT,
			`{"type": "https://x.example/problems/unauthorized", "title": "Unauthorized", "status": 401}`, false},
		{"admin forbidden", "POST", "/v1/admin/breakers/caba/by_id/reset", 403, problemCT,
			`{"type": "https://x.example/problems/forbidden", "title": "Forbidden", "status": 403}`, true},
		{"events", "GET", "/v1/admin/events?since=2026-03-14T09:12:00Z", 200, jsonCT, `{"events": [` + event + `]}`, true},
		{"a store event", "GET", "/v1/admin/events", 200, jsonCT,
			`{"events": [{"time": "2026-03-14T09:12:00-03:00", "kind": "store", "breaker_key": "", "operation": "",
			  "from": "shared", "to": "local", "reason": "redis unreachable", "evidence": {}}]}`, true},
		{"a store event of another kind", "GET", "/v1/admin/events", 200, jsonCT,
			`{"events": [{"time": "2026-03-14T09:12:00-03:00", "kind": "cache", "breaker_key": "", "operation": "",
			  "from": "shared", "to": "local", "reason": "redis unreachable"}]}`, false},
		// A portal's Retry-After given as an HTTP-date is a fraction of
		// seconds away when it is read.
		{"evidence of a trip held open by Retry-After", "GET", "/v1/admin/events", 200, jsonCT,
			`{"events": [{"time": "2026-03-14T09:12:00-03:00", "breaker_key": "caba", "operation": "by_id",
			  "from": "closed", "to": "open", "reason": "failure ratio reached",
			  "evidence": {"calls": 10, "failures": 6, "ratio": 0.6, "window_seconds": 60, "retry_after": 89.734}}]}`, true},
		{"settings", "PUT", "/v1/admin/sources/caba/breaker", 200, jsonCT,
			`{"window": "1m0s", "min_calls": 10, "failure_ratio": 0.5, "consecutive_failures": 0, "open_for": "5s", "slow_call": "0s", "failure_statuses": [500]}`, true},
		{"settings, bad ratio", "PUT", "/v1/admin/sources/caba/breaker", 200, jsonCT,
			`{"window": "1m0s", "min_calls": 10, "failure_ratio": 1.5, "consecutive_failures": 0, "open_for": "5s", "slow_call": "0s", "failure_statuses": [500]}`, false},
		{"dlq", "GET", "/v1/admin/dlq", 200, jsonCT,
			`{"entries": [{"id": "d1", "query_id": "q1", "callback_url": "https://hooks.example/x", "attempts": 5,
			  "last_error": "503", "created_at": "2026-03-14T09:12:00Z", "failed_at": "2026-03-14T09:13:00Z",
			  "payload": {"type": "query.completed", "timestamp": "2026-03-14T09:12:00Z",
			    "data": {"id": "q1", "status": "completed", "result": ` + validResult + `}}}]}`, true},
		{"redeliver", "POST", "/v1/admin/dlq/d1/redeliver", 202, nil, ``, true},
		{"delete", "DELETE", "/v1/admin/dlq/d1", 204, nil, ``, true},
		{"delete with a body", "DELETE", "/v1/admin/dlq/d1", 204, jsonCT, `{}`, false},
		{"dlq entry not found", "DELETE", "/v1/admin/dlq/d1", 404, problemCT, notFound, true},
		{"problem page", "GET", "/problems/circuit-open", 200,
			http.Header{"Content-Type": {"text/html; charset=utf-8"}}, "<!doctype html><title>x</title>", true},
		{"dashboard", "GET", "/", 200, http.Header{"Content-Type": {"text/html; charset=utf-8"}}, "<!doctype html>", true},
		{"dashboard as JSON", "GET", "/", 200, jsonCT, "{}", false},
		{"metrics", "GET", "/metrics", 200,
			http.Header{"Content-Type": {"text/plain; version=0.0.4; charset=utf-8"}}, "# HELP x\n", true},
		{"healthz", "GET", "/healthz", 200, jsonCT, `{"status": "ok"}`, true},
		{"readyz unavailable", "GET", "/readyz", 503, jsonCT,
			`{"status": "unavailable", "checks": {"redis": {"status": "unavailable"}}}`, true},
		{"readyz degraded", "GET", "/readyz", 200, jsonCT, `{"status": "degraded", "checks": {"redis": {"status": "degraded"}}}`, true},
		{"readyz with detail", "GET", "/readyz", 503, jsonCT,
			`{"status": "unavailable", "checks": {"redis": {"status": "unavailable", "detail": "dial tcp 10.0.0.7:6379: connection refused"}}}`, false},
		{"readyz with an address", "GET", "/readyz", 200, jsonCT,
			`{"status": "ok", "checks": {"redis": {"status": "ok"}}, "addr": "10.0.0.7:6379"}`, false},
		{"readyz status failed", "GET", "/readyz", 503, jsonCT, `{"status": "unavailable", "checks": {"redis": {"status": "failed"}}}`, false},
		{"admin readyz with detail", "GET", "/v1/admin/readyz", 200, jsonCT,
			`{"status": "unavailable", "checks": {"redis": {"status": "unavailable", "detail": "dial tcp 10.0.0.7:6379: connection refused"}}}`, true},
		{"overloaded", "GET", "/v1/sources", 503, with(problemCT, "Retry-After", "1", "Cache-Control", "no-store"),
			`{"type": "https://x.example/problems/overloaded", "title": "Overloaded", "status": 503, "retry_after": 1}`, true},
		{"overloaded query", "GET", "/v1/infractions", 503, with(problemCT, "Retry-After", "1", "Cache-Control", "no-store"),
			`{"type": "https://x.example/problems/overloaded", "title": "Overloaded", "status": 503, "retry_after": 1}`, true},
		{"overloaded without Retry-After", "GET", "/v1/sources", 503, with(problemCT, "Cache-Control", "no-store"),
			`{"type": "https://x.example/problems/overloaded", "title": "Overloaded", "status": 503, "retry_after": 1}`, false},
		{"voucher", "GET", "/v1/sources/caba/infractions/Q-1/voucher", 200, voucherHeaders, "%PDF-1.4", true},
		{"voucher without nosniff", "GET", "/v1/sources/caba/infractions/Q-1/voucher", 200, without(voucherHeaders, "X-Content-Type-Options"), "%PDF-1.4", false},
		{"voucher without CSP", "GET", "/v1/sources/caba/infractions/Q-1/voucher", 200, without(voucherHeaders, "Content-Security-Policy"), "%PDF-1.4", false},
		{"voucher inline", "GET", "/v1/sources/caba/infractions/Q-1/voucher", 200, with(voucherHeaders, "Content-Disposition", "inline"), "%PDF-1.4", false},
		{"voucher with a quote in its name", "GET", "/v1/sources/caba/infractions/Q-1/voucher", 200,
			with(voucherHeaders, "Content-Disposition", `attachment; filename="a"b.pdf"`), "%PDF-1.4", false},
		{"openapi", "GET", "/openapi.yaml", 200, http.Header{"Content-Type": {"application/yaml"}}, string(api.Spec), true},
		{"HEAD openapi", "HEAD", "/openapi.yaml", 200, http.Header{"Content-Type": {"application/yaml"}}, "", true},
		{"unknown path 404", "GET", "/nope", 404, problemCT, notFound, true},
		{"unknown path 404 not a problem", "GET", "/nope", 404, http.Header{"Content-Type": {"text/plain"}}, "404 page not found", false},
		{"unknown path 200", "GET", "/nope", 200, jsonCT, "{}", false},
		{"result without nosniff", "GET", "/v1/infractions?domain=AB123CD", 200, without(noStore, "X-Content-Type-Options"), validResult, false},
		{"problem without nosniff", "GET", "/v1/infractions", 400, without(problemCT, "X-Content-Type-Options"), invalidQuery, false},
		{"unknown path 404 without nosniff", "GET", "/nope", 404, without(problemCT, "X-Content-Type-Options"), notFound, false},
		{"healthz sniffable", "GET", "/healthz", 200, with(jsonCT, "X-Content-Type-Options", "sniff"), `{"status": "ok"}`, false},
		{"body too large", "POST", "/v1/queries", 413, with(problemCT, "Connection", "close"),
			`{"type": "https://x.example/problems/payload-too-large", "title": "Payload too large", "status": 413}`, true},
		{"body too large for the admin", "PUT", "/v1/admin/sources/caba/breaker", 413, problemCT,
			`{"type": "https://x.example/problems/payload-too-large", "title": "Payload too large", "status": 413}`, true},
		{"body late", "POST", "/v1/queries", 408, problemCT,
			`{"type": "https://x.example/problems/request-timeout", "title": "Request timeout", "status": 408}`, true},
		{"body late, not a problem", "PUT", "/v1/admin/sources/caba/breaker", 408, jsonCT, `{}`, false},
		{"known path, other method, 405", "DELETE", "/v1/queries/q1", 405, with(problemCT, "Allow", "GET"),
			`{"type": "https://x.example/problems/method-not-allowed", "title": "Method not allowed", "status": 405}`, true},
		{"405 without Allow", "PATCH", "/v1/infractions", 405, problemCT,
			`{"type": "https://x.example/problems/method-not-allowed", "title": "Method not allowed", "status": 405}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			// An httptest server's absolute URL: the host must not matter.
			req := httptest.NewRequest(c.method, "http://127.0.0.1:41234"+c.url, nil)
			r := &recorder{TB: t}
			v.Check(r, req, c.status, c.header, []byte(c.body))
			if c.ok && len(r.errors) > 0 {
				t.Errorf("Check rejected a valid answer:\n%s", strings.Join(r.errors, "\n"))
			}
			if !c.ok && len(r.errors) == 0 {
				t.Errorf("Check accepted an invalid answer")
			}
			for _, e := range r.errors {
				t.Log(e) // with -v: what Check reports
			}
		})
	}
}

// TestDomainTypesMatchSpec checks that the Go types of the domain package
// marshal to documents the spec accepts.
func TestDomainTypesMatchSpec(t *testing.T) {
	t.Parallel()
	v := apitest.New(t)
	cat := problem.Catalog{Base: "https://aggregator.example/problems/"}
	count, ms := 1, int64(41)
	open := cat.New(problem.CircuitOpen, "open")
	open.SetRetryAfter(17e9)
	res := aggregator.NewResult(aggregator.Query{Domain: "AB123CD"},
		[]aggregator.SourceResult{
			{Source: "caba", Jurisdiction: "CABA", Operation: aggregator.ByDomain, Status: aggregator.EntrySucceeded, Count: &count, DurationMS: &ms},
			{Source: "cordoba", Jurisdiction: "Córdoba", Operation: aggregator.ByDomain, Status: aggregator.EntrySkipped, Problem: open},
		},
		[]aggregator.Infraction{{Source: "caba", Jurisdiction: "CABA", ID: "Q-1", Amount: "10.00", Status: aggregator.Unpaid}})
	body, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest("GET", "/v1/infractions?domain=AB123CD", nil)
	v.Check(t, req, 200, http.Header{"Content-Type": {"application/json"}, "Cache-Control": {"no-store"}, "X-Content-Type-Options": {"nosniff"}}, body)

	bad := cat.New(problem.InvalidQuery, "bad")
	bad.InvalidParams = []problem.InvalidParam{{Name: "domain", Reason: "not a plate"}}
	body, err = json.Marshal(bad)
	if err != nil {
		t.Fatal(err)
	}
	v.Check(t, req, 400, http.Header{"Content-Type": {"application/problem+json"}, "X-Content-Type-Options": {"nosniff"}}, body)
}

func TestCheckRecorderAndResponse(t *testing.T) {
	t.Parallel()
	v := apitest.New(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write([]byte(`{"status": "ok"}`))
	})
	req := httptest.NewRequest("GET", "/healthz", nil)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	v.CheckRecorder(t, req, rec)

	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	if body := v.CheckResponse(t, resp); string(body) != `{"status": "ok"}` {
		t.Errorf("CheckResponse returned %q", body)
	}
}

// Every answer carries X-Request-Id (SPEC 10, Correlation): every response
// of every operation documents the header, and problem documents their
// request_id member.
func TestEveryResponseDocumentsRequestID(t *testing.T) {
	t.Parallel()
	doc := loadSpec(t)
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := 0
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for code, ref := range op.Responses.Map() {
				n++
				if ref.Value == nil || ref.Value.Headers["X-Request-Id"] == nil {
					t.Errorf("%s %s: response %s does not document X-Request-Id", method, path, code)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no response found")
	}
	if doc.Components.Schemas["Problem"].Value.Properties["request_id"] == nil {
		t.Error("the Problem schema lacks request_id")
	}
}

// The request_id member and the X-Request-Id header are checked when
// present: 1 to 128 visible ASCII characters.
func TestCheckRequestID(t *testing.T) {
	t.Parallel()
	v := apitest.New(t)
	req := httptest.NewRequest("GET", "/nope", nil)
	problemWith := func(id string) []byte {
		b, _ := json.Marshal(map[string]any{"type": "https://x.example/problems/not-found", "title": "Not found", "status": 404, "request_id": id})
		return b
	}
	tests := []struct {
		name   string
		header string
		body   []byte
		ok     bool
	}{
		{"id in header and body", "abc-123", problemWith("abc-123"), true},
		{"id of 128 characters", strings.Repeat("a", 128), problemWith(strings.Repeat("a", 128)), true},
		{"empty request_id", "abc", problemWith(""), false},
		{"request_id with a space", "abc", problemWith("a b"), false},
		{"request_id too long", "abc", problemWith(strings.Repeat("a", 129)), false},
	}
	for _, tt := range tests {
		r := &recorder{TB: t}
		h := http.Header{"Content-Type": {"application/problem+json"}, "X-Content-Type-Options": {"nosniff"}, "X-Request-Id": {tt.header}}
		v.Check(r, req, 404, h, tt.body)
		if tt.ok != (len(r.errors) == 0) {
			t.Errorf("%s: ok %v, errors %v", tt.name, tt.ok, r.errors)
		}
	}
	// A documented header is validated on a routed answer.
	r := &recorder{TB: t}
	v.Check(r, httptest.NewRequest("GET", "/healthz", nil), 200,
		http.Header{"Content-Type": {"application/json"}, "X-Content-Type-Options": {"nosniff"}, "X-Request-Id": {"two words"}}, []byte(`{"status": "ok"}`))
	if len(r.errors) == 0 {
		t.Error("an X-Request-Id with a space was accepted")
	}
}

// The events of streamed answers (SPEC 14) are checked one by one: the
// SSE framing, and each event's data against the schema of its media
// type.
func TestCheckStream(t *testing.T) {
	t.Parallel()
	v := apitest.New(t)
	const (
		src = `{"type":"source","source":"caba","jurisdiction":"CABA","operation":"by_domain","status":"succeeded","count":1,"duration_ms":4,` +
			`"infractions":[{"source":"caba","jurisdiction":"CABA","id":"Q-1","status":"unpaid"}]}`
		failed = `{"type":"source","source":"pba","jurisdiction":"PBA","operation":"by_domain","status":"failed",` +
			`"problem":{"type":"https://x.example/problems/deadline-exceeded","title":"Query deadline exceeded","status":504},"infractions":[]}`
		sum  = `{"type":"summary","query":{"domain":"AB123CD"},"complete":false,"summary":{"total":2,"succeeded":1,"failed":1,"skipped":0,"stale":0}}`
		none = `{"type":"summary","query":{"domain":"AB123CD"},"complete":false,"summary":{"total":1,"succeeded":0,"failed":1,"skipped":0,"stale":0},` +
			`"problem":{"type":"https://x.example/problems/no-source-available","title":"No source available","status":503}}`
	)
	sse := func(retry bool, events ...string) string {
		var b strings.Builder
		if retry {
			b.WriteString("retry: 86400000\n")
		}
		for i, data := range events {
			var head struct{ Type string }
			_ = json.Unmarshal([]byte(data), &head)
			fmt.Fprintf(&b, "id: %d\nevent: %s\ndata: %s\n\n", i+1, head.Type, data)
		}
		return b.String()
	}
	ndjson := func(events ...string) string { return strings.Join(events, "\n") + "\n" }
	header := func(ct string) http.Header {
		return http.Header{"Content-Type": {ct}, "Cache-Control": {"no-store"}}
	}
	tests := []struct {
		name, ct, body string
		ok             bool
	}{
		{"sse", apitest.EventStream, sse(true, src, failed, sum), true},
		{"sse, nothing answered", apitest.EventStream, sse(true, failed, none), true},
		{"ndjson", apitest.NDJSON, ndjson(src, failed, sum), true},
		{"ndjson, only the summary", apitest.NDJSON, ndjson(sum), true},
		{"sse without retry", apitest.EventStream, sse(false, src, sum), false},
		{"sse with a short retry", apitest.EventStream, strings.Replace(sse(true, src, sum), "86400000", "3000", 1), false},
		{"sse ids out of order", apitest.EventStream, strings.Replace(sse(true, src, failed, sum), "id: 2", "id: 3", 1), false},
		{"sse event misnamed", apitest.EventStream, strings.Replace(sse(true, src, sum), "event: source", "event: message", 1), false},
		{"sse event without id", apitest.EventStream, strings.Replace(sse(true, src, sum), "id: 1\n", "", 1), false},
		{"sse data over two lines", apitest.EventStream, strings.Replace(sse(true, src, sum), `"count":1,`, "\"count\":1,\ndata: ", 1), false},
		{"no summary", apitest.NDJSON, ndjson(src, failed), false},
		{"an event after the summary", apitest.NDJSON, ndjson(src, sum, failed), false},
		{"empty", apitest.NDJSON, "", false},
		{"not JSON", apitest.NDJSON, ndjson("{", sum), false},
		{"unknown type", apitest.NDJSON, ndjson(strings.Replace(src, `"type":"source"`, `"type":"other"`, 1), sum), false},
		{"source without infractions", apitest.NDJSON, ndjson(strings.Replace(src, `,"infractions":[{"source":"caba","jurisdiction":"CABA","id":"Q-1","status":"unpaid"}]`, "", 1), sum), false},
		{"failed source without its problem", apitest.NDJSON, ndjson(strings.Replace(failed, `"problem"`, `"trouble"`, 1), sum), false},
		{"summary without counts", apitest.NDJSON, ndjson(src, strings.Replace(sum, `"summary":`, `"totals":`, 1)), false},
		{"summary with another problem", apitest.NDJSON, ndjson(failed, strings.Replace(none, "no-source-available", "internal", 1)), false},
		{"a line cut off", apitest.NDJSON, strings.TrimSuffix(ndjson(src, sum), "\n"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest("GET", "/v1/infractions?domain=AB123CD", nil)
			r := &recorder{TB: t}
			v.Check(r, req, 200, header(tt.ct), []byte(tt.body))
			if tt.ok && len(r.errors) > 0 {
				t.Errorf("Check rejected a valid stream:\n%s", strings.Join(r.errors, "\n"))
			}
			if !tt.ok && len(r.errors) == 0 {
				t.Errorf("Check accepted an invalid stream")
			}
			for _, e := range r.errors {
				t.Log(e)
			}
		})
	}
}
