package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/apitest"
	"github.com/multas/aggregator/portalsim"
)

const queryAdminToken = "query-test-admin"

// startQueryTarget runs an aggregator over simulated portals (caba and
// santafe healthy, rosario down, pba throttling, cordoba with its breaker
// forced open) and returns its URL. apiKeys, when not empty, is the
// server.api_keys flow sequence.
func startQueryTarget(t *testing.T, apiKeys string) string {
	t.Helper()
	faults := map[string]portalsim.Fault{
		"caba": {}, "santafe": {}, "cordoba": {},
		"rosario": {Mode: portalsim.Down},
		"pba":     {Mode: portalsim.Throttle, RetryAfter: 20 * time.Second},
	}
	var js []portalsim.Jurisdiction
	for _, j := range portalsim.Demo() {
		if f, ok := faults[j.ID]; ok {
			j.Fault = f
			js = append(js, j)
		}
	}
	sim, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	server := fmt.Sprintf("server: {admin_token: %q}\n", queryAdminToken)
	if apiKeys != "" {
		server = fmt.Sprintf("server: {admin_token: %q, api_keys: %s}\n", queryAdminToken, apiKeys)
	}
	yaml := server + `problems: {base_uri: "https://aggregator.example/problems/"}
defaults:
  retry: {max_retries: 0}
  breaker: {min_calls: 1000}
` + portalsim.AggregatorYAML(js, sim.URLs())
	cfg, err := config.Parse([]byte(yaml), "query-test.yaml", nil)
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

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/admin/breakers/cordoba/by_domain/open", nil)
	req.Header.Set("Authorization", "Bearer "+queryAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("forcing cordoba open: %s", resp.Status)
	}
	return srv.URL
}

var spaces = regexp.MustCompile(`[ \t]+`)

// squeeze collapses the padding of tables, so that rows compare as text.
func squeeze(s string) string { return spaces.ReplaceAllString(s, " ") }

func TestQueryCommand(t *testing.T) {
	t.Parallel()
	base := startQueryTarget(t, "")
	keyed := startQueryTarget(t, "[{name: cli, key: k3y, rps: 100}]")

	runQueryCases(t, []queryCase{
		{
			name: "complete",
			args: []string{"--domain", "ab-123-cd", "--sources", "caba,santafe", "--server", base},
			code: 0,
			stdout: []string{
				"AB123CD: complete, 2 of 2 sources succeeded (0 failed, 0 skipped)",
				"SOURCE STATUS COUNT PROBLEM RETRY AFTER DURATION",
				"SOURCE ID DATE AMOUNT STATUS DESCRIPTION",
				"caba Q-10442 2026-03-14T09:12:00-03:00 185000.00 ARS unpaid Exceso de velocidad",
				"santafe SF-2026-8812 2026-02-18T09:05:00-03:00 12345.68 ARS unpaid No respetar la prioridad del peatón",
			},
		},
		{
			// The only case that calls pba: its first 429 fails the call;
			// later ones would be skipped during the pause.
			name: "partial",
			args: []string{"-domain", portalsim.DemoPlate, "-server", base},
			code: 2,
			stdout: []string{
				"AB123CD: partial, 2 of 5 sources succeeded (2 failed, 1 skipped)",
				"cordoba skipped - circuit-open 30s -",
				"pba failed - rate-limited 20s -",
				"rosario failed - source-unavailable - -",
				"caba Q-10587 2025-11-02T18:40:00-03:00 47500.00 ARS paid Estacionamiento en lugar prohibido",
			},
		},
		{
			name:   "by id, with a timeout, nothing found",
			args:   []string{"--id", portalsim.DemoCUITClean, "--sources", "caba", "--timeout", "2s", "--server", base},
			code:   0,
			stdout: []string{"27234567891: complete, 1 of 1 sources succeeded", "No infractions found."},
		},
		{
			name:   "no source available",
			args:   []string{"--domain", portalsim.DemoPlate, "--sources", "cordoba,rosario", "--server", base},
			code:   1,
			stdout: []string{"cordoba skipped - circuit-open 30s -", "rosario failed - source-unavailable - -"},
			stderr: []string{"aggregator query: No source available: No source answered; sources lists why, one by one. (503 no-source-available)"},
		},
		{
			name:   "every source skipped",
			args:   []string{"--domain", portalsim.DemoPlate, "--sources", "cordoba", "--server", base},
			code:   1,
			stderr: []string{"(503 no-source-available)", "retry after 30s"},
		},
		{
			name:   "invalid input",
			args:   []string{"--domain", "ZZ", "--sources", "atlantis", "--server", base},
			code:   1,
			stderr: []string{"(400 invalid-query)", "domain: not a valid Argentine plate"},
		},
		{
			name: "json, partial",
			args: []string{"--domain", portalsim.DemoPlate, "--sources", "caba,cordoba", "-o", "json", "--server", base},
			code: 2, json: http.StatusOK,
			stdout: []string{`"complete": false,`},
		},
		{
			name: "json, no source available",
			args: []string{"--domain", portalsim.DemoPlate, "--sources", "rosario", "-o", "json", "--server", base},
			code: 1, json: http.StatusServiceUnavailable,
			stdout: []string{`"type": "https://aggregator.example/problems/no-source-available",`},
		},
		{
			name: "json, invalid",
			args: []string{"--domain", "ZZ", "-o", "json", "--server", base},
			code: 1, json: http.StatusBadRequest,
			stdout: []string{`"name": "domain",`},
		},
		{
			name:   "api key missing",
			args:   []string{"--domain", portalsim.DemoPlate, "--sources", "caba", "--server", keyed},
			code:   1,
			stderr: []string{"(401 unauthorized)"},
		},
		{
			name:   "api key from the environment",
			args:   []string{"--domain", portalsim.DemoPlate, "--sources", "caba", "--server", keyed},
			env:    map[string]string{"AGGREGATOR_API_KEY": "k3y"},
			stdout: []string{"AB123CD: complete"},
		},
		{
			name:   "api key flag over the environment",
			args:   []string{"--domain", portalsim.DemoPlate, "--sources", "caba", "--server", keyed, "--api-key", "k3y"},
			env:    map[string]string{"AGGREGATOR_API_KEY": "wrong"},
			stdout: []string{"AB123CD: complete"},
		},
		{
			name:   "server unreachable",
			args:   []string{"--domain", portalsim.DemoPlate, "--server", "http://127.0.0.1:1"},
			code:   1,
			stderr: []string{"aggregator query: Get \"http://127.0.0.1:1/v1/infractions?domain=AB123CD\""},
		},
		// A command line that cannot be run: exit 2, like a partial
		// result, told apart by the usage on stderr; nothing is asked.
		{name: "domain and id", args: []string{"--domain", "AB123CD", "--id", "12345678"}, code: 2, stderr: []string{"exactly one of --domain and --id", "usage: aggregator query"}},
		{name: "neither", args: nil, code: 2, stderr: []string{"exactly one of --domain and --id", "usage: aggregator query"}},
		{name: "bad output", args: []string{"--domain", "AB123CD", "-o", "yaml"}, code: 2, stderr: []string{`-o "yaml": want table or json`, "usage: aggregator query"}},
		{name: "bad server", args: []string{"--domain", "AB123CD", "--server", "ftp://127.0.0.1"}, code: 2, stderr: []string{"want an absolute http or https URL", "usage: aggregator query"}},
		{name: "negative timeout", args: []string{"--domain", "AB123CD", "--timeout", "-1s"}, code: 2, stderr: []string{"--timeout must be positive", "usage: aggregator query"}},
		{name: "stray argument", args: []string{"--domain", "AB123CD", "extra"}, code: 2, stderr: []string{"unexpected arguments: extra", "usage: aggregator query"}},
		{name: "unknown flag", args: []string{"--plate", "AB123CD"}, code: 2, stderr: []string{"flag provided but not defined: -plate", "usage: aggregator query"}},
		{name: "flag without its value", args: []string{"--domain"}, code: 2, stderr: []string{"flag needs an argument: -domain", "usage: aggregator query"}},
		{name: "help", args: []string{"-h"}, code: 0, stderr: []string{"usage: aggregator query"}},
	})
}

