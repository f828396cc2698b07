package portalsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/portalsim"
)

// testJurisdiction is a small portal of shape s with one record for
// DemoPlate and DemoCUIT.
func testJurisdiction(s portalsim.Shape, f portalsim.Fault) portalsim.Jurisdiction {
	return portalsim.Jurisdiction{
		ID: "test", Name: "Jurisdicción de prueba", Shape: s, Fault: f,
		Records: []portalsim.Record{{
			Domain: portalsim.DemoPlate, CUIT: portalsim.DemoCUIT, DNI: portalsim.DemoDNI,
			ID: "T-1", Date: "2026-03-14T09:12:00", Description: "Exceso de velocidad",
			Place: "Av. Lugones km 4", Amount: "185000.50", Currency: "ARS", Status: portalsim.StatusUnpaid,
		}},
	}
}

// startPortal serves a portal of j on a real loopback server and a client
// of its own; both are closed when the test ends, the portal first.
func startPortal(t *testing.T, j portalsim.Jurisdiction) (*portalsim.Portal, string, *http.Client) {
	t.Helper()
	p := portalsim.New(j)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	t.Cleanup(p.Close)
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(client.CloseIdleConnections)
	return p, srv.URL, client
}

// byDomainPath is the by_domain path of each shape for DemoPlate.
func byDomainPath(s portalsim.Shape) string {
	switch s {
	case portalsim.ShapeInfracciones:
		return "/servicios/infracciones/consulta?patente=" + portalsim.DemoPlate
	case portalsim.ShapeMultas:
		return "/v1/vehiculos/" + portalsim.DemoPlate + "/multas"
	}
	return "/api/v2/actas?dominio=" + portalsim.DemoPlate
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func get(ctx context.Context, client *http.Client, url string) (answer, error) {
	return do(ctx, client, http.MethodGet, url, "")
}

func do(ctx context.Context, client *http.Client, method, url, body string) (answer, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return answer{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}, err
}

// waitFor polls cond until it holds or a few seconds pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestFaultModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		fault   portalsim.Fault
		timeout time.Duration // the client's; 0 is none
		// want: a connection error (connErr), the client's own timeout
		// (timedOut), or an answer with status and these headers.
		connErr    bool
		timedOut   bool
		status     int
		header     map[string]string
		badJSON    bool // the body is not JSON
		minBody    int
		minElapsed time.Duration
	}{
		{name: "healthy", fault: portalsim.Fault{Mode: portalsim.Healthy}, status: 200,
			header: map[string]string{"Content-Type": "application/json; charset=utf-8"}},
		{name: "slow", fault: portalsim.Fault{Mode: portalsim.Slow, Latency: 150 * time.Millisecond},
			status: 200, minElapsed: 150 * time.Millisecond},
		{name: "slow past the client's timeout", fault: portalsim.Fault{Mode: portalsim.Slow, Latency: time.Minute},
			timeout: 100 * time.Millisecond, timedOut: true},
		{name: "flaky, every call fails", fault: portalsim.Fault{Mode: portalsim.Flaky, FailRate: 1, RetryAfter: 1500 * time.Millisecond},
			status: 503, header: map[string]string{"Retry-After": "2"}},
		{name: "flaky without retry-after", fault: portalsim.Fault{Mode: portalsim.Flaky, FailRate: 1},
			status: 503, header: map[string]string{"Retry-After": ""}},
		{name: "flaky, no call fails", fault: portalsim.Fault{Mode: portalsim.Flaky, FailRate: 0}, status: 200},
		{name: "throttle", fault: portalsim.Fault{Mode: portalsim.Throttle, RetryAfter: 20 * time.Second},
			status: 429, header: map[string]string{"Retry-After": "20", "RateLimit": `"default";r=0;t=20`}},
		{name: "throttle without retry-after", fault: portalsim.Fault{Mode: portalsim.Throttle},
			status: 429, header: map[string]string{"Retry-After": "", "RateLimit": ""}},
		{name: "down", fault: portalsim.Fault{Mode: portalsim.Down}, connErr: true},
		{name: "down after a delay", fault: portalsim.Fault{Mode: portalsim.Down, Latency: 50 * time.Millisecond},
			connErr: true, minElapsed: 50 * time.Millisecond},
		{name: "hang", fault: portalsim.Fault{Mode: portalsim.Hang}, timeout: 100 * time.Millisecond, timedOut: true},
		{name: "error", fault: portalsim.Fault{Mode: portalsim.Error}, status: 200, badJSON: true,
			header: map[string]string{"Content-Type": "application/json; charset=utf-8"}},
		{name: "oversized", fault: portalsim.Fault{Mode: portalsim.Oversized}, status: 200,
			minBody: portalsim.OversizedBytes},
		{name: "forced status", fault: portalsim.Fault{Mode: portalsim.Healthy, Status: 500}, status: 500},
		// A shape without a challenge or a busy page of its own: 403, and
		// 429 without Retry-After, each with its usual error body.
		{name: "captcha", fault: portalsim.Fault{Mode: portalsim.Captcha}, status: 403,
			header: map[string]string{"Content-Type": "application/json; charset=utf-8"}},
		{name: "busy", fault: portalsim.Fault{Mode: portalsim.Busy}, status: 429,
			header: map[string]string{"Retry-After": "", "RateLimit": ""}},
		{name: "forced 503 with retry-after", fault: portalsim.Fault{Mode: portalsim.Slow, Latency: 10 * time.Millisecond, Status: 503, RetryAfter: 3 * time.Second},
			status: 503, header: map[string]string{"Retry-After": "3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, base, client := startPortal(t, testJurisdiction(portalsim.ShapeActas, tt.fault))
			ctx := t.Context()
			if tt.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.timeout)
				defer cancel()
			}
			start := time.Now()
			got, err := get(ctx, client, base+byDomainPath(portalsim.ShapeActas))
			elapsed := time.Since(start)
			switch {
			case tt.timedOut:
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("error = %v, want the client's deadline", err)
				}
				// The portal lets go of the call as soon as the client leaves.
				waitFor(t, "the call to end", func() bool { return p.Calls().InFlight == 0 })
				return
			case tt.connErr:
				if err == nil {
					t.Fatalf("got status %d, want a connection error", got.status)
				}
				if errors.Is(err, context.DeadlineExceeded) {
					t.Errorf("error = %v, want a connection error", err)
				}
			case err != nil:
				t.Fatalf("GET: %v", err)
			case got.status != tt.status:
				t.Errorf("status = %d, want %d (body %.200s)", got.status, tt.status, got.body)
			}
			for k, v := range tt.header {
				if g := got.header.Get(k); g != v {
					t.Errorf("%s = %q, want %q", k, g, v)
				}
			}
			if v := json.Valid(got.body); err == nil && v == tt.badJSON {
				t.Errorf("json.Valid(body) = %v, want %v (body %.200s)", v, !tt.badJSON, got.body)
			}
			if len(got.body) < tt.minBody {
				t.Errorf("body is %d bytes, want at least %d", len(got.body), tt.minBody)
			}
			if elapsed < tt.minElapsed {
				t.Errorf("answered after %v, want at least %v", elapsed, tt.minElapsed)
			}
		})
	}
}

