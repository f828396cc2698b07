package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/apptest"
	"github.com/multas/aggregator/internal/redistest"
)

// The replicas of these tests share their state through a real Redis
// (SPEC 2, 4.1, 4.2; issue 4): AGGREGATOR_TEST_REDIS, else the default port
// on loopback; the test that stops Redis runs a redis-server of its own.

// fleetRedis is the Redis of the fleet tests and a key prefix of the
// test's own, so that tests run in parallel on one Redis (see
// internal/redistest: never a silent skip in CI).
func fleetRedis(t *testing.T) (url, prefix string) {
	t.Helper()
	c, url := redistest.Connect(t)
	return url, redistest.Prefix(t, c, "e2e-")
}

// fleetYAML is configYAML over srcs, sharing state through Redis at url
// under prefix; without url, replicas keep their state to themselves.
// The store's timeout is 1s, not the default 250ms: on a CI machine busy
// with the race detector a Redis answer can wait that long for a CPU, and
// a replica that took Redis for lost would decide on local state, which
// the exact fleet-wide counts of these tests do not allow.
func fleetYAML(url, prefix string, srcs ...source) string {
	text := configYAML(adminToken, srcs...)
	if url != "" {
		text += fmt.Sprintf("store: {redis_url: %q, key_prefix: %q, flush_interval: 10ms, timeout: 1s}\n", url, prefix)
	}
	return text
}

// flushed is how long a replica may hold its outcome counts back (SPEC 11:
// a closed breaker's calls reach the fleet's counts at the next flush,
// every store.flush_interval, 10ms here), with a margin: tests that count
// a dead portal's calls exactly wait that long after each call.
const flushed = 50 * time.Millisecond

// replica starts one replica of the configuration text, closed when the
// test ends. Its error lines (Redis lost, for one) go to the test's log
// under name.
func replica(t *testing.T, name, text string) *env {
	t.Helper()
	cfg, err := config.Parse([]byte(text), "e2e.yaml", nil)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, text)
	}
	e := start(t, cfg, app.Options{Logger: apptest.Logger(t, name, slog.LevelError)})
	t.Cleanup(func() { _ = e.app.Close() })
	return e
}

// fleet starts n replicas of the configuration text, named replica 1 to n.
func fleet(t *testing.T, n int, text string) []*env {
	t.Helper()
	replicas := make([]*env, n)
	for i := range replicas {
		replicas[i] = replica(t, fmt.Sprintf("replica %d", i+1), text)
	}
	return replicas
}

// trip fails k queries of source p/by_domain round-robin over replicas,
// from plate number from on. The portal must answer with a failure.
func trip(t *testing.T, replicas []*env, k, from int) {
	t.Helper()
	for i := range k {
		en := replicas[i%len(replicas)].byDomain(plateN(from+i)).entry(t, "p")
		checkEntry(t, en, "failed", "source-unavailable")
		time.Sleep(flushed)
	}
}

// readyz reads GET /readyz: its HTTP status and its status member.
func (e *env) readyz() (int, string) {
	e.t.Helper()
	resp, body := e.get("/readyz")
	var doc struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		e.t.Errorf("GET /readyz: %v\n%s", err, body)
	}
	return resp.StatusCode, doc.Status
}

// metric reads the value of one sample (name and labels, as exposed) of
// GET /metrics; it fails the test when the sample is absent.
func (e *env) metric(sample string) float64 {
	e.t.Helper()
	resp, body := e.get("/metrics")
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /metrics: got %d", resp.StatusCode)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				e.t.Fatalf("metric %s: %q", sample, v)
			}
			return f
		}
	}
	e.t.Fatalf("metric %s: not in GET /metrics", sample)
	return 0
}

