package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/multas/aggregator/internal/apitest"
	"github.com/multas/aggregator/server"
)

// unknownAdmin are requests under /v1/admin (and /debug/pprof) that no
// admin route serves: unknown paths, and known ones with a method they do
// not take.
var unknownAdmin = []struct {
	method, path string
	known        bool // the path exists with another method: 405 once authenticated
}{
	{http.MethodGet, "/v1/admin", false},
	{http.MethodGet, "/v1/admin/", false},
	{http.MethodGet, "/v1/admin/nope", false},
	{http.MethodGet, "/v1/admin/config", false},
	{http.MethodGet, "/v1/admin/breakers/caba", false},
	{http.MethodGet, "/v1/admin/breakers/caba/by_domain/reset/x", false},
	{http.MethodGet, "/v1/admin/%62reakers", false},
	{http.MethodPost, "/v1/admin/secrets", false},
	{http.MethodDelete, "/v1/admin/breakers", true},
	{http.MethodGet, "/v1/admin/breakers/caba/by_domain/reset", true},
	{http.MethodPut, "/v1/admin/dlq", true},
	{http.MethodGet, "/debug/pprof/nope", false},
	{http.MethodGet, "/debug/pprof/heap/x", false},
	{http.MethodPost, "/debug/pprof/symbol", true},
}

// Unauthenticated callers cannot map the admin surface (SPEC 9): an unknown
// /v1/admin path, or a known one with another method, answers exactly as a
// known admin route does, 403 with no admin token configured and 401 with
// a Bearer challenge without the token; only with it is it a 404 (or 405).
// Paths outside /v1/admin are not affected.
func TestUnknownAdminPaths(t *testing.T) {
	closed := httptest.NewServer(server.New(server.Options{}))
	t.Cleanup(closed.Close)
	_, open := fuzzApp(t)
	v := apitest.New(t)

	do := func(t *testing.T, base, method, path, auth string) (*http.Response, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body := v.CheckResponse(t, resp)
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil {
			t.Errorf("%s %s: %v: %s", method, path, err, body)
		}
		return resp, doc
	}
	slug := func(doc map[string]any) string {
		s, _ := doc["type"].(string)
		return s[strings.LastIndexByte(s, '/')+1:]
	}
	for _, r := range unknownAdmin {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			for _, auth := range []string{"", "Bearer " + fuzzAdminToken} {
				if resp, doc := do(t, closed.URL, r.method, r.path, auth); resp.StatusCode != http.StatusForbidden || slug(doc) != "forbidden" {
					t.Errorf("no admin token configured, Authorization %q: got %d %v, want 403 forbidden", auth, resp.StatusCode, doc)
				}
			}
			for _, auth := range []string{"", "Bearer x", "Basic " + fuzzAdminToken} {
				resp, doc := do(t, open.URL, r.method, r.path, auth)
				if resp.StatusCode != http.StatusUnauthorized || slug(doc) != "unauthorized" {
					t.Errorf("Authorization %q: got %d %v, want 401 unauthorized", auth, resp.StatusCode, doc)
				}
				if ch := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, "Bearer") {
					t.Errorf("Authorization %q: WWW-Authenticate %q, want a Bearer challenge", auth, ch)
				}
				if resp.Header.Get("Allow") != "" {
					t.Errorf("Authorization %q: an Allow header tells the route exists", auth)
				}
			}
			want, wantSlug := http.StatusNotFound, "not-found"
			if r.known {
				want, wantSlug = http.StatusMethodNotAllowed, "method-not-allowed"
			}
			if resp, doc := do(t, open.URL, r.method, r.path, "Bearer "+fuzzAdminToken); resp.StatusCode != want || slug(doc) != wantSlug {
				t.Errorf("with the admin token: got %d %v, want %d %s", resp.StatusCode, doc, want, wantSlug)
			}
		})
	}
	for _, path := range []string{"/v1/nope", "/v1/administrator-x", "/nowhere"} {
		if resp, doc := do(t, open.URL, http.MethodGet, path, ""); resp.StatusCode != http.StatusNotFound || slug(doc) != "not-found" {
			t.Errorf("GET %s: got %d %v, want 404", path, resp.StatusCode, doc)
		}
	}
}

// GET /readyz tells each check's state and nothing else: no address, no
// error text, whatever the checks' errors say; GET /v1/admin/readyz, for
// the admin token only, has the error text.
func TestReadyzDetailForAdminsOnly(t *testing.T) {
	const secretish = "dial tcp 10.1.2.3:6379: connect: connection refused"
	tests := []struct {
		name       string
		check      error
		status     string
		code       int
		checkState string
	}{
		{"ok", nil, "ok", http.StatusOK, "ok"},
		{"degraded", server.Degraded(errorString(secretish)), "degraded", http.StatusOK, "degraded"},
		{"unavailable", errorString(secretish), "unavailable", http.StatusServiceUnavailable, "unavailable"},
	}
	v := apitest.New(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(server.New(server.Options{
				AdminToken: "admin-token",
				Ready:      map[string]func(context.Context) error{"redis": func(context.Context) error { return tt.check }},
			}))
			t.Cleanup(srv.Close)
			resp, err := http.Get(srv.URL + "/readyz")
			if err != nil {
				t.Fatal(err)
			}
			body := v.CheckResponse(t, resp)
			var doc struct {
				Status string                       `json:"status"`
				Checks map[string]map[string]string `json:"checks"`
			}
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tt.code || doc.Status != tt.status || len(doc.Checks) != 1 ||
				len(doc.Checks["redis"]) != 1 || doc.Checks["redis"]["status"] != tt.checkState {
				t.Errorf("GET /readyz: %d %s, want %d with status %s and redis %s only", resp.StatusCode, body, tt.code, tt.status, tt.checkState)
			}
			for _, leak := range []string{"10.1.2.3", "6379", "dial", "refused", "detail"} {
				if strings.Contains(string(body), leak) {
					t.Errorf("GET /readyz tells %q: %s", leak, body)
				}
			}

			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/admin/readyz", nil)
			if resp, err = http.DefaultClient.Do(req); err != nil {
				t.Fatal(err)
			}
			if body := v.CheckResponse(t, resp); resp.StatusCode != http.StatusUnauthorized || strings.Contains(string(body), "10.1.2.3") {
				t.Errorf("GET /v1/admin/readyz without the token: %d %s, want 401", resp.StatusCode, body)
			}
			req.Header.Set("Authorization", "Bearer admin-token")
			if resp, err = http.DefaultClient.Do(req); err != nil {
				t.Fatal(err)
			}
			body = v.CheckResponse(t, resp)
			if err := json.Unmarshal(body, &doc); err != nil {
				t.Fatal(err)
			}
			wantDetail := secretish
			if tt.check == nil {
				wantDetail = ""
			}
			if resp.StatusCode != http.StatusOK || doc.Status != tt.status || doc.Checks["redis"]["detail"] != wantDetail {
				t.Errorf("GET /v1/admin/readyz: %d %s, want 200 with status %s and detail %q", resp.StatusCode, body, tt.status, wantDetail)
			}
		})
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
