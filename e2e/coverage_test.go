package e2e

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"testing"
)

// coverage reads GET /v1/sources as {source: {operation: available}}, and
// the jurisdictions by source.
func (e *env) coverage() (ops map[string]map[string]bool, jurisdictions map[string]string) {
	e.t.Helper()
	resp, body := e.get("/v1/sources")
	var doc struct {
		Sources []struct {
			ID           string `json:"id"`
			Jurisdiction string `json:"jurisdiction"`
			Operations   map[string]struct {
				Available bool `json:"available"`
			} `json:"operations"`
		} `json:"sources"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &doc) != nil {
		e.t.Fatalf("GET /v1/sources: got %d %s", resp.StatusCode, body)
	}
	ops, jurisdictions = map[string]map[string]bool{}, map[string]string{}
	for _, s := range doc.Sources {
		ops[s.ID] = map[string]bool{}
		for op, o := range s.Operations {
			ops[s.ID][op] = o.Available
		}
		jurisdictions[s.ID] = s.Jurisdiction
	}
	return ops, jurisdictions
}

// TestCoverage checks GET /v1/sources (SPEC 3.3): the operations of each
// source, unavailable while their breaker is open or forced open, or the
// source is paused.
func TestCoverage(t *testing.T) {
	t.Parallel()
	a := newPortal(t, one("A-1"))
	b := newPortal(t, status(http.StatusServiceUnavailable))
	c := newPortal(t, status(http.StatusTooManyRequests, "Retry-After", "30"))
	e := startWith(t,
		source{id: "a", url: a.URL},
		source{id: "b", url: b.URL, ops: `{by_domain: {path: "/actas?dominio={domain}"}}`,
			extra: []string{"breaker: {min_calls: 1, open_for: 5s}"}},
		source{id: "c", url: c.URL, ops: `{by_domain: {path: "/actas?dominio={domain}"}, voucher: {path: "/actas/{infraction_id}/boleta"}}`},
	)
	check := func(step string, want map[string]map[string]bool) {
		t.Helper()
		got, _ := e.coverage()
		if !maps.EqualFunc(got, want, maps.Equal) {
			t.Errorf("%s: got %v, want %v", step, got, want)
		}
	}

	ops, jurisdictions := e.coverage()
	if want := map[string]string{"a": "Jurisdicción a", "b": "Jurisdicción b", "c": "Jurisdicción c"}; !maps.Equal(jurisdictions, want) {
		t.Errorf("jurisdictions: got %v, want %v", jurisdictions, want)
	}
	for id, want := range map[string][]string{"a": {"by_domain", "by_id", "voucher"}, "b": {"by_domain"}, "c": {"by_domain", "voucher"}} {
		if got := slices.Sorted(maps.Keys(ops[id])); !slices.Equal(got, want) {
			t.Errorf("operations of %s: got %q, want %q", id, got, want)
		}
	}
	check("at start", map[string]map[string]bool{
		"a": {"by_domain": true, "by_id": true, "voucher": true},
		"b": {"by_domain": true},
		"c": {"by_domain": true, "voucher": true},
	})

	e.forceOpen("a", "by_id")
	checkEntry(t, e.byDomain(plate, "sources=b").entry(t, "b"), "failed", "source-unavailable")
	en := e.byDomain(plate, "sources=c").entry(t, "c")
	checkEntry(t, en, "failed", "rate-limited")
	if ra := retryAfter(en.Problem); ra != 30 {
		t.Errorf("429 with Retry-After 30: retry_after %d, want 30", ra)
	}
	check("a/by_id forced open, b/by_domain open, c paused", map[string]map[string]bool{
		"a": {"by_domain": true, "by_id": false, "voucher": true},
		"b": {"by_domain": false},
		"c": {"by_domain": false, "voucher": false},
	})
	if st := e.breaker("c", "by_domain").State; st != "closed" {
		t.Errorf("c/by_domain: %s, want closed (a pause is not an open breaker)", st)
	}

	if resp, body := e.admin(http.MethodPost, "/breakers/a/by_id/reset", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("reset: got %d %s", resp.StatusCode, body)
	}
	check("a/by_id reset", map[string]map[string]bool{
		"a": {"by_domain": true, "by_id": true, "voucher": true},
		"b": {"by_domain": false},
		"c": {"by_domain": false, "voucher": false},
	})
	if na, nb, nc := a.calls(), b.calls(), c.calls(); na != 0 || nb != 1 || nc != 1 {
		t.Errorf("portals received %d, %d, %d calls, want 0, 1, 1", na, nb, nc)
	}
}
