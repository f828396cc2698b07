package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// TestOAuth2RefusedNeverTrips: a token endpoint that refuses the client's
// credentials makes every query's entry source-rejected, a configuration
// problem: the breaker never counts it, however many queries come, and the
// portal's API is never called (SPEC 8).
func TestOAuth2RefusedNeverTrips(t *testing.T) {
	t.Parallel()
	var tokenCalls atomic.Int64
	p := newPortal(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			tokenCalls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error": "invalid_client"}`)
			return
		}
		one("P-1").ServeHTTP(w, r)
	}))
	e := startWith(t, source{id: "p", url: p.URL, extra: []string{
		fmt.Sprintf(`auth: {oauth2: {token_url: "%s/oauth/token", client_id: cliente, client_secret: "no-es-este"}}`, p.URL),
		"breaker: {min_calls: 2, failure_ratio: 0.5, consecutive_failures: 2}",
	}})
	for i := range 8 {
		a := e.byDomain(plateN(i))
		en := a.entry(t, "p")
		checkEntry(t, en, "failed", "source-rejected")
		if en.Problem != nil && !strings.Contains(en.Problem.Detail, "token endpoint") {
			t.Errorf("detail %q does not name the token endpoint", en.Problem.Detail)
		}
		if en.Problem != nil && (strings.Contains(en.Problem.Detail, "no-es-este") || strings.Contains(en.Problem.Detail, plateN(i))) {
			t.Errorf("detail %q carries the secret or the plate", en.Problem.Detail)
		}
	}
	if b := e.breaker("p", "by_domain"); b.State != "closed" || b.Window.Failures != 0 {
		t.Errorf("breaker %s with %d failures, want closed with 0", b.State, b.Window.Failures)
	}
	if got := tokenCalls.Load(); got != 8 {
		t.Errorf("token endpoint asked %d times, want 8 (once per query)", got)
	}
	if got := p.calls() - int(tokenCalls.Load()); got != 0 {
		t.Errorf("API called %d times, want 0", got)
	}
}

// TestOAuth2FailingTokenEndpointCounts: a token endpoint that fails (503)
// is the portal failing: source-unavailable, counted, and the breaker
// opens (SPEC 8).
func TestOAuth2FailingTokenEndpointCounts(t *testing.T) {
	t.Parallel()
	p := newPortal(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/oauth/token" {
			status(http.StatusServiceUnavailable).ServeHTTP(w, r)
			return
		}
		one("P-1").ServeHTTP(w, r)
	}))
	e := startWith(t, source{id: "p", url: p.URL, extra: []string{
		fmt.Sprintf(`auth: {oauth2: {token_url: "%s/oauth/token", client_id: cliente, client_secret: "no-es-este"}}`, p.URL),
		"breaker: {min_calls: 2, failure_ratio: 0.5, consecutive_failures: 2, open_for: 1m}",
	}})
	for i := range 2 {
		checkEntry(t, e.byDomain(plateN(i)).entry(t, "p"), "failed", "source-unavailable")
	}
	if b := e.breaker("p", "by_domain"); b.State != "open" {
		t.Errorf("breaker %s, want open after two counted failures", b.State)
	}
	checkEntry(t, e.byDomain(plateN(3)).entry(t, "p"), "skipped", "circuit-open")
}
