package server_test

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/server"
)

// The security checks of docs/security.md that belong to the HTTP server.

// adminRoutes is every route of /v1/admin, with a path that exists, and
// the profiles of /debug/pprof (but the CPU profile and the trace, which
// take a second or more: TestPprofForOperators).
var adminRoutes = []struct{ method, path string }{
	{http.MethodGet, "/v1/admin/breakers"},
	{http.MethodPost, "/v1/admin/breakers/caba/by_domain/reset"},
	{http.MethodPost, "/v1/admin/breakers/caba/by_domain/open"},
	{http.MethodPut, "/v1/admin/sources/caba/breaker"},
	{http.MethodGet, "/v1/admin/events"},
	{http.MethodGet, "/v1/admin/dlq"},
	{http.MethodPost, "/v1/admin/dlq/d_1/redeliver"},
	{http.MethodDelete, "/v1/admin/dlq/d_1"},
	{http.MethodGet, "/v1/admin/readyz"},
	{http.MethodGet, "/debug/pprof"},
	{http.MethodGet, "/debug/pprof/"},
	{http.MethodGet, "/debug/pprof/heap"},
	{http.MethodGet, "/debug/pprof/goroutine?debug=1"},
	{http.MethodGet, "/debug/pprof/cmdline"},
}

// Every admin route is closed (403) without a configured token, whatever
// the request carries; with one, a missing or wrong token is a 401 with a
// Bearer challenge, and only the token itself (scheme in any case) opens it.
func TestAdminAuthEveryRoute(t *testing.T) {
	closed := httptest.NewServer(server.New(server.Options{}))
	t.Cleanup(closed.Close)
	a, _ := fuzzApp(t)
	open := httptest.NewServer(a.Server)
	t.Cleanup(open.Close)

	do := func(t *testing.T, base, method, path, auth string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(`{"open_for": "30s"}`))
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
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, r := range adminRoutes {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			for _, auth := range []string{"", "Bearer ", "Bearer " + fuzzAdminToken, "Basic Og=="} {
				if resp := do(t, closed.URL, r.method, r.path, auth); resp.StatusCode != http.StatusForbidden {
					t.Errorf("no admin token configured, Authorization %q: got %d, want 403", auth, resp.StatusCode)
				}
			}
			for _, auth := range []string{
				"", "Bearer", "Bearer ", "Bearer x", "Bearer " + fuzzAdminToken[:len(fuzzAdminToken)-1],
				"Bearer " + fuzzAdminToken + "x", "Bearer " + strings.ToUpper(fuzzAdminToken),
				"Basic " + fuzzAdminToken, fuzzAdminToken, "Bearer  " + fuzzAdminToken + " x",
			} {
				resp := do(t, open.URL, r.method, r.path, auth)
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("Authorization %q: got %d, want 401", auth, resp.StatusCode)
				}
				if ch := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(ch, "Bearer") {
					t.Errorf("Authorization %q: WWW-Authenticate %q, want a Bearer challenge", auth, ch)
				}
			}
			for _, auth := range []string{"Bearer " + fuzzAdminToken, "bearer " + fuzzAdminToken} {
				resp := do(t, open.URL, r.method, r.path, auth)
				if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden || resp.StatusCode >= 500 {
					t.Errorf("Authorization %q: got %d, want the route's own answer", auth, resp.StatusCode)
				}
			}
		})
	}
}

// Secrets are compared in constant time: the admin token by the SHA-256
// digests of both sides with subtle.ConstantTimeCompare, API keys likewise
// against every configured key, webhook signatures with hmac.Equal. No
// ordinary comparison of a secret may creep back in: this test reads the
// source of the functions that handle them, and every use of the admin
// token in the server.
func TestSecretsComparedInConstantTime(t *testing.T) {
	checks := []struct {
		dir, fn, call string
		// secrets are the names (fields or variables) holding a secret in
		// fn, which may be compared with "" only.
		secrets []string
	}{
		{".", "adminAuth", "subtle.ConstantTimeCompare", []string{"AdminToken", "got", "want", "have"}},
		{".", "", "", []string{"AdminToken"}}, // anywhere in the package
		{"../ratelimit", "Lookup", "subtle.ConstantTimeCompare", []string{"secret", "sum", "Key"}},
		{"../client", "VerifyWebhook", "hmac.Equal", []string{"got", "want", "key", "secret"}},
	}
	for _, c := range checks {
		fset := token.NewFileSet()
		files, err := filepath.Glob(filepath.Join(c.dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			var scopes []ast.Node
			if c.fn == "" {
				scopes = []ast.Node{f}
			}
			for _, d := range f.Decls {
				if fd, ok := d.(*ast.FuncDecl); ok && fd.Name.Name == c.fn && fd.Body != nil {
					scopes = append(scopes, fd.Body)
					found = found || calls(fd.Body, c.call)
				}
			}
			for _, scope := range scopes {
				ast.Inspect(scope, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.BinaryExpr:
						if n.Op != token.EQL && n.Op != token.NEQ {
							return true
						}
						if names(n.X, c.secrets) && !emptyString(n.Y) || names(n.Y, c.secrets) && !emptyString(n.X) {
							t.Errorf("%s: a secret compared with %s", fset.Position(n.Pos()), n.Op)
						}
					case *ast.CallExpr:
						switch callName(n) {
						case "bytes.Equal", "bytes.Compare", "strings.EqualFold", "strings.Compare", "reflect.DeepEqual":
							for _, arg := range n.Args {
								if names(arg, c.secrets) {
									t.Errorf("%s: a secret compared with %s", fset.Position(n.Pos()), callName(n))
								}
							}
						}
					}
					return true
				})
			}
		}
		if c.fn != "" && !found {
			t.Errorf("%s: %s does not call %s", c.dir, c.fn, c.call)
		}
	}
}

