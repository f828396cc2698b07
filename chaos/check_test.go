package chaos

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/portalsim"
)

// The checks must catch what they are for: each is fed a breach.

func TestProbeCheck(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	id := breaker.ID{Key: "p01", Operation: aggregator.ByDomain}
	// probe is a call of replica rep that arrived at from and ended at to
	// (ms after t0), answered status under kind.
	probe := func(rep, from, to int, kind Kind, status int) *call {
		return &call{replica: rep, breaker: id, start: at(from - 1), end: at(to), clean: true,
			arrived: at(from), served: at(to), status: status, kindIn: kind, kindOut: kind}
	}
	replay := func(c *call, from, to int) *call {
		r := *c
		r.replay, r.arrived, r.served, r.end = true, at(from), at(to), time.Time{}
		return &r
	}
	tests := []struct {
		name       string
		shared     bool
		calls      []*call
		violations int
		probes     int
	}{
		{"one probe", true, []*call{probe(0, 10, 50, Healthy, 200)}, 0, 1},
		{"two at once", true, []*call{probe(0, 10, 500, Hang, 0), probe(1, 20, 600, Hang, 0)}, 1, 2},
		{"two at once on two independent replicas", false, []*call{probe(0, 10, 500, Hang, 0), probe(1, 20, 600, Hang, 0)}, 0, 2},
		{"two at once on one replica", false, []*call{probe(1, 10, 500, Hang, 0), probe(1, 20, 600, Hang, 0)}, 1, 2},
		{"after a 429", true, []*call{probe(0, 10, 20, Throttle, 429), probe(0, 30, 40, Healthy, 200)}, 0, 2},
		{"after data", true, []*call{probe(0, 10, 20, Healthy, 200), probe(2, 30, 40, Healthy, 200)}, 1, 2},
		{"after a 503", true, []*call{probe(0, 10, 20, Flaky, 503), probe(2, 30, 40, Flaky, 503)}, 1, 2},
		{"after the lease ran out", true, []*call{probe(0, 10, 5000, Hang, 0), probe(1, 10+int((sourceTimeout+time.Second)/time.Millisecond), 5100, Hang, 0)}, 0, 2},
		{"replayed by the transport", true, func() []*call {
			c := probe(0, 10, 30, Down, 0)
			return []*call{c, replay(c, 31, 40)}
		}(), 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEpisodes(tt.shared)
			calls := newCallLog()
			calls.byBreaker[id] = tt.calls
			replicas := 3 // each replica has its own episode
			if tt.shared {
				replicas = 1 // one replica's transitions stand for the fleet's
			}
			for rep := range replicas {
				e.add(transition{replica: rep, id: id, from: breaker.Open, to: breaker.HalfOpen, at: at(0)})
				e.add(transition{replica: rep, id: id, from: breaker.HalfOpen, to: breaker.Closed, at: at(10_000)})
			}
			vs := e.check(calls, at(20_000), false)
			if len(vs) != tt.violations {
				t.Errorf("got %d violations, want %d: %v", len(vs), tt.violations, vs)
			}
			if _, st := e.snapshot(); st.Probes != tt.probes {
				t.Errorf("got %d probes, want %d", st.Probes, tt.probes)
			}
			if again := e.check(calls, at(20_000), true); len(again) != 0 {
				t.Errorf("checked twice: %v", again)
			}
		})
	}
}

func TestEpisodeNotCheckedBeforeItEnds(t *testing.T) {
	id := breaker.ID{Key: "p01", Operation: aggregator.ByID}
	now := time.Now()
	e := newEpisodes(true)
	calls := newCallLog()
	calls.byBreaker[id] = []*call{
		{replica: 0, breaker: id, arrived: now.Add(time.Millisecond)}, // still in flight
		{replica: 1, breaker: id, arrived: now.Add(2 * time.Millisecond)},
	}
	e.add(transition{replica: 0, id: id, from: breaker.Open, to: breaker.HalfOpen, at: now})
	if vs := e.check(calls, now.Add(time.Second), false); len(vs) != 0 {
		t.Errorf("an episode still going was checked: %v", vs)
	}
	if vs := e.check(calls, now.Add(time.Second), true); len(vs) != 1 {
		t.Errorf("final check: got %v, want the two probes in flight at once", vs)
	}
}

