// Package apptest starts a whole aggregator over simulated portals for
// tests, served over real HTTP as production serves it.
package apptest

import (
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
