package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
)

// events reads GET /v1/admin/events, with ?since= when since is not zero.
func (e *env) events(since time.Time) []event {
	e.t.Helper()
	path := "/events"
	if !since.IsZero() {
		path += "?since=" + url.QueryEscape(since.Format(time.RFC3339Nano))
	}
	resp, body := e.admin(http.MethodGet, path, "")
	var doc struct {
		Events []event `json:"events"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &doc) != nil {
		e.t.Fatalf("GET /v1/admin%s: got %d %s", path, resp.StatusCode, body)
	}
	return doc.Events
}

// TestAdminAuth checks the admin surface's guard (SPEC 7): closed to all
// without a configured token, 401 with a challenge for a wrong one.
func TestAdminAuth(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("Q-1"))
	closed := start(t, newConfig(t, "", source{id: "caba", url: p.URL}), app.Options{})
	open := startWith(t, source{id: "caba", url: p.URL})

	tests := []struct {
		name       string
		e          *env
		method     string
		path       string
		auth       string
		wantStatus int
		wantSlug   string
	}{
		{"no token configured", closed, http.MethodGet, "/v1/admin/breakers", "", http.StatusForbidden, "forbidden"},
		{"no token configured, any bearer", closed, http.MethodGet, "/v1/admin/breakers", "Bearer " + adminToken, http.StatusForbidden, "forbidden"},
		{"no token configured, empty bearer", closed, http.MethodPost, "/v1/admin/breakers/caba/by_domain/open", "Bearer ", http.StatusForbidden, "forbidden"},
		{"missing token", open, http.MethodGet, "/v1/admin/breakers", "", http.StatusUnauthorized, "unauthorized"},
		{"wrong token", open, http.MethodGet, "/v1/admin/events", "Bearer nope", http.StatusUnauthorized, "unauthorized"},
		{"token as a prefix", open, http.MethodGet, "/v1/admin/breakers", "Bearer " + adminToken[:5], http.StatusUnauthorized, "unauthorized"},
		{"not a bearer", open, http.MethodPost, "/v1/admin/breakers/caba/by_domain/open", "Basic " + adminToken, http.StatusUnauthorized, "unauthorized"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			if tt.auth != "" {
				h.Set("Authorization", tt.auth)
			}
			resp, body := tt.e.do(tt.method, tt.path, h, "")
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("got status %d, want %d (%s)", resp.StatusCode, tt.wantStatus, body)
			}
			var pd problemDoc
			if err := json.Unmarshal(body, &pd); err != nil {
				t.Fatalf("decoding %s: %v", body, err)
			}
			checkType(t, pd, tt.wantSlug)
			challenge := resp.Header.Get("WWW-Authenticate")
			if tt.wantStatus == http.StatusUnauthorized && !strings.HasPrefix(challenge, "Bearer") {
				t.Errorf("WWW-Authenticate: got %q, want a Bearer challenge", challenge)
			}
		})
	}
	// Nothing got through: the breaker was never forced open.
	if st := open.breaker("caba", "by_domain").State; st != "closed" {
		t.Errorf("caba/by_domain: %s, want closed", st)
	}
}

// TestAdminBreakers checks the breakers' list from start-up, forced open and
// reset, and settings changed at run time (SPEC 7).
func TestAdminBreakers(t *testing.T) {
	t.Parallel()
	a, b, c := newPortal(t, one("A-1")), newPortal(t, status(http.StatusServiceUnavailable)), newPortal(t, status(http.StatusServiceUnavailable))
	e := startWith(t,
		source{id: "a", url: a.URL},
		source{id: "b", url: b.URL, key: "plat", ops: `{by_domain: {path: "/actas?dominio={domain}"}}`,
			extra: []string{"breaker: {open_for: 5s}"}},
		source{id: "c", url: c.URL, key: "plat", ops: `{by_domain: {path: "/actas?dominio={domain}"}, by_id: {path: "/personas/{id}"}}`,
			extra: []string{"breaker: {open_for: 5s}"}},
	)

	// Every configured (breaker_key, operation) is listed before any traffic.
	var got []string
	for _, bv := range e.breakers() {
		got = append(got, fmt.Sprintf("%s/%s%v", bv.BreakerKey, bv.Operation, bv.Sources))
		if bv.State != "closed" || bv.Window.Calls != 0 || bv.LastTransition != nil || bv.OpenSecondsTotal != 0 {
			t.Errorf("%s/%s at start: %+v, want closed, empty, without transitions", bv.BreakerKey, bv.Operation, bv)
		}
		if bv.Settings["min_calls"] != 4.0 || bv.Settings["window"] != "10s" {
			t.Errorf("%s/%s settings: got %v, want min_calls 4, window 10s", bv.BreakerKey, bv.Operation, bv.Settings)
		}
	}
	want := []string{"a/by_domain[a]", "a/by_id[a]", "a/voucher[a]", "plat/by_domain[b c]", "plat/by_id[c]"}
	if !slices.Equal(got, want) {
		t.Errorf("breakers at start: got %q, want %q", got, want)
	}
	_, metrics := e.get("/metrics")
	for _, w := range want {
		key, op, _ := strings.Cut(w[:strings.Index(w, "[")], "/")
		if line := fmt.Sprintf("aggregator_breaker_state{breaker=%q,operation=%q} 0\n", key, op); !strings.Contains(string(metrics), line) {
			t.Errorf("/metrics at start: no %q", line)
		}
	}

	// Forced open until reset.
	resp, body := e.admin(http.MethodPost, "/breakers/a/by_domain/open", "")
	var bv breakerView
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &bv) != nil || bv.State != "forced_open" {
		t.Errorf("open: got %d %s, want 200 and forced_open", resp.StatusCode, body)
	}
	en := e.byDomain(plate, "sources=a").entry(t, "a")
	checkEntry(t, en, "skipped", "circuit-open")
	if ra := retryAfter(en.Problem); ra != 1 {
		t.Errorf("forced open retry_after: got %d, want 1 (open_for 300ms)", ra)
	}
	resp, body = e.admin(http.MethodPost, "/breakers/a/by_domain/reset", "")
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &bv) != nil || bv.State != "closed" {
		t.Errorf("reset: got %d %s, want 200 and closed", resp.StatusCode, body)
	}
	checkEntry(t, e.byDomain(plate, "sources=a").entry(t, "a"), "succeeded", "")
	if n := a.calls(); n != 1 {
		t.Errorf("portal a received %d calls, want 1 (none while forced open)", n)
	}
	for _, path := range []string{"/breakers/nope/by_domain/reset", "/breakers/a/by_plate/open"} {
		if resp, _ := e.admin(http.MethodPost, path, ""); resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST %s: got %d, want 404", path, resp.StatusCode)
		}
	}

	// Settings changed at run time apply to every source of the key, from
	// the next call.
	resp, body = e.admin(http.MethodPut, "/sources/b/breaker", `{"min_calls": 2}`)
	var settings map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &settings) != nil {
		t.Fatalf("PUT: got %d %s, want 200", resp.StatusCode, body)
	}
	if settings["min_calls"] != 2.0 || settings["failure_ratio"] != 0.5 || settings["open_for"] != "5s" || settings["window"] != "10s" {
		t.Errorf("PUT answered %v, want the effective settings: min_calls 2, failure_ratio 0.5, open_for 5s, window 10s", settings)
	}
	for _, op := range []string{"by_domain", "by_id"} {
		if got := e.breaker("plat", op).Settings["min_calls"]; got != 2.0 {
			t.Errorf("plat/%s min_calls: got %v, want 2", op, got)
		}
	}
	r := e.byDomain(plate, "sources=b,c")
	checkEntry(t, r.entry(t, "b"), "failed", "source-unavailable")
	checkEntry(t, r.entry(t, "c"), "failed", "source-unavailable")
	if bv := e.breaker("plat", "by_domain"); bv.State != "open" {
		t.Errorf("plat/by_domain after 2 failures with min_calls 2: %s, want open", bv.State)
	}
	checkEntry(t, e.byDomain(plate, "sources=b").entry(t, "b"), "skipped", "circuit-open")
	if nb, nc := b.calls(), c.calls(); nb != 1 || nc != 1 {
		t.Errorf("portals received %d and %d calls, want 1 and 1", nb, nc)
	}

	for _, tt := range []struct{ body, want string }{
		{`{"failure_ratio": 2}`, "failure_ratio"},
		{`{"open_for": "-1s"}`, "open_for"},
		{`{"min_calls": "many"}`, ""},
		{`{"no_such_key": 1}`, ""},
		{`not json`, ""},
	} {
		resp, body := e.admin(http.MethodPut, "/sources/b/breaker", tt.body)
		var pd problemDoc
		if resp.StatusCode != http.StatusBadRequest || json.Unmarshal(body, &pd) != nil {
			t.Errorf("PUT %s: got %d %s, want 400", tt.body, resp.StatusCode, body)
			continue
		}
		checkType(t, pd, "invalid-query")
		if len(pd.InvalidParams) == 0 || (tt.want != "" && !slices.Contains(paramNames(pd), tt.want)) {
			t.Errorf("PUT %s: invalid_params %+v, want one naming %q", tt.body, pd.InvalidParams, tt.want)
		}
	}
	if got := e.breaker("plat", "by_domain").Settings["min_calls"]; got != 2.0 {
		t.Errorf("after invalid PUTs, min_calls: got %v, want 2 (unchanged)", got)
	}
	if resp, _ := e.admin(http.MethodPut, "/sources/nope/breaker", `{"min_calls": 2}`); resp.StatusCode != http.StatusNotFound {
		t.Errorf("PUT for an unknown source: got %d, want 404", resp.StatusCode)
	}
}

// TestAdminEvents checks GET /v1/admin/events: every transition with its
// evidence, oldest first, strictly after since (SPEC 7).
func TestAdminEvents(t *testing.T) {
	t.Parallel()
	a, b := newPortal(t, status(http.StatusBadGateway)), newPortal(t, one("B-1"))
	e := startWith(t, source{id: "a", url: a.URL}, source{id: "b", url: b.URL})
	if evs := e.events(time.Time{}); len(evs) != 0 {
		t.Errorf("events before any transition: got %+v, want none", evs)
	}

	// a/by_domain trips (and turns half-open after 300ms, unobserved).
	for i := range 4 {
		e.byDomain(plateN(i), "sources=a")
	}
	// b/by_domain is forced open once a's open time has passed, then reset.
	time.Sleep(600 * time.Millisecond)
	e.forceOpen("b", "by_domain")
	if resp, body := e.admin(http.MethodPost, "/breakers/b/by_domain/reset", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("reset: got %d %s", resp.StatusCode, body)
	}
	// Reading the breakers observes a's half-open transition, which
	// happened before b's.
	if st := e.breaker("a", "by_domain").State; st != "half_open" {
		t.Errorf("a/by_domain: %s, want half_open", st)
	}

	all := e.events(time.Time{})
	var got []string
	for i, ev := range all {
		got = append(got, fmt.Sprintf("%s/%s %s→%s", ev.BreakerKey, ev.Operation, ev.From, ev.To))
		if ev.Reason == "" || ev.Time.IsZero() {
			t.Errorf("event %d: %+v, want a time and a reason", i, ev)
		}
		if i > 0 && ev.Time.Before(all[i-1].Time) {
			t.Errorf("event %d (%s) is older than event %d (%s): want oldest first", i, ev.Time, i-1, all[i-1].Time)
		}
	}
	want := []string{"a/by_domain closed→open", "a/by_domain open→half_open", "b/by_domain closed→forced_open", "b/by_domain forced_open→closed"}
	if !slices.Equal(got, want) {
		t.Fatalf("events: got %q, want %q", got, want)
	}
	if ev := all[0].Evidence; ev["calls"] != 4 || ev["failures"] != 4 || ev["ratio"] != 1 || ev["window_seconds"] != 10 {
		t.Errorf("trip evidence: got %v, want 4 calls, 4 failures, ratio 1, window 10s", ev)
	}
	if !strings.Contains(all[3].Reason, "manual reset") {
		t.Errorf("reset reason: got %q, want it to say manual reset", all[3].Reason)
	}

	// since is strict: the events after the first, in the same order.
	for i := range all {
		after := e.events(all[i].Time)
		if len(after) != len(all)-i-1 {
			t.Errorf("since event %d: got %d events, want %d", i, len(after), len(all)-i-1)
			continue
		}
		for j := range after {
			if !after[j].Time.Equal(all[i+1+j].Time) || after[j].To != all[i+1+j].To {
				t.Errorf("since event %d: event %d is %+v, want %+v", i, j, after[j], all[i+1+j])
			}
		}
	}
	if resp, body := e.admin(http.MethodGet, "/events?since=yesterday", ""); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("since=yesterday: got %d %s, want 400", resp.StatusCode, body)
	}
}
