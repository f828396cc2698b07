package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
)

// TestProblems checks that errors are application/problem+json with a type
// that is the base URI followed by the slug, literally (SPEC 5), and that
// each type has its page.
func TestProblems(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("Q-1"))
	e := startWith(t, source{id: "caba", url: p.URL})

	tests := []struct {
		name       string
		method     string
		path       string
		wantStatus int
		wantSlug   string
	}{
		{"unknown route", http.MethodGet, "/v1/nothing-here", http.StatusNotFound, "not-found"},
		{"unknown route at the root", http.MethodGet, "/favicon.ico", http.StatusNotFound, "not-found"},
		{"unknown problem page", http.MethodGet, "/problems/no-such-slug", http.StatusNotFound, "not-found"},
		{"wrong method on a query", http.MethodPost, "/v1/infractions?domain=" + plate, http.StatusMethodNotAllowed, "method-not-allowed"},
		{"wrong method on coverage", http.MethodDelete, "/v1/sources", http.StatusMethodNotAllowed, "method-not-allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, body := e.do(tt.method, tt.path, nil, "")
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("got status %d, want %d", resp.StatusCode, tt.wantStatus)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type: got %q, want application/problem+json", ct)
			}
			var pd problemDoc
			if err := json.Unmarshal(body, &pd); err != nil {
				t.Fatalf("decoding %s: %v", body, err)
			}
			checkType(t, pd, tt.wantSlug)
			if pd.Status != tt.wantStatus || pd.Title == "" {
				t.Errorf("problem: got status %d, title %q; want %d and a title", pd.Status, pd.Title, tt.wantStatus)
			}
			if tt.wantStatus == http.StatusMethodNotAllowed {
				if allow := resp.Header.Get("Allow"); !strings.Contains(allow, http.MethodGet) {
					t.Errorf("Allow: got %q, want it to list GET", allow)
				}
			}
		})
	}
	if n := p.calls(); n != 0 {
		t.Errorf("portal received %d calls, want 0", n)
	}

	// Every slug of SPEC 5 has a human-readable page naming its type.
	for _, slug := range []string{"circuit-open", "rate-limited", "source-timeout", "source-unavailable",
		"source-rejected", "source-error", "deadline-exceeded", "no-source-available", "invalid-query",
		"unauthorized", "forbidden", "not-found", "too-many-requests", "internal"} {
		resp, body := e.get("/problems/" + slug)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET /problems/%s: got status %d, want 200", slug, resp.StatusCode)
			continue
		}
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
			t.Errorf("GET /problems/%s: Content-Type %q, want text/html", slug, ct)
		}
		if !strings.Contains(string(body), baseURI+slug) {
			t.Errorf("GET /problems/%s: the page does not name its type %s", slug, baseURI+slug)
		}
	}
}

// TestProblemBaseURI checks that the type is the configured base followed
// literally by the slug, whatever the base's shape: nothing is added or
// resolved.
func TestProblemBaseURI(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("Q-1"))
	const base = "https://docs.multas.test/errors#"
	text := strings.Replace(configYAML(adminToken, source{id: "caba", url: p.URL}), baseURI, base, 1)
	cfg, err := config.Parse([]byte(text), "e2e.yaml", nil)
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	e := start(t, cfg, app.Options{})
	e.forceOpen("caba", "by_domain")

	a := e.byDomain(plate)
	if want := base + "no-source-available"; a.problem.Type != want {
		t.Errorf("type: got %q, want %q", a.problem.Type, want)
	}
	if en := a.entry(t, "caba"); en.Problem == nil || en.Problem.Type != base+"circuit-open" {
		t.Errorf("entry problem: got %+v, want type %s", en.Problem, base+"circuit-open")
	}
	a = e.query("domain=nope")
	if want := base + "invalid-query"; a.problem.Type != want {
		t.Errorf("type: got %q, want %q", a.problem.Type, want)
	}
}
