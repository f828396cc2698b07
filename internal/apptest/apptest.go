// Package apptest starts a whole aggregator over simulated portals for
// tests, served over real HTTP as production serves it.
package apptest

import (
	"bytes"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/portalsim"
)

// Env is a running aggregator and its portals; all stop when the test ends.
type Env struct {
	App *app.App
	Sim *portalsim.Server
	URL string
}

// Start runs the portals js on loopback and an aggregator over them,
// configured by header (the YAML before `sources:`) and opts.
func Start(t testing.TB, js []portalsim.Jurisdiction, header string, opts app.Options) *Env {
	t.Helper()
	sim, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	cfg, err := config.Parse([]byte(header+portalsim.AggregatorYAML(js, sim.URLs())), t.Name()+".yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	srv := httptest.NewServer(a.Server)
	t.Cleanup(srv.Close)
	return &Env{App: a, Sim: sim, URL: srv.URL}
}

// Logger returns a logger whose lines at level and above go to t's log,
// each after name: what the replicas of a failing fleet test went through.
func Logger(t testing.TB, name string, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(testLog{t, name}, &slog.HandlerOptions{Level: level}))
}

type testLog struct {
	t    testing.TB
	name string
}

func (l testLog) Write(p []byte) (int, error) {
	l.t.Logf("%s: %s", l.name, bytes.TrimSpace(p))
	return len(p), nil
}