func TestPIIScanner(t *testing.T) {
	p := &people{plates: []string{"AB123CD"}, cuits: []string{"20123456786"}}
	var found []string
	s := newPIIScanner(p, func(where, needle, _ string) { found = append(found, where+": "+needle) })
	for _, text := range []string{
		`{"msg":"request","route":"/v1/infractions"}`,
		`aggregator_source_calls_total{source="p01"} 20123456`,
	} {
		if n := s.scan("clean", []byte(text)); n != 0 {
			t.Errorf("found %v in %q", found, text)
		}
	}
	for _, text := range []string{"domain=ab1 23cd", "GET /v1/infractions?domain=ab1+23cd", "domain=ab1%2023cd", "AB1-23CD", "plate ab123cd", "id 20-12345678-6", "20123456786"} {
		if n := s.scan("dirty", []byte(text)); n == 0 {
			t.Errorf("nothing found in %q", text)
		}
	}
}

func TestProfiles(t *testing.T) {
	if len(profiles) != 20 {
		t.Errorf("%d profiles, want one for each of 20 portals", len(profiles))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, p := range profiles {
		kinds := map[Kind]bool{}
		var total time.Duration
		for step := range 50 {
			ph := p.next(rng, step)
			if ph.d <= 0 {
				t.Fatalf("%s: step %d lasts %s", p.name, step, ph.d)
			}
			if ph.fault.RetryAfter > maxRetryAfter {
				t.Errorf("%s: Retry-After %s above %s", p.name, ph.fault.RetryAfter, maxRetryAfter)
			}
			kinds[ph.fault.Kind] = true
			total += ph.d
		}
		if p.name == "429 storms" && (len(kinds) != 2 || !kinds[Throttle] || !kinds[Healthy]) {
			t.Errorf("%s: kinds %v, want throttle and healthy only", p.name, kinds)
		}
		if p.name != "steady" && !kinds[Healthy] {
			t.Errorf("%s: never healthy, so never recovers", p.name)
		}
	}
}

// TestWrappers: a slowloris body outlasts a client's timeout, and a reset
// mid-body breaks the client's read, both after a 200.
func TestWrappers(t *testing.T) {
	j := portalsim.Jurisdiction{ID: "p01", Name: "Simulada", Shape: portalsim.ShapeMultas, Records: []portalsim.Record{{
		Domain: "AB123CD", ID: "M-1", Date: "2026-01-02T03:04:05", Amount: "100.00", Status: portalsim.StatusUnpaid,
		Description: strings.Repeat("x", 200)}}}
	calls := newCallLog()
	ps, err := startPortals([]portalsim.Jurisdiction{j}, []profile{profileOf(0)}, calls)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := closePortals(ps); err != nil {
			t.Error(err)
		}
	}()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: &tap{next: tr, replica: 0, log: calls}}
	get := func(timeout time.Duration) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ps[0].url+"/v1/vehiculos/AB123CD/multas", nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		_, err = io.ReadAll(resp.Body)
		return resp.StatusCode, err
	}

	if status, err := get(time.Second); status != 200 || err != nil {
		t.Fatalf("healthy: got %d, %v", status, err)
	}
	ps[0].set(Fault{Kind: Slowloris})
	if status, err := get(300 * time.Millisecond); status != 200 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("slowloris: got %d, %v; want 200 then the client's deadline", status, err)
	}
	ps[0].set(Fault{Kind: ResetMidBody})
	if status, err := get(time.Second); status != 200 || err == nil {
		t.Errorf("reset mid-body: got %d, %v; want 200 then a broken read", status, err)
	}

	calls.mu.Lock()
	defer calls.mu.Unlock()
	got := calls.byBreaker[breaker.ID{Key: "p01", Operation: aggregator.ByDomain}]
	if len(got) != 3 {
		t.Fatalf("recorded %d calls, want 3", len(got))
	}
	if c := got[0]; !c.clean || c.status != 200 || !c.decisive() || c.replica != 0 {
		t.Errorf("healthy call recorded as %+v, want a clean, decisive 200 of replica 0", c)
	}
	for _, c := range got[1:] {
		if c.clean || c.decisive() {
			t.Errorf("%s call recorded as clean or decisive: %+v", c.kindIn, c)
		}
	}
}