// TestFleetTripsOnce: three replicas share one breaker, so a portal that
// goes down receives about min_calls calls from the whole fleet, not
// min_calls from every replica (issue 4). Queries go round-robin; the count
// is taken once every replica skips the portal.
func TestFleetTripsOnce(t *testing.T) {
	t.Parallel()
	const minCalls, replicas = 4, 3
	// calls runs the scenario and returns what the portal received.
	calls := func(t *testing.T, url, prefix string) int {
		t.Helper()
		down := newPortal(t, status(http.StatusServiceUnavailable))
		ok := newPortal(t, one("OK-1"))
		fl := fleet(t, replicas, fleetYAML(url, prefix,
			source{id: "p", url: down.URL, extra: []string{
				fmt.Sprintf("breaker: {min_calls: %d, failure_ratio: 0.5, open_for: 5s}", minCalls)}},
			source{id: "ok", url: ok.URL}))
		// Until one round in a row (one query on each replica) is skipped.
		for i, skipped := 0, 0; skipped < replicas; i++ {
			if i == 20*replicas {
				t.Fatalf("after %d queries, not every replica skips the portal", i)
			}
			a := fl[i%replicas].byDomain(plateN(i))
			if a.status != http.StatusOK {
				t.Fatalf("query %d: got status %d, want 200", i+1, a.status)
			}
			checkEntry(t, a.entry(t, "ok"), "succeeded", "")
			en := a.entry(t, "p")
			if en.Status == "skipped" {
				checkEntry(t, en, "skipped", "circuit-open")
				skipped++
				continue
			}
			checkEntry(t, en, "failed", "source-unavailable")
			skipped = 0
			time.Sleep(flushed)
		}
		for i, e := range fl {
			if st := e.breaker("p", "by_domain").State; st != "open" {
				t.Errorf("replica %d: breaker %s, want open", i+1, st)
			}
		}
		return down.calls()
	}

	alone := calls(t, "", "")
	if alone != replicas*minCalls {
		t.Errorf("independent replicas: the portal received %d calls, want %d (min_calls on each)", alone, replicas*minCalls)
	}
	t.Logf("independent replicas (no Redis): the portal received %d calls before every replica skipped it", alone)

	url, prefix := fleetRedis(t)
	shared := calls(t, url, prefix)
	t.Logf("replicas sharing Redis: the portal received %d calls before every replica skipped it", shared)
	t.Logf("portal calls before all %d replicas skip it (min_calls %d): %d with Redis, %d without",
		replicas, minCalls, shared, alone)
	if shared < minCalls || shared > minCalls+1 {
		t.Errorf("replicas sharing Redis: the portal received %d calls, want %d to %d", shared, minCalls, minCalls+1)
	}
}

// TestFleetTransitionsShared: the one trip of a shared breaker is one
// event, seen through every replica's admin API.
func TestFleetTransitionsShared(t *testing.T) {
	t.Parallel()
	url, prefix := fleetRedis(t)
	p := newPortal(t, status(http.StatusServiceUnavailable))
	fl := fleet(t, 3, fleetYAML(url, prefix, source{id: "p", url: p.URL, extra: []string{"breaker: {open_for: 5s}"}}))
	trip(t, fl, 4, 0)
	for i, e := range fl {
		var trips []event
		for _, ev := range e.events(time.Time{}) {
			if ev.BreakerKey == "p" && ev.Operation == "by_domain" {
				trips = append(trips, ev)
			}
		}
		if len(trips) != 1 || trips[0].From != "closed" || trips[0].To != "open" ||
			trips[0].Evidence["calls"] != 4 || trips[0].Evidence["failures"] != 4 {
			t.Errorf("replica %d: events of p/by_domain: got %+v, want one closed→open on 4 of 4 calls", i+1, trips)
		}
		if lt := e.breaker("p", "by_domain").LastTransition; lt == nil || lt.To != "open" {
			t.Errorf("replica %d: last_transition: got %+v, want →open", i+1, lt)
		}
	}
}