func TestThrottleSendsHTTPDateEveryNth(t *testing.T) {
	t.Parallel()
	_, base, client := startPortal(t, testJurisdiction(portalsim.ShapeActas,
		portalsim.Fault{Mode: portalsim.Throttle, RetryAfter: 30 * time.Second}))
	for i := 1; i <= 2*portalsim.HTTPDateEvery; i++ {
		before := time.Now()
		got, err := get(t.Context(), client, base+byDomainPath(portalsim.ShapeActas))
		if err != nil {
			t.Fatal(err)
		}
		ra := got.header.Get("Retry-After")
		if i%portalsim.HTTPDateEvery != 0 {
			if ra != "30" {
				t.Errorf("call %d: Retry-After = %q, want 30", i, ra)
			}
			continue
		}
		at, err := http.ParseTime(ra)
		if err != nil {
			t.Errorf("call %d: Retry-After = %q, want an HTTP date: %v", i, ra, err)
			continue
		}
		if lo, hi := before.Add(29*time.Second), time.Now().Add(32*time.Second); at.Before(lo) || at.After(hi) {
			t.Errorf("call %d: Retry-After = %v, want between %v and %v", i, at, lo, hi)
		}
	}
}

func TestFlakyFailsAboutItsRateDeterministically(t *testing.T) {
	t.Parallel()
	fails := func() int {
		_, base, client := startPortal(t, testJurisdiction(portalsim.ShapeMultas,
			portalsim.Fault{Mode: portalsim.Flaky, FailRate: 0.5}))
		n := 0
		for range 200 {
			got, err := get(t.Context(), client, base+byDomainPath(portalsim.ShapeMultas))
			if err != nil {
				t.Fatal(err)
			}
			if got.status == http.StatusServiceUnavailable {
				n++
			}
		}
		return n
	}
	first, second := fails(), fails()
	if first < 70 || first > 130 {
		t.Errorf("%d of 200 calls failed with fail_rate 0.5, want about 100", first)
	}
	if first != second {
		t.Errorf("two portals with the same seed failed %d and %d calls, want the same", first, second)
	}
}