func calls(body ast.Node, name string) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok && callName(c) == name {
			found = true
		}
		return !found
	})
	return found
}

func callName(c *ast.CallExpr) string {
	if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
		if x, ok := sel.X.(*ast.Ident); ok {
			return x.Name + "." + sel.Sel.Name
		}
	}
	return ""
}

// names reports whether e is one of the identifiers, or a selector of one.
func names(e ast.Expr, idents []string) bool {
	var name string
	switch e := ast.Unparen(e).(type) {
	case *ast.Ident:
		name = e.Name
	case *ast.SelectorExpr:
		name = e.Sel.Name
	default:
		return false
	}
	for _, id := range idents {
		if name == id {
			return true
		}
	}
	return false
}

func emptyString(e ast.Expr) bool {
	lit, ok := ast.Unparen(e).(*ast.BasicLit)
	return ok && lit.Kind == token.STRING && (lit.Value == `""` || lit.Value == "``")
}

// serve runs server.HTTPServer for h with readTimeout (0: the default) on
// a loopback port, with change (when not nil) applied to it first, until
// the test ends.
func serve(tb testing.TB, h http.Handler, readTimeout time.Duration, change func(*http.Server)) string {
	tb.Helper()
	srv := server.HTTPServer("127.0.0.1:0", h, readTimeout, 2*time.Second)
	if change != nil {
		change(srv)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	tb.Cleanup(func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// rawRequest writes req on a fresh connection (concurrently: the server
// may answer and hang up before it has read everything) and reads the
// answer.
func rawRequest(t *testing.T, addr, req string) (*http.Response, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	written := make(chan struct{})
	go func() {
		defer close(written)
		_, _ = io.WriteString(c, req)
	}()
	defer func() { <-written }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, nil
}

// Request headers are limited to 64 KiB (http.Server.MaxHeaderBytes, plus
// the 4 KiB net/http adds): 100 KiB of headers is a 431, 60 KiB passes.
func TestHeaderLimit(t *testing.T) {
	addr := serve(t, server.New(server.Options{}), 0, nil)
	for _, tt := range []struct {
		size int
		want int
	}{
		{60 << 10, http.StatusOK},
		{100 << 10, http.StatusRequestHeaderFieldsTooLarge},
	} {
		req := fmt.Sprintf("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\nConnection: close\r\n\r\n", strings.Repeat("a", tt.size))
		resp, err := rawRequest(t, addr, req)
		if err != nil {
			t.Fatalf("%d KiB of headers: %v", tt.size>>10, err)
		}
		if resp.StatusCode != tt.want {
			t.Errorf("%d KiB of headers: got %d, want %d", tt.size>>10, resp.StatusCode, tt.want)
		}
	}
}

var versionLeak = regexp.MustCompile(`(?i)\bgin\b|gin-gonic|go1\.\d|golang|net/http|goroutine \d`)

// No answer says what runs the service: no Server or X-Powered-By header,
// no framework or Go version in a body, whatever the route or the error.
func TestNoVersionLeak(t *testing.T) {
	a, _ := fuzzApp(t)
	addr := serve(t, a.Server, 0, nil)
	for _, path := range []string{
		"/", "/healthz", "/readyz", "/metrics", "/openapi.yaml", "/problems/internal", "/problems/nope",
		"/v1/infractions?domain=AB123CD", "/v1/infractions?domain=x", "/v1/sources", "/v1/admin/breakers",
		"/v1/sources/caba/infractions/Q-1/voucher", "/nowhere", "/v1/infractions/%zz",
	} {
		for _, method := range []string{http.MethodGet, http.MethodDelete, "BREW"} {
			resp, err := rawRequest(t, addr, method+" "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			for _, h := range []string{"Server", "X-Powered-By", "X-AspNet-Version", "Via"} {
				if v := resp.Header.Get(h); v != "" {
					t.Errorf("%s %s: %s: %q", method, path, h, v)
				}
			}
		}
	}
	// Bodies: the error pages, where frameworks like to sign.
	for _, path := range []string{"/nowhere", "/v1/infractions?domain=x", "/v1/admin/breakers", "/problems/nope"} {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if leak := versionLeak.Find(b); leak != nil {
			t.Errorf("GET %s: the body mentions %q: %s", path, leak, b)
		}
	}
}