// TestFleetOneProbe: in half-open, one probe goes to the portal for the
// whole fleet, however many queries arrive at once on every replica; its
// success closes the breaker everywhere.
func TestFleetOneProbe(t *testing.T) {
	t.Parallel()
	url, prefix := fleetRedis(t)
	p := newPortal(t, status(http.StatusServiceUnavailable))
	// A long source timeout: the probe is held at the portal as long as the
	// test needs.
	fl := fleet(t, 3, fleetYAML(url, prefix, source{id: "p", url: p.URL, extra: []string{
		"timeout: 5s", "breaker: {min_calls: 4, failure_ratio: 0.5, open_for: 700ms}"}}))
	trip(t, fl, 4, 0)
	fl[0].waitState("p", "by_domain", "half_open")

	gate := make(chan struct{})
	p.set(p.gated(gate, one("P-1")))
	base := p.calls()
	const perReplica = 10
	total := len(fl) * perReplica
	answers := make(chan sourceEntry, total)
	var wg sync.WaitGroup
	for r, e := range fl {
		for j := range perReplica {
			wg.Go(func() {
				a := e.byDomain(plateN(100+r*perReplica+j), "timeout=10s")
				answers <- a.entry(t, "p")
			})
		}
	}
	// Every query has either answered or reached the portal.
	eventually(t, 10*time.Second, "every query answered or at the portal", func() bool {
		return len(answers)+p.calls()-base >= total
	})
	if got := p.calls() - base; got != 1 {
		t.Errorf("in half-open, %d calls reached the portal across the fleet, want 1", got)
	}
	close(gate)
	wg.Wait()
	close(answers)
	succeeded := 0
	for en := range answers {
		if en.Status == "succeeded" {
			succeeded++
			continue
		}
		checkEntry(t, en, "skipped", "circuit-open")
	}
	if succeeded != 1 {
		t.Errorf("%d queries succeeded, want the probe's only", succeeded)
	}
	for i, e := range fl {
		b := e.breaker("p", "by_domain")
		if b.State != "closed" {
			t.Errorf("replica %d after the probe: breaker %s, want closed", i+1, b.State)
		}
		if lt := b.LastTransition; lt == nil || lt.From != "half_open" || lt.To != "closed" {
			t.Errorf("replica %d: last_transition: got %+v, want half_open→closed", i+1, lt)
		}
	}
	if got := p.calls() - base; got != 1 {
		t.Errorf("the portal received %d calls in all, want 1", got)
	}
}

// TestFleetReset: a reset through one replica's admin API holds on every
// replica at once, although each remembered the breaker open for a long
// while.
func TestFleetReset(t *testing.T) {
	t.Parallel()
	url, prefix := fleetRedis(t)
	p := newPortal(t, status(http.StatusServiceUnavailable))
	fl := fleet(t, 3, fleetYAML(url, prefix, source{id: "p", url: p.URL, extra: []string{
		"breaker: {min_calls: 4, failure_ratio: 0.5, open_for: 30s}"}}))
	trip(t, fl, 4, 0)
	plates := 10
	// Every replica skips the portal, and so remembers the breaker open.
	for _, e := range fl {
		checkEntry(t, e.byDomain(plateN(plates)).entry(t, "p"), "skipped", "circuit-open")
		plates++
	}
	p.set(one("P-1"))
	base := p.calls()

	if resp, body := fl[0].admin(http.MethodPost, "/breakers/p/by_domain/reset", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("reset through replica 1: got %d %s, want 200", resp.StatusCode, body)
	}
	for i, e := range fl[1:] {
		// The query first: reading the breaker through the admin API would
		// refresh what the replica remembers.
		eventually(t, time.Second, fmt.Sprintf("replica %d calling the portal after the reset", i+2), func() bool {
			en := e.byDomain(plateN(plates)).entry(t, "p")
			plates++
			if en.Status == "skipped" {
				checkEntry(t, en, "skipped", "circuit-open")
				return false
			}
			checkEntry(t, en, "succeeded", "")
			return true
		})
		eventually(t, time.Second, fmt.Sprintf("replica %d showing the breaker closed", i+2), func() bool {
			return e.breaker("p", "by_domain").State == "closed"
		})
	}
	if got := p.calls() - base; got != 2 {
		t.Errorf("after the reset the portal received %d calls, want 2 (one through each other replica)", got)
	}
	if lt := fl[2].breaker("p", "by_domain").LastTransition; lt == nil || lt.To != "closed" || !strings.Contains(lt.Reason, "manual reset") {
		t.Errorf("replica 3: last_transition: got %+v, want the manual reset", lt)
	}
}

