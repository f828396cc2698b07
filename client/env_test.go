package client_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/portalsim"
)

// adminToken is the admin token of every test aggregator.
const adminToken = "test-admin-token"

// baseYAML is the configuration of a test aggregator, before its sources:
// no retries, and breakers that never trip on their own, so that failures
// are quick and every answer deterministic.
const baseYAML = `server: {admin_token: "` + adminToken + `"}
problems: {base_uri: "https://aggregator.example/problems/"}
query: {deadline: 3s, max_deadline: 10s}
defaults:
  retry: {max_retries: 0}
  breaker: {min_calls: 1000}
`

// env is a real aggregator (app.New, over HTTP) in front of simulated
// portals.
type env struct {
	URL string
	Sim *portalsim.Server
	srv *httptest.Server
	app *app.App
}

func (e *env) Close() {
	e.srv.Close()
	e.app.Close()
	e.Sim.Close()
}

// faults are the behaviours of the test portals, by jurisdiction id: two
// healthy portals with data for portalsim.DemoPlate, one down, one
// throttling. The others of the demo are left out.
var faults = map[string]portalsim.Fault{
	"caba":    {Mode: portalsim.Healthy},
	"santafe": {Mode: portalsim.Healthy},
	"cordoba": {Mode: portalsim.Healthy},
	"rosario": {Mode: portalsim.Down},
	"pba":     {Mode: portalsim.Throttle, RetryAfter: 20 * time.Second},
}

// jurisdictions are the demo's, with the faults above.
func jurisdictions() []portalsim.Jurisdiction {
	var js []portalsim.Jurisdiction
	for _, j := range portalsim.Demo() {
		if f, ok := faults[j.ID]; ok {
			j.Fault = f
			js = append(js, j)
		}
	}
	return js
}

// startEnv starts the portals js and an aggregator configured with header
// (every section but sources) in front of them.
func startEnv(js []portalsim.Jurisdiction, header string) (*env, error) {
	sim, err := portalsim.Start(js)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse([]byte(header+portalsim.AggregatorYAML(js, sim.URLs())), "test.yaml", nil)
	if err != nil {
		sim.Close()
		return nil, err
	}
	a, err := app.New(cfg, app.Options{})
	if err != nil {
		sim.Close()
		return nil, err
	}
	srv := httptest.NewServer(a.Server)
	return &env{URL: srv.URL, Sim: sim, srv: srv, app: a}, nil
}

// newEnv is startEnv for a test, closed at its end.
func newEnv(t testing.TB, header string) *env {
	t.Helper()
	e, err := startEnv(jurisdictions(), header)
	if err != nil {
		t.Fatalf("starting the aggregator: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

// forceOpen forces the breaker of (key, operation) open through the admin
// API, as an operator would.
func (e *env) forceOpen(key, operation string) error {
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("%s/v1/admin/breakers/%s/%s/open", e.srv.URL, key, operation), strings.NewReader(""))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("forcing %s/%s open: %s", key, operation, resp.Status)
	}
	return nil
}