func TestFaultAppliesToEveryKindOfCall(t *testing.T) {
	t.Parallel()
	_, base, client := startPortal(t, testJurisdiction(portalsim.ShapeActas,
		portalsim.Fault{Mode: portalsim.Healthy, Status: 502}))
	for _, path := range []string{byDomainPath(portalsim.ShapeActas), "/api/v2/actas?cuit=20123456786", "/api/v2/actas/T-1/boleta", "/nope"} {
		got, err := get(t.Context(), client, base+path)
		if err != nil {
			t.Fatal(err)
		}
		if got.status != http.StatusBadGateway {
			t.Errorf("%s: status %d, want 502", path, got.status)
		}
	}
}

func TestSetFaultChangesBehaviour(t *testing.T) {
	t.Parallel()
	p, base, client := startPortal(t, testJurisdiction(portalsim.ShapeActas, portalsim.Fault{}))
	if got := p.Fault(); got.Mode != portalsim.Healthy {
		t.Errorf("initial Fault() = %+v, want mode healthy", got)
	}
	if err := p.SetFault(portalsim.Fault{Mode: portalsim.Throttle}); err != nil {
		t.Fatal(err)
	}
	if got, err := get(t.Context(), client, base+byDomainPath(portalsim.ShapeActas)); err != nil || got.status != 429 {
		t.Errorf("after SetFault(throttle): %d, %v; want 429", got.status, err)
	}
	if err := p.SetFault(portalsim.Fault{Mode: "sideways"}); !errors.Is(err, portalsim.ErrInvalidFault) {
		t.Errorf("SetFault(unknown mode) = %v, want ErrInvalidFault", err)
	}
	if got := p.Fault().Mode; got != portalsim.Throttle {
		t.Errorf("after a refused SetFault, mode = %s, want throttle", got)
	}
}

func TestCloseReleasesHangingCalls(t *testing.T) {
	t.Parallel()
	for _, f := range []portalsim.Fault{{Mode: portalsim.Hang}, {Mode: portalsim.Slow, Latency: time.Hour}} {
		t.Run(string(f.Mode), func(t *testing.T) {
			t.Parallel()
			p, base, client := startPortal(t, testJurisdiction(portalsim.ShapeMultas, f))
			errs := make(chan error, 3)
			for range cap(errs) {
				go func() {
					_, err := get(t.Context(), client, base+byDomainPath(portalsim.ShapeMultas))
					errs <- err
				}()
			}
			waitFor(t, "three calls in flight", func() bool { return p.Calls().InFlight == 3 })
			closed := make(chan struct{})
			go func() { p.Close(); close(closed) }()
			select {
			case <-closed:
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not return")
			}
			for range cap(errs) {
				if err := <-errs; err == nil {
					t.Errorf("a released call got an answer, want a connection error")
				}
			}
			if got := p.Calls().InFlight; got != 0 {
				t.Errorf("InFlight = %d after Close, want 0", got)
			}
			// A closed portal drops every later call as well.
			if _, err := get(t.Context(), client, base+byDomainPath(portalsim.ShapeMultas)); err == nil {
				t.Errorf("a call after Close got an answer, want a connection error")
			}
			p.Close() // idempotent
		})
	}
}

func TestCallStats(t *testing.T) {
	t.Parallel()
	p, base, client := startPortal(t, testJurisdiction(portalsim.ShapeInfracciones, portalsim.Fault{}))
	for _, path := range []string{
		"/servicios/infracciones/consulta?patente=AB123CD",
		"/servicios/infracciones/consulta?patente=AC456DE",
		"/servicios/infracciones/consulta?documento=20123456786&tipo=cuit",
		"/servicios/infracciones/T-1/cupon",
		"/servicios/infracciones/consulta", // no parameters
		"/elsewhere",
		"/_sim/fault", // control calls are not counted
		"/_sim/calls",
	} {
		if _, err := get(t.Context(), client, base+path); err != nil {
			t.Fatal(err)
		}
	}
	want := portalsim.CallStats{ByDomain: 2, ByID: 1, Voucher: 1, Other: 2, Total: 6, MaxInFlight: 1}
	if got := p.Calls(); got != want {
		t.Errorf("Calls() = %+v, want %+v", got, want)
	}
	p.ResetCalls()
	if got := p.Calls(); got != (portalsim.CallStats{}) {
		t.Errorf("after ResetCalls, Calls() = %+v, want zero", got)
	}
}