// TestFleetPause: a 429 with Retry-After received through one replica
// pauses the source on every replica (SPEC 4.2), without a call.
func TestFleetPause(t *testing.T) {
	t.Parallel()
	url, prefix := fleetRedis(t)
	p := newPortal(t, one("P-1"))
	fl := fleet(t, 3, fleetYAML(url, prefix, source{id: "p", url: p.URL}))
	// Every replica serves the source first: each has read its pause (none).
	for i, e := range fl {
		checkEntry(t, e.byDomain(plateN(i)).entry(t, "p"), "succeeded", "")
	}

	p.set(status(http.StatusTooManyRequests, "Retry-After", "3"))
	en := fl[0].byDomain(plateN(10)).entry(t, "p")
	checkEntry(t, en, "failed", "rate-limited")
	if ra := retryAfter(en.Problem); ra != 3 {
		t.Errorf("retry_after of the call that got the 429: got %d, want 3", ra)
	}
	base := p.calls()
	for i, e := range fl[1:] {
		eventually(t, 2*time.Second, fmt.Sprintf("replica %d showing the source paused", i+2), func() bool {
			ops, _ := e.coverage()
			return !ops["p"]["by_domain"]
		})
		a := e.byDomain(plateN(20 + i))
		en := a.entry(t, "p")
		checkEntry(t, en, "skipped", "rate-limited")
		if ra := retryAfter(en.Problem); ra < 1 || ra > 3 {
			t.Errorf("replica %d: retry_after: got %d, want 1 to 3", i+2, ra)
		}
		if a.header.Get("Retry-After") == "" {
			t.Errorf("replica %d: 503 with every source skipped: no Retry-After header", i+2)
		}
	}
	if got := p.calls(); got != base {
		t.Errorf("during the pause the portal received %d more calls, want none", got-base)
	}
	// A 429 never trips a breaker.
	for i, e := range fl {
		if b := e.breaker("p", "by_domain"); b.State != "closed" || b.Window.Failures != 0 {
			t.Errorf("replica %d: breaker %s with window %+v, want closed without failures", i+1, b.State, b.Window)
		}
	}
}

// TestFleetProbeOfKilledReplica: a replica dies while its query holds the
// fleet's probe lease; the lease (the source's timeout + 1 s) runs out,
// another replica probes, and the breaker closes.
func TestFleetProbeOfKilledReplica(t *testing.T) {
	t.Parallel()
	url, prefix := fleetRedis(t)
	p := newPortal(t, status(http.StatusServiceUnavailable))
	fl := fleet(t, 3, fleetYAML(url, prefix, source{id: "p", url: p.URL, extra: []string{
		"timeout: 2s", "breaker: {min_calls: 4, failure_ratio: 0.5, open_for: 500ms}"}}))
	victim := fl[0]

	trip(t, fl, 4, 0)
	fl[1].waitState("p", "by_domain", "half_open")
	p.set(p.hang())
	base := p.calls()

	// The victim's query takes the probe and hangs at the portal.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, victim.srv.URL+"/v1/infractions?domain="+plateN(50), nil)
	if err != nil {
		t.Fatal(err)
	}
	abandoned := make(chan error, 1)
	go func() {
		resp, err := victim.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		abandoned <- err
	}()
	eventually(t, 5*time.Second, "the victim's probe at the portal", func() bool { return p.calls() == base+1 })

	// Killed: its Redis connections go first, so the probe's end is never
	// recorded; then its client and its server go.
	if err := victim.app.Close(); err != nil {
		t.Errorf("closing the victim: %v", err)
	}
	cancel()
	if err := <-abandoned; !errors.Is(err, context.Canceled) {
		t.Errorf("the victim's query: got %v, want it abandoned", err)
	}
	victim.srv.Close()

	// The lease holds: the other replicas do not probe.
	en := fl[1].byDomain(plateN(51)).entry(t, "p")
	checkEntry(t, en, "skipped", "circuit-open")
	if got := p.calls(); got != base+1 {
		t.Errorf("while the lease holds the portal received %d calls, want 1", got-base)
	}

	p.set(one("P-1"))
	n := 0
	eventually(t, 10*time.Second, "a probe after the lease", func() bool {
		n++
		en := fl[1+n%2].byDomain(plateN(60+n)).entry(t, "p")
		if en.Status == "skipped" {
			checkEntry(t, en, "skipped", "circuit-open")
			return false
		}
		checkEntry(t, en, "succeeded", "")
		return true
	})
	if got := p.calls() - base; got != 2 {
		t.Errorf("the portal received %d calls, want 2 (the victim's probe, then one after its lease)", got)
	}
	for i, e := range fl[1:] {
		b := e.breaker("p", "by_domain")
		if b.State != "closed" {
			t.Errorf("replica %d: breaker %s, want closed", i+2, b.State)
		}
		if lt := b.LastTransition; lt == nil || lt.From != "half_open" || lt.To != "closed" {
			t.Errorf("replica %d: last_transition: got %+v, want half_open→closed", i+2, lt)
		}
	}
}

