package main

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/internal/apptest"
	"github.com/multas/aggregator/portalsim"
)

// TestQueryStreamCommand: `aggregator query --stream` prints each source's
// part, then the result's headline (or, with -o json, the stream's events
// one a line), with the exit statuses of a query answered whole.
func TestQueryStreamCommand(t *testing.T) {
	t.Parallel()
	base := startQueryTarget(t, "")
	runQueryCases(t, []queryCase{
		{
			name: "complete",
			args: []string{"--stream", "--domain", "ab-123-cd", "--sources", "caba,santafe", "--server", base},
			code: 0,
			stdout: []string{
				"caba: succeeded, 2 found in",
				"Q-10442 2026-03-14T09:12:00-03:00 185000.00 ARS unpaid Exceso de velocidad",
				"santafe: succeeded, 1 found in",
				"AB123CD: complete, 2 of 2 sources succeeded (0 failed, 0 skipped)",
			},
		},
		{
			name:   "partial",
			args:   []string{"--stream", "--domain", portalsim.DemoPlate, "--sources", "caba,cordoba,rosario", "--server", base},
			code:   2,
			stdout: []string{"cordoba: skipped, circuit-open (retry after 30s)", "rosario: failed, source-unavailable", "AB123CD: partial, 1 of 3 sources succeeded (1 failed, 1 skipped)"},
		},
		{
			name:   "no source available",
			args:   []string{"--stream", "--domain", portalsim.DemoPlate, "--sources", "cordoba,rosario", "--server", base},
			code:   1,
			stdout: []string{"cordoba: skipped, circuit-open", "rosario: failed, source-unavailable"},
			stderr: []string{"(503 no-source-available)"},
		},
		{
			name:   "invalid input",
			args:   []string{"--stream", "--domain", "ZZ", "--server", base},
			code:   1,
			stderr: []string{"(400 invalid-query)", "domain: not a valid Argentine plate"},
		},
		{
			name: "json, partial",
			args: []string{"--stream", "-o", "json", "--domain", portalsim.DemoPlate, "--sources", "caba,cordoba", "--server", base},
			code: 2, events: true,
			stdout: []string{`"type":"source","source":"caba"`, `"type":"summary"`, `"complete":false`},
		},
		{
			name: "json, no source available",
			args: []string{"--stream", "-o", "json", "--domain", portalsim.DemoPlate, "--sources", "rosario", "--server", base},
			code: 1, events: true,
			stdout: []string{`"type":"summary","query":{"domain":"AB123CD"}`, "no-source-available"},
			stderr: []string{"(503 no-source-available)"},
		},
		{
			name: "json, invalid",
			args: []string{"--stream", "-o", "json", "--domain", "ZZ", "--server", base},
			code: 1, json: http.StatusBadRequest,
			stdout: []string{`"name": "domain",`},
		},
	})
}

// notifying is a stdout that tells, at each write, what has been written
// so far.
type notifying struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	write func(sofar string)
}

func (n *notifying) Write(p []byte) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.buf.Write(p)
	n.write(n.buf.String())
	return len(p), nil
}

// TestQueryStreamPrintsAsItArrives: santafe's portal is held until caba's
// part is on stdout, so the command prints as the parts arrive.
func TestQueryStreamPrintsAsItArrives(t *testing.T) {
	t.Parallel()
	var js []portalsim.Jurisdiction
	for _, j := range portalsim.Demo() {
		if j.ID == "caba" || j.ID == "santafe" {
			js = append(js, j)
		}
	}
	e, santafe := apptest.StartHeld(t, js, "problems: {base_uri: \"https://aggregator.example/problems/\"}\ndefaults: {retry: {max_retries: 0}}\n", app.Options{}, "santafe")
	stdout := &notifying{write: func(sofar string) {
		if strings.Contains(sofar, "caba: succeeded") {
			santafe.Release()
		}
	}}
	var stderr bytes.Buffer
	err := run(t.Context(), []string{"query", "--stream", "--domain", portalsim.DemoPlate, "--timeout", "10s", "--server", e.URL}, func(string) string { return "" }, stdout, &stderr)
	out := stdout.buf.String()
	if code := exitCode(err); code != 0 {
		t.Fatalf("exit status %d (%v)\nstdout:\n%s\nstderr:\n%s", code, err, out, stderr.String())
	}
	caba, sf := strings.Index(out, "caba: succeeded"), strings.Index(out, "santafe: succeeded")
	if caba < 0 || sf < caba {
		t.Errorf("caba's part at %d, santafe's at %d, want caba first:\n%s", caba, sf, out)
	}
	if !strings.Contains(out, fmt.Sprintf("%s: complete, 2 of 2 sources succeeded", portalsim.DemoPlate)) {
		t.Errorf("no headline:\n%s", out)
	}
}
