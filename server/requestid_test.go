package server_test

import (
	"bytes"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/correlation"
	"github.com/multas/aggregator/internal/apitest"
	"github.com/multas/aggregator/server"
)

// logBuffer collects a logger's JSON lines, safe for the server's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines decodes every line logged so far.
func (l *logBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(l.b.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// correlatedApp is fuzzApp's replica (its portals down) with API keys,
// one of them already spent, logging at debug level into logs.
func correlatedApp(t *testing.T) (*httptest.Server, *logBuffer) {
	t.Helper()
	down := "http://" + closedPort(t)
	cfg, err := config.Parse([]byte(`server:
  admin_token: "`+fuzzAdminToken+`"
  api_keys:
    - {name: good, key: "good-key", rps: 1000}
    - {name: spent, key: "spent-key", rps: 0.001, burst: 1}
problems: {base_uri: "`+fuzzBase+`"}
query: {deadline: 1s, max_deadline: 2s}
defaults: {timeout: 200ms, retry: {max_retries: 0}}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: `+down+`
    operations:
      by_domain: {path: "/actas?dominio={domain}"}
    response: {items: /actas, fields: {id: /nro}}
`), "correlation.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := app.New(cfg, app.Options{Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	srv := httptest.NewServer(a.Server)
	t.Cleanup(srv.Close)
	// Spend the second key's only token.
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/v1/sources", nil)
	req.Header.Set("X-API-Key", "spent-key")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return srv, logs
}

// Every answer, whatever the route or the error, carries X-Request-Id:
// the caller's when valid, else a new one. Problem documents carry the
// same id as request_id, and so does the access log line of the request.
func TestRequestIDOnEveryAnswer(t *testing.T) {
	srv, logs := correlatedApp(t)
	v := apitest.New(t)
	routes := []struct {
		name, method, path, key, auth string
		status                        int
	}{
		{"healthz", "GET", "/healthz", "", "", 200},
		{"readyz", "GET", "/readyz", "", "", 200},
		{"metrics", "GET", "/metrics", "", "", 200},
		{"dashboard", "GET", "/", "", "", 200},
		{"openapi", "GET", "/openapi.yaml", "", "", 200},
		{"problem page", "GET", "/problems/circuit-open", "", "", 200},
		{"unknown problem page", "GET", "/problems/nope", "", "", 404},
		{"unknown route", "GET", "/nowhere", "", "", 404},
		{"method not allowed", "PATCH", "/v1/infractions", "good-key", "", 405},
		{"no key", "GET", "/v1/sources", "", "", 401},
		{"spent key", "GET", "/v1/sources", "spent-key", "", 429},
		{"coverage", "GET", "/v1/sources", "good-key", "", 200},
		{"invalid query", "GET", "/v1/infractions?domain=x", "good-key", "", 400},
		{"no source available", "GET", "/v1/infractions?domain=AB123CD", "good-key", "", 503},
		{"admin without token", "GET", "/v1/admin/breakers", "", "", 401},
		{"admin", "GET", "/v1/admin/breakers", "", "Bearer " + fuzzAdminToken, 200},
	}
	ids := []struct {
		name, sent string
		echoed     bool
	}{
		{"caller's id", "caller-id-0b6f2c1e", true},
		{"caller's id of 128 characters", strings.Repeat("r", 128), true},
		{"none sent", "", false},
		{"too long", strings.Repeat("r", 129), false},
		{"with a space", "two words", false},
		{"not ASCII", "pedido-ñ", false},
	}
	seen := map[string]string{} // request id → test name
	for _, rt := range routes {
		for _, id := range ids {
			name := rt.name + "/" + id.name
			req, err := http.NewRequest(rt.method, srv.URL+rt.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if id.sent != "" {
				req.Header.Set("X-Request-Id", id.sent)
			}
			if rt.key != "" {
				req.Header.Set("X-API-Key", rt.key)
			}
			if rt.auth != "" {
				req.Header.Set("Authorization", rt.auth)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			body := v.CheckResponse(t, resp)
			if resp.StatusCode != rt.status {
				t.Errorf("%s: status %d, want %d: %s", name, resp.StatusCode, rt.status, body)
			}
			got := resp.Header.Values("X-Request-Id")
			if len(got) != 1 || !correlation.Valid(got[0]) {
				t.Errorf("%s: X-Request-Id %q, want one valid id", name, got)
				continue
			}
			switch {
			case id.echoed && got[0] != id.sent:
				t.Errorf("%s: X-Request-Id %q, want the caller's %q", name, got[0], id.sent)
			case !id.echoed && (got[0] == id.sent || len(got[0]) != 32):
				t.Errorf("%s: X-Request-Id %q, want a new one", name, got[0])
			}
			if !id.echoed {
				if other, dup := seen[got[0]]; dup {
					t.Errorf("%s: X-Request-Id %q already given to %s", name, got[0], other)
				}
				seen[got[0]] = name
			}
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/problem+json") {
				var p struct {
					RequestID string `json:"request_id"`
				}
				if err := json.Unmarshal(body, &p); err != nil || p.RequestID != got[0] {
					t.Errorf("%s: problem request_id %q, want %q: %s", name, p.RequestID, got[0], body)
				}
			} else if rt.status >= 400 && rt.path != "/readyz" {
				t.Errorf("%s: %d is not a problem document", name, rt.status)
			}
		}
	}

	// The access log: one line per request, with its request_id and its
	// duration in milliseconds (not raw nanoseconds).
	logged := map[string]int{}
	for _, l := range logs.lines(t) {
		if l["msg"] != "request" {
			continue
		}
		id, _ := l["request_id"].(string)
		if id == "" {
			t.Errorf("access log line without request_id: %v", l)
		}
		logged[id]++
		if ms, ok := l["duration_ms"].(float64); !ok || ms < 0 || ms > 60_000 {
			t.Errorf("access log duration_ms = %v, want milliseconds", l["duration_ms"])
		}
		if _, ok := l["duration"]; ok {
			t.Errorf("access log still has a raw duration: %v", l)
		}
	}
	for id, name := range seen {
		if logged[id] != 1 {
			t.Errorf("%s: %d access log lines with its request_id %q, want 1", name, logged[id], id)
		}
	}
	if n := logged["caller-id-0b6f2c1e"]; n != len(routes) {
		t.Errorf("the caller's id is on %d access log lines, want %d", n, len(routes))
	}
}

// Every log call of the server goes with the request's context, so that
// its line carries the request_id (and, with tracing, the trace_id): no
// Logger.Info, Warn, Error or Debug without Context may come back.
func TestServerLogsWithContext(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			recv, ok := sel.X.(*ast.SelectorExpr)
			if !ok || recv.Sel.Name != "Logger" {
				return true
			}
			checked++
			switch sel.Sel.Name {
			case "Debug", "Info", "Warn", "Error", "Log":
				t.Errorf("%s: Logger.%s without the request's context", fset.Position(call.Pos()), sel.Sel.Name)
			}
			return true
		})
	}
	if checked == 0 {
		t.Error("found no log call at all: the check is broken")
	}
}

// Drain turns /readyz to 503 unavailable at once (the shutdown check
// says why), while every other route is served as before.
func TestDrain(t *testing.T) {
	a, _ := fuzzApp(t)
	srv := httptest.NewServer(a.Server)
	t.Cleanup(srv.Close)
	v := apitest.New(t)
	get := func(path string) (int, []byte) {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, v.CheckResponse(t, resp)
	}
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before draining: %d %s", code, body)
	}
	a.Server.Drain()
	code, body := get("/readyz")
	var doc struct {
		Status string                       `json:"status"`
		Checks map[string]map[string]string `json:"checks"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	if code != http.StatusServiceUnavailable || doc.Status != "unavailable" || doc.Checks["shutdown"]["status"] != "unavailable" {
		t.Errorf("/readyz while draining: %d %s, want 503 unavailable with the shutdown check", code, body)
	}
	for _, path := range []string{"/healthz", "/v1/sources", "/metrics"} {
		if code, body := get(path); code != http.StatusOK {
			t.Errorf("%s while draining: %d %s, want 200", path, code, body)
		}
	}
	if code, _ := get("/v1/infractions?domain=AB123CD"); code != http.StatusServiceUnavailable {
		t.Errorf("a query while draining: %d, want the 503 no-source-available of its down portals", code)
	}
}

// Whatever a caller sends as X-Request-Id, the answer carries exactly one
// valid id: the caller's when valid, else a new one.
func FuzzRequestIDHeader(f *testing.F) {
	for _, s := range []string{"abc", "", " ", "a\r\nb", strings.Repeat("x", 129), "ñ", "\x00", "caller-id"} {
		f.Add(s)
	}
	s := server.New(server.Options{})
	f.Fuzz(func(t *testing.T, sent string) {
		req := httptest.NewRequest(http.MethodGet, "/healthz", nil)
		req.Header["X-Request-Id"] = []string{sent}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		got := rec.Header().Values("X-Request-Id")
		if len(got) != 1 || !correlation.Valid(got[0]) {
			t.Fatalf("sent %q: answer X-Request-Id %q", sent, got)
		}
		if correlation.Valid(sent) != (got[0] == sent) {
			t.Fatalf("sent %q (valid %v): answer X-Request-Id %q", sent, correlation.Valid(sent), got[0])
		}
	})
}