func TestOperationOf(t *testing.T) {
	for path, want := range map[string]aggregator.Operation{
		"/api/v2/actas?dominio=AB123CD":                          aggregator.ByDomain,
		"/api/v2/actas?cuit=20123456786":                         aggregator.ByID,
		"/api/v2/actas/Q-1/boleta":                               aggregator.Voucher,
		"/servicios/infracciones/consulta?patente=AB123CD":       aggregator.ByDomain,
		"/servicios/infracciones/consulta?documento=1&tipo=cuit": aggregator.ByID,
		"/servicios/infracciones/C-1/cupon":                      aggregator.Voucher,
		"/v1/vehiculos/AB123CD/multas":                           aggregator.ByDomain,
		"/v1/personas/20123456786/multas":                        aggregator.ByID,
		"/v1/multas/M-1/comprobante":                             aggregator.Voucher,
	} {
		if got := operationOf(httptest.NewRequest(http.MethodGet, path, nil)); got != want {
			t.Errorf("%s: got %q, want %q", path, got, want)
		}
	}
}

// TestProbeCheckDegraded: a replica whose Redis store is unreachable
// decides on local state, so its probes count against its own episodes,
// which end when the store is back.
func TestProbeCheckDegraded(t *testing.T) {
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	id := breaker.ID{Key: "p01", Operation: aggregator.ByID}
	probe := func(rep, from, to int) *call {
		return &call{replica: rep, breaker: id, start: at(from - 1), end: at(to), arrived: at(from), served: at(to), kindIn: Hang, kindOut: Hang}
	}
	e := newEpisodes(true)
	e.degrade(1, at(5), true)
	// Replica 1's own breaker, half-open while it is degraded.
	e.add(transition{replica: 1, id: id, from: breaker.Open, to: breaker.HalfOpen, at: at(100)})
	e.degrade(1, at(2000), false)
	// The fleet's breaker, half-open meanwhile.
	e.add(transition{replica: 0, id: id, from: breaker.Open, to: breaker.HalfOpen, at: at(0)})
	e.add(transition{replica: 0, id: id, from: breaker.HalfOpen, to: breaker.Closed, at: at(10_000)})
	calls := newCallLog()
	calls.byBreaker[id] = []*call{
		probe(0, 10, 500),    // the fleet's probe
		probe(1, 150, 700),   // replica 1's own probe, at the same time
		probe(1, 2100, 2500), // replica 1 back on shared state: counts for the fleet
		probe(2, 2200, 2600), // at the same time as the one above
	}
	vs := e.check(calls, at(20_000), false)
	if len(vs) != 1 || !strings.Contains(vs[0].Detail, "the fleet") {
		t.Errorf("got %v, want one violation of the fleet's episode (the last two probes)", vs)
	}
	if _, st := e.snapshot(); st.Degraded != 1 || st.Episodes != 2 {
		t.Errorf("got %+v, want 2 episodes checked, 1 of them with a degraded replica", st)
	}
	if got := e.degradedPeriods()[1]; len(got) != 1 || !got[0].to.Equal(at(2000)) {
		t.Errorf("degraded periods %v", got)
	}
}