// queryCase is one run of `aggregator query` and what it must print.
type queryCase struct {
	name   string
	args   []string
	env    map[string]string
	code   int
	stdout []string // lines (padding squeezed) that must appear
	stderr []string
	json   int  // when not 0, stdout is a JSON answer of this status, checked against the contract
	events bool // stdout is a stream's events, one a line, checked against the contract
}

func runQueryCases(t *testing.T, tests []queryCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			getenv := func(k string) string { return tt.env[k] }
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"query"}, tt.args...), getenv, &stdout, &stderr)
			if got := exitCode(err); got != tt.code {
				t.Errorf("exit status %d (%v), want %d\nstdout:\n%s\nstderr:\n%s", got, err, tt.code, stdout.String(), stderr.String())
			}
			out, errOut := squeeze(stdout.String()), squeeze(stderr.String())
			for _, want := range tt.stdout {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
				}
			}
			for _, want := range tt.stderr {
				if !strings.Contains(errOut, want) {
					t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
				}
			}
			if tt.json != 0 {
				checkJSONOutput(t, tt.json, stdout.Bytes())
			}
			if tt.events {
				header := http.Header{"Cache-Control": {"no-store"}, "Content-Type": {apitest.NDJSON}}
				apitest.New(t).Check(t, httptest.NewRequest(http.MethodGet, "/v1/infractions", nil), http.StatusOK, header, stdout.Bytes())
			}
		})
	}
}

// checkJSONOutput checks that -o json printed a document the contract
// allows for GET /v1/infractions with that status.
func checkJSONOutput(t *testing.T, status int, body []byte) {
	t.Helper()
	header := http.Header{"Cache-Control": {"no-store"}, "Content-Type": {"application/json"}, "X-Content-Type-Options": {"nosniff"}}
	if status != http.StatusOK {
		header.Set("Content-Type", "application/problem+json")
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/infractions", nil)
	apitest.New(t).Check(t, req, status, header, body)
}

func TestExitCode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{exitPartial, 2},
		{exitFailed, 1},
		{fmt.Errorf("query: %w", exitPartial), 2},
		{errReported, 1},
		{fmt.Errorf("listen: boom"), 1},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
	// main prints nothing more for an exit status: it was reported.
	if !errors.Is(exitPartial, errReported) {
		t.Errorf("an exitStatus is not errReported")
	}
}
