package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/apitest"
	"github.com/multas/aggregator/portalsim"
)

// startWatchTarget serves an aggregator with watches on (API key cli,
// k3y) over the demo's caba portal.
func startWatchTarget(t *testing.T) string {
	t.Helper()
	var js []portalsim.Jurisdiction
	for _, j := range portalsim.Demo() {
		if j.ID == "caba" {
			js = append(js, j)
		}
	}
	sim, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	yaml := `server: {admin_token: "x", api_keys: [{name: cli, key: k3y, rps: 100}]}
problems: {base_uri: "https://aggregator.example/problems/"}
memory: {key: "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}
watches: {min_interval: 1h, max_per_key: 2}
webhooks: {allow_private: true}
` + portalsim.AggregatorYAML(js, sim.URLs())
	cfg, err := config.Parse([]byte(yaml), "watch-test.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	srv := httptest.NewServer(a.Server)
	t.Cleanup(srv.Close)
	return srv.URL
}

// The watch commands against a real aggregator: create, get, list (a page,
// then --all), delete, as tables and as JSON the contract allows; the
// server's refusals exit 1 with their problem; a command line that cannot
// be run exits 2 with the usage, asking nothing.
func TestWatchCommand(t *testing.T) {
	t.Parallel()
	base := startWatchTarget(t)
	env := map[string]string{"AGGREGATOR_API_KEY": "k3y"}
	cli := func(args ...string) (int, string, string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		err := run(t.Context(), append([]string{"watch"}, args...), func(k string) string { return env[k] }, &stdout, &stderr)
		return exitCode(err), stdout.String(), stderr.String()
	}
	code, out, errOut := cli("create", "--domain", "ab-123-cd", "--callback", "http://127.0.0.1:9/hook", "--interval", "2h", "-o", "json", "--server", base)
	if code != 0 {
		t.Fatalf("create: exit %d\n%s%s", code, out, errOut)
	}
	checkWatchJSON(t, http.MethodPost, "/v1/watches", http.StatusCreated, []byte(out))
	var w struct {
		WatchID  string `json:"watch_id"`
		Interval string `json:"interval"`
	}
	if err := json.Unmarshal([]byte(out), &w); err != nil || w.Interval != "2h0m0s" {
		t.Fatalf("create printed %s", out)
	}
	code, out, _ = cli("create", "--id", portalsim.DemoCUIT, "--callback", "http://127.0.0.1:9/hook", "--sources", "caba", "--server", base)
	if code != 0 || !strings.Contains(squeeze(out), "subject: 20123456786") || !strings.Contains(squeeze(out), "interval: 24h0m0s") ||
		!strings.Contains(squeeze(out), "caba - -") {
		t.Errorf("create, table: exit %d\n%s", code, out)
	}
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"get", []string{"get", w.WatchID, "--server", base}, 0, []string{"watch: " + w.WatchID, "subject: AB123CD", "last check: -", "SOURCE LAST SUCCESS PROBLEM"}, nil},
		{"get, flags first", []string{"get", "--server", base, w.WatchID}, 0, []string{"subject: AB123CD"}, nil},
		{"list, one page", []string{"list", "--limit", "1", "--server", base}, 0, []string{w.WatchID + " AB123CD 2h0m0s", "More: aggregator watch list --cursor " + w.WatchID}, nil},
		{"list, all", []string{"list", "--limit", "1", "--all", "--server", base}, 0, []string{"AB123CD 2h0m0s", "20123456786 24h0m0s"}, nil},
		{"past the limit", []string{"create", "--domain", "AC456DE", "--callback", "http://127.0.0.1:9/h", "--server", base}, 1, nil, []string{"(409 watch-limit)"}},
		{"below min_interval", []string{"create", "--domain", "AC456DE", "--callback", "http://127.0.0.1:9/h", "--interval", "1m", "--server", base}, 1, nil,
			[]string{"(400 invalid-query)", "interval: must be at least watches.min_interval (1h0m0s)"}},
		{"unknown", []string{"get", "w_nope", "--server", base}, 1, nil, []string{"(404 not-found)"}},
		{"no key", []string{"list", "--api-key", "wrong", "--server", base}, 1, nil, []string{"(401 unauthorized)"}},
		{"delete", []string{"delete", w.WatchID, "--server", base}, 0, []string{"watch " + w.WatchID + " deleted"}, nil},
		{"deleted", []string{"get", w.WatchID, "--server", base}, 1, nil, []string{"(404 not-found)"}},
		// Nothing is asked.
		{"no subcommand", nil, 2, nil, []string{"a subcommand is required", "usage: aggregator watch"}},
		{"unknown subcommand", []string{"pause"}, 2, nil, []string{`unknown subcommand "pause"`, "usage: aggregator watch"}},
		{"create without subject", []string{"create", "--callback", "http://x.example/h"}, 2, nil, []string{"exactly one of --domain and --id"}},
		{"create without callback", []string{"create", "--domain", "AB123CD"}, 2, nil, []string{"--callback is required"}},
		{"get without id", []string{"get"}, 2, nil, []string{"the watch id is required"}},
		{"bad limit", []string{"list", "--limit", "500"}, 2, nil, []string{"--limit must be between 1 and 100"}},
		{"bad output", []string{"list", "-o", "yaml"}, 2, nil, []string{`-o "yaml": want table or json`}},
		{"stray argument", []string{"delete", "w_1", "w_2"}, 2, nil, []string{"unexpected arguments: w_2"}},
		{"help", []string{"-h"}, 0, []string{"usage: aggregator watch create"}, nil},
	}
	for _, tt := range tests {
		code, out, errOut := cli(tt.args...)
		if code != tt.code {
			t.Errorf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.name, code, tt.code, out, errOut)
		}
		for _, want := range tt.stdout {
			if !strings.Contains(squeeze(out), want) {
				t.Errorf("%s: stdout lacks %q:\n%s", tt.name, want, out)
			}
		}
		for _, want := range tt.stderr {
			if !strings.Contains(squeeze(errOut), want) {
				t.Errorf("%s: stderr lacks %q:\n%s", tt.name, want, errOut)
			}
		}
	}
	code, out, _ = cli("list", "-o", "json", "--server", base)
	if code != 0 {
		t.Fatalf("list -o json: exit %d", code)
	}
	checkWatchJSON(t, http.MethodGet, "/v1/watches", http.StatusOK, []byte(out))
}

// checkWatchJSON checks that -o json printed a document the contract
// allows for that answer.
func checkWatchJSON(t *testing.T, method, path string, status int, body []byte) {
	t.Helper()
	header := http.Header{"Cache-Control": {"no-store"}, "Content-Type": {"application/json"}, "X-Content-Type-Options": {"nosniff"}}
	if status == http.StatusCreated {
		header.Set("Location", "/v1/watches/w")
	}
	apitest.New(t).Check(t, httptest.NewRequest(method, path, nil), status, header, body)
}
