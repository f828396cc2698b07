package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/portalsim"
)

// syncBuffer is a bytes.Buffer safe to share with run's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitHealthy(t *testing.T, base string) {
	t.Helper()
	for range 200 {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("%s never became healthy", base)
}

func noEnv(string) string { return "" }

// The demo starts with no flags but -listen, answers a query for the demo
// plate, and shuts down cleanly when its context ends.
func TestRunDemo(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-listen", addr}, noEnv, &stdout, &stderr) }()
	waitHealthy(t, "http://"+addr)
	// The JSON portals, and those in other dialects (SOAP, an HTML table
	// in windows-1252), answer the demo plate.
	for _, ids := range []string{"caba", "neuquen,tucuman"} {
		resp, err := http.Get("http://" + addr + "/v1/infractions?domain=AB123CD&sources=" + ids)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Complete    bool `json:"complete"`
			Infractions []struct {
				Source string `json:"source"`
			} `json:"infractions"`
		}
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err != nil || !got.Complete {
			t.Errorf("demo query %s: status %d, complete %v, decoding: %v", ids, resp.StatusCode, got.Complete, err)
		}
		seen := map[string]bool{}
		for _, inf := range got.Infractions {
			seen[inf.Source] = true
		}
		for _, id := range strings.Split(ids, ",") {
			if !seen[id] {
				t.Errorf("demo query %s: no infraction from %s", ids, id)
			}
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run after shutdown: %v; stderr: %s", err, stderr.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	out := stdout.String()
	for _, want := range []string{"curl", "/v1/infractions?domain="} {
		if !strings.Contains(out, want) {
			t.Errorf("demo banner lacks %q:\n%s", want, out)
		}
	}
	// Every demo jurisdiction, in every dialect, is served and listed.
	for _, j := range portalsim.DemoAll() {
		if !strings.Contains(out, "  "+j.ID+" ") {
			t.Errorf("demo banner does not list %s:\n%s", j.ID, out)
		}
	}
	if want := fmt.Sprintf(`"sources":%d`, len(portalsim.DemoAll())); !strings.Contains(stderr.String(), want) {
		t.Errorf("the demo does not configure every jurisdiction (want %s):\n%s", want, stderr.String())
	}
	if strings.Contains(stderr.String(), "AB123CD") {
		t.Errorf("the logs carry a plate in clear:\n%s", stderr.String())
	}
}

func TestRunWithConfigAndListenOverride(t *testing.T) {
	t.Parallel()
	portal := freeAddr(t) // nothing listens: the source is down
	cfg := filepath.Join(t.TempDir(), "aggregator.yaml")
	writeFile(t, cfg, fmt.Sprintf(`
server: {listen: "127.0.0.1:1", admin_token: "${TOKEN}", shutdown_delay: 0s}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: http://%s
    operations:
      by_domain: {method: GET, path: "/actas?dominio={domain}"}
    response:
      items: /actas
      fields: {id: /nro}
`, portal))
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	getenv := func(k string) string {
		if k == "TOKEN" {
			return "s3cret"
		}
		return ""
	}
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-config", cfg, "-listen", addr}, getenv, &stdout, &stderr) }()
	waitHealthy(t, "http://"+addr)
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/v1/admin/breakers", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("admin with the token from ${TOKEN}: status %d, want 200", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, `
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: http://127.0.0.1:9101
    operations:
      by_domain: {method: GET, path: "/actas?dominio={domain}"}
    response: {items: /actas, fields: {id: /nro}}
`)
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, `
server: {listen: "127.0.0.1:8080", colour: blue}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: http://127.0.0.1:9101
    operations:
      by_domain: {method: GET, path: "/actas"}
    response: {items: /actas, fields: {id: /nro}}
    breaker: {failure_ratio: 1.5}
`)
	unsetSecret := filepath.Join(dir, "unset.yaml")
	writeFile(t, unsetSecret, `
server: {admin_token: "${NO_SUCH_TOKEN}"}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: http://127.0.0.1:9101
    headers: {Authorization: "Bearer ${NO_PORTAL_TOKEN}"}
    operations:
      by_domain: {method: GET, path: "/actas?dominio={domain}"}
    response: {items: /actas, fields: {id: /nro}}
`)
	tests := []struct {
		name    string
		args    []string
		wantErr bool
		want    []string
	}{
		{"valid", []string{"validate", "-config", good}, false, []string{"valid"}},
		{"every problem listed", []string{"validate", "-config", bad}, true,
			[]string{"server.colour", "sources[0].operations.by_domain.path", "sources[0].breaker.failure_ratio", "bad.yaml"}},
		{"missing file", []string{"validate", "-config", filepath.Join(dir, "none.yaml")}, true, nil},
		{"no -config", []string{"validate"}, true, []string{"-config FILE is required", "usage: aggregator validate"}},
		{"unset secret", []string{"validate", "-config", unsetSecret}, true,
			[]string{"unset.yaml:2: server.admin_token: ${NO_SUCH_TOKEN} is not set", "sources[0].headers.Authorization: ${NO_PORTAL_TOKEN}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr syncBuffer
			err := run(context.Background(), tt.args, noEnv, &stdout, &stderr)
			if (err != nil) != tt.wantErr {
				t.Fatalf("run %v: err %v, wantErr %v; stderr: %s", tt.args, err, tt.wantErr, stderr.String())
			}
			out := stdout.String() + stderr.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestGCPercent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		gogc string
		pct  int
		set  bool
	}{
		{"", defaultGCPercent, true},
		{"100", 0, false},
		{"off", 0, false},
	} {
		pct, set := gcPercent(func(k string) string {
			if k == "GOGC" {
				return tt.gogc
			}
			return ""
		})
		if pct != tt.pct || set != tt.set {
			t.Errorf("GOGC=%q: gcPercent = %d, %v; want %d, %v", tt.gogc, pct, set, tt.pct, tt.set)
		}
	}
}