// TestFleetRedisStops: Redis dies in the middle of a load test. No query
// fails because of it; the replicas say they are degraded, and share their
// state again once Redis is back.
//
// Not parallel: its load keeps the CPUs busy, and a replica whose Redis
// call waits for a CPU longer than the store's timeout takes Redis for slow
// and decides on local state for a while, which the exact fleet-wide counts
// of the other tests do not allow.
func TestFleetRedisStops(t *testing.T) {
	rs := redistest.StartServer(t)
	p := newPortal(t, one("P-1"))
	fl := fleet(t, 2, fleetYAML(rs.URL(), "e2e:", source{id: "p", url: p.URL}))
	for i, e := range fl {
		if code, st := e.readyz(); code != http.StatusOK || st != "ok" {
			t.Fatalf("replica %d before the load: /readyz %d %q, want 200 ok", i+1, code, st)
		}
	}

	// The load: steady queries on both replicas until stop is closed.
	stop := make(chan struct{})
	var (
		wg                sync.WaitGroup
		queries, failures atomic.Int64
		firstFailure      atomic.Value
	)
	for g := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				a := fl[(g+i)%len(fl)].byDomain(plateN(g*250 + i%250))
				queries.Add(1)
				if a.status != http.StatusOK || !a.result.Complete {
					failures.Add(1)
					firstFailure.CompareAndSwap(nil, fmt.Sprintf("status %d, sources %+v, problem %+v", a.status, a.entries(), a.problem))
				}
			}
		})
	}
	halt := sync.OnceFunc(func() { close(stop); wg.Wait() })
	t.Cleanup(halt)
	time.Sleep(time.Second) // the load runs on shared state

	rs.Kill()
	for i, e := range fl {
		eventually(t, 5*time.Second, fmt.Sprintf("replica %d: /readyz degraded", i+1), func() bool {
			code, st := e.readyz()
			return code == http.StatusOK && st == "degraded"
		})
		if v := e.metric("aggregator_store_degraded"); v != 1 {
			t.Errorf("replica %d while Redis is down: aggregator_store_degraded %v, want 1", i+1, v)
		}
	}
	time.Sleep(time.Second) // the load runs on local state

	rs.Start()
	for i, e := range fl {
		eventually(t, 10*time.Second, fmt.Sprintf("replica %d: /readyz ok", i+1), func() bool {
			code, st := e.readyz()
			return code == http.StatusOK && st == "ok"
		})
		if v := e.metric("aggregator_store_degraded"); v != 0 {
			t.Errorf("replica %d with Redis back: aggregator_store_degraded %v, want 0", i+1, v)
		}
	}
	halt()
	t.Logf("%d queries during the load, %d failed", queries.Load(), failures.Load())
	if n := failures.Load(); n > 0 {
		t.Errorf("%d of %d queries failed during the load; the first: %v", n, queries.Load(), firstFailure.Load())
	}

	// Sharing resumes: a forced open through replica 1 holds on replica 2,
	// whose own breaker never left closed.
	fl[0].forceOpen("p", "by_domain")
	eventually(t, 2*time.Second, "replica 2 skipping the source forced open through replica 1", func() bool {
		en := fl[1].byDomain(plateN(999)).entry(t, "p")
		return en.Status == "skipped" && en.Problem != nil && en.Problem.Type == baseURI+"circuit-open"
	})
	if st := fl[1].breaker("p", "by_domain").State; st != "forced_open" {
		t.Errorf("replica 2: breaker %s, want forced_open", st)
	}
}
