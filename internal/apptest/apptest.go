// Package apptest starts a whole aggregator over simulated portals for
// tests, served over real HTTP as production serves it.
package apptest

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
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
	return over(t, sim, js, sim.URLs(), header, opts)
}

// StartHeld is Start with the portal of jurisdiction id held: the
// aggregator calls it through a gate, and every call waits until Release
// (or until its caller goes away). A test proves that something happened
// while that portal was still answering.
func StartHeld(t testing.TB, js []portalsim.Jurisdiction, header string, opts app.Options, id string) (*Env, *Held) {
	t.Helper()
	sim, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	urls := sim.URLs()
	h := hold(t, urls[id])
	urls[id] = h.url
	return over(t, sim, js, urls, header, opts), h
}

// Held is a portal behind a gate (StartHeld).
type Held struct {
	url     string
	release chan struct{}
	once    sync.Once
}

// Release lets the calls waiting for the portal, and every later one,
// through.
func (h *Held) Release() { h.once.Do(func() { close(h.release) }) }

// hold serves the portal at target behind a gate, until the test ends.
func hold(t testing.TB, target string) *Held {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	h := &Held{release: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-h.release:
			proxy.ServeHTTP(w, r)
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// over starts an aggregator over the portals js of sim, found at urls.
func over(t testing.TB, sim *portalsim.Server, js []portalsim.Jurisdiction, urls map[string]string, header string, opts app.Options) *Env {
	t.Helper()
	cfg, err := config.Parse([]byte(header+portalsim.AggregatorYAML(js, urls)), t.Name()+".yaml", nil)
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