func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	p, base, client := startPortal(t, testJurisdiction(portalsim.ShapeActas,
		portalsim.Fault{Mode: portalsim.Slow, Latency: 200 * time.Millisecond}))
	done := make(chan error, 4)
	for range cap(done) {
		go func() {
			_, err := get(t.Context(), client, base+byDomainPath(portalsim.ShapeActas))
			done <- err
		}()
	}
	for range cap(done) {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := p.Calls(); got.MaxInFlight != 4 || got.InFlight != 0 || got.ByDomain != 4 {
		t.Errorf("Calls() = %+v, want 4 by domain, at most 4 in flight, none now", got)
	}
}

func TestControlEndpoint(t *testing.T) {
	t.Parallel()
	p, base, client := startPortal(t, testJurisdiction(portalsim.ShapeActas, portalsim.Fault{Mode: portalsim.Down}))
	tests := []struct {
		method, path, body string
		status             int
		bodyHas            string
	}{
		{"GET", "/_sim/fault", "", 200, `"mode":"down"`},
		{"PUT", "/_sim/fault", `{"mode":"flaky","fail_rate":1,"retry_after":"4s"}`, 200, `"retry_after":"4s"`},
		{"GET", "/_sim/fault", "", 200, `"mode":"flaky"`},
		{"PUT", "/_sim/fault", `{"mode":`, 400, "bad fault JSON"},
		{"PUT", "/_sim/fault", `{"mode":"sideways"}`, 400, "unknown mode"},
		{"PUT", "/_sim/fault", `{"mode":"slow","delay":"1s"}`, 400, "unknown field"},
		{"PUT", "/_sim/fault", `{"mode":"slow","latency":"-1s"}`, 400, "negative"},
		{"PUT", "/_sim/fault", `{"mode":"slow"} {"mode":"hang"}`, 400, "more than one"},
		{"GET", "/_sim/fault", "", 200, `"mode":"flaky"`}, // refused PUTs changed nothing
		{"DELETE", "/_sim/fault", "", 405, ""},
		{"GET", "/_sim/calls", "", 200, `"total":0`},
		{"GET", "/_sim/calls/reset", "", 405, ""},
		{"POST", "/_sim/calls/reset", "", 204, ""},
		{"GET", "/_sim/other", "", 404, ""},
	}
	for _, tt := range tests {
		got, err := do(t.Context(), client, tt.method, base+tt.path, tt.body)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.method, tt.path, err)
		}
		if got.status != tt.status {
			t.Errorf("%s %s %s: status %d, want %d (body %s)", tt.method, tt.path, tt.body, got.status, tt.status, got.body)
		}
		if !bytes.Contains(got.body, []byte(tt.bodyHas)) {
			t.Errorf("%s %s %s: body %s, want it to contain %s", tt.method, tt.path, tt.body, got.body, tt.bodyHas)
		}
	}
	if got := p.Fault(); got.Mode != portalsim.Flaky || got.RetryAfter != 4*time.Second {
		t.Errorf("Fault() = %+v, want the PUT flaky fault", got)
	}
	got, err := get(t.Context(), client, base+byDomainPath(portalsim.ShapeActas))
	if err != nil || got.status != 503 || got.header.Get("Retry-After") != "4" {
		t.Errorf("data call after PUT: %d Retry-After %q, %v; want 503 with Retry-After 4", got.status, got.header.Get("Retry-After"), err)
	}
	stats, err := get(t.Context(), client, base+"/_sim/calls")
	if err != nil {
		t.Fatal(err)
	}
	var cs portalsim.CallStats
	if err := json.Unmarshal(stats.body, &cs); err != nil || cs.ByDomain != 1 || cs.Total != 1 {
		t.Errorf("GET /_sim/calls = %s (%v), want one by_domain call", stats.body, err)
	}
}
