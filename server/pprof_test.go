package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/internal/apitest"
)

// TestPprofForOperators (issue 23): with the admin token, /debug/pprof
// lists the profiles and serves each as net/http/pprof does; its errors
// are problems like the API's. Without the token it is closed
// (TestAdminAuthEveryRoute, TestUnknownAdminPaths).
func TestPprofForOperators(t *testing.T) {
	a, srv := fuzzApp(t)
	// A replica's server bounds its writes (server.HTTPServer): a profile
	// longer than that is still served whole.
	short := httptest.NewUnstartedServer(a.Server)
	short.Config.WriteTimeout = time.Second
	short.Start()
	t.Cleanup(short.Close)
	v := apitest.New(t)
	get := func(t *testing.T, path string) (*http.Response, []byte) {
		t.Helper()
		base := srv.URL
		if strings.Contains(path, "seconds=2") {
			base = short.URL
		}
		req, err := http.NewRequest(http.MethodGet, base+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+fuzzAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp, v.CheckResponse(t, resp)
	}

	for _, path := range []string{"/debug/pprof", "/debug/pprof/"} {
		t.Run(path, func(t *testing.T) {
			resp, body := get(t, path)
			checkPprofIndex(t, resp, body)
		})
	}

	tests := []struct {
		path, contentType string
		check             func([]byte) bool
	}{
		{"/debug/pprof/heap", "application/octet-stream", gzipped},
		{"/debug/pprof/goroutine", "application/octet-stream", gzipped},
		{"/debug/pprof/allocs?seconds=1", "application/octet-stream", gzipped},
		{"/debug/pprof/profile?seconds=1", "application/octet-stream", gzipped},
		{"/debug/pprof/profile?seconds=2", "application/octet-stream", gzipped}, // longer than the write timeout
		{"/debug/pprof/trace?seconds=1", "application/octet-stream", func(b []byte) bool { return bytes.HasPrefix(b, []byte("go 1.")) }},
		{"/debug/pprof/goroutine?debug=2", "text/plain", func(b []byte) bool { return bytes.Contains(b, []byte("goroutine ")) }},
		{"/debug/pprof/cmdline", "text/plain", func(b []byte) bool { return len(b) > 0 }},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, body := get(t, tt.path)
			if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), tt.contentType) || !tt.check(body) {
				t.Errorf("got %d %s, %d bytes; want 200 %s and the profile", resp.StatusCode, resp.Header.Get("Content-Type"), len(body), tt.contentType)
			}
		})
	}

	errs := []struct {
		name, path string
		status     int
		slug       string
		hold       bool // a CPU profile runs meanwhile
	}{
		{"unknown profile", "/debug/pprof/secrets", http.StatusNotFound, "not-found", false},
		{"bad seconds", "/debug/pprof/profile?seconds=x", http.StatusBadRequest, "invalid-query", false},
		{"no seconds", "/debug/pprof/trace?seconds=0", http.StatusBadRequest, "invalid-query", false},
		{"too many seconds", "/debug/pprof/heap?seconds=601", http.StatusBadRequest, "invalid-query", false},
		{"CPU profile already running", "/debug/pprof/profile?seconds=1", http.StatusInternalServerError, "internal", true},
	}
	for _, tt := range errs {
		t.Run(tt.name, func(t *testing.T) {
			if tt.hold {
				if err := pprof.StartCPUProfile(io.Discard); err != nil {
					t.Fatal(err)
				}
				defer pprof.StopCPUProfile()
			}
			resp, body := get(t, tt.path)
			var doc struct{ Type, Detail string }
			_ = json.Unmarshal(body, &doc)
			if resp.StatusCode != tt.status || !strings.HasSuffix(doc.Type, "/"+tt.slug) || doc.Detail == "" {
				t.Errorf("got %d %s, want %d %s with pprof's reason", resp.StatusCode, body, tt.status, tt.slug)
			}
			if resp.Header.Get("X-Go-Pprof") != "" {
				t.Error("pprof's own error header went out with the problem")
			}
		})
	}
}

// checkPprofIndex checks the answer of GET /debug/pprof: every profile,
// with its link.
func checkPprofIndex(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	var index struct {
		Profiles []struct {
			Name, Href string
			Count      *int
		}
	}
	if err := json.Unmarshal(body, &index); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("got %d %s (%v), want 200 and the profiles", resp.StatusCode, body, err)
	}
	seen := map[string]bool{}
	for _, p := range index.Profiles {
		seen[p.Name] = true
		if p.Href != "/debug/pprof/"+p.Name {
			t.Errorf("%s: href %q", p.Name, p.Href)
		}
		if p.Name == "goroutine" && (p.Count == nil || *p.Count < 1) {
			t.Errorf("goroutine: count %v, want the goroutines running", p.Count)
		}
	}
	for _, name := range []string{"allocs", "block", "cmdline", "goroutine", "heap", "mutex", "profile", "symbol", "threadcreate", "trace"} {
		if !seen[name] {
			t.Errorf("%s is not listed", name)
		}
	}
}

func gzipped(b []byte) bool { return bytes.HasPrefix(b, []byte{0x1f, 0x8b}) }
