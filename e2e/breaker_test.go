package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// plateN is the n-th of a series of distinct valid plates, for queries that
// must not be merged by the singleflight.
func plateN(n int) string { return fmt.Sprintf("AC%03dDE", n%1000) }

// TestDownSourceTrips: a source whose connection fails trips its breaker
// after min_calls calls, then is skipped without being called; a portal's
// 404 is a success with no infractions (SPEC 4.1, 5).
func TestDownSourceTrips(t *testing.T) {
	t.Parallel()
	down, empty := newPortal(t, hangUp()), newPortal(t, status(http.StatusNotFound))
	// A portal that is not even listening: the connection is refused.
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	e := startWith(t, source{id: "down", url: down.URL, extra: []string{"breaker: {open_for: 5s}"}},
		source{id: "empty", url: empty.URL},
		source{id: "refused", url: gone.URL, extra: []string{"breaker: {open_for: 5s}"}})

	const minCalls = 4
	for i := range minCalls {
		if st := e.breaker("down", "by_domain").State; st != "closed" {
			t.Fatalf("before call %d: breaker %s, want closed", i+1, st)
		}
		a := e.byDomain(plateN(i))
		if a.status != http.StatusOK {
			t.Fatalf("query %d: got status %d, want 200", i+1, a.status)
		}
		checkEntry(t, a.entry(t, "down"), "failed", "source-unavailable")
		checkEntry(t, a.entry(t, "refused"), "failed", "source-unavailable")
		en := a.entry(t, "empty")
		checkEntry(t, en, "succeeded", "")
		if en.Count == nil || *en.Count != 0 {
			t.Errorf("query %d: 404 source count: got %v, want 0", i+1, en.Count)
		}
	}
	if got := down.calls(); got != minCalls {
		t.Errorf("down portal received %d calls, want %d", got, minCalls)
	}
	b := e.breaker("down", "by_domain")
	if b.State != "open" {
		t.Fatalf("breaker: got %s, want open", b.State)
	}
	if lt := b.LastTransition; lt == nil || lt.From != "closed" || lt.To != "open" ||
		lt.Evidence["calls"] != minCalls || lt.Evidence["failures"] != minCalls {
		t.Errorf("last_transition: got %+v, want closed→open on %d of %d", lt, minCalls, minCalls)
	}

	a := e.byDomain(plateN(99))
	if got := down.calls(); got != minCalls {
		t.Errorf("after the trip the portal received %d calls, want still %d", got, minCalls)
	}
	for _, id := range []string{"down", "refused"} {
		en := a.entry(t, id)
		checkEntry(t, en, "skipped", "circuit-open")
		if ra := retryAfter(en.Problem); ra < 1 || ra > 5 {
			t.Errorf("%s retry_after: got %d, want 1 to 5 (open_for 5s)", id, ra)
		}
	}
	// The cumulative open time grows while the breaker is open.
	first := e.breaker("down", "by_domain").OpenSecondsTotal
	eventually(t, 5*time.Second, "open_seconds_total growing", func() bool {
		return e.breaker("down", "by_domain").OpenSecondsTotal > first
	})
	if got := empty.calls(); got != minCalls+1 {
		t.Errorf("404 portal received %d calls, want %d", got, minCalls+1)
	}
}

// TestNeverCounted: answers that say nothing of a portal's capacity never
// trip its breaker nor enter its window (SPEC 4.1): 429, 4xx, 5xx outside
// failure_statuses.
func TestNeverCounted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		answer   http.Handler
		queries  int
		wantSlug string
	}{
		{"429 without Retry-After", status(http.StatusTooManyRequests), 50, "rate-limited"},
		{"400", status(http.StatusBadRequest), 10, "source-rejected"},
		{"403", status(http.StatusForbidden), 10, "source-rejected"},
		{"501 outside failure_statuses", status(http.StatusNotImplemented), 10, "source-unavailable"},
		{"unreadable 200", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"resultado": `))
		}), 10, "source-error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, ok := newPortal(t, tt.answer), newPortal(t, one("OK-1"))
			e := startWith(t, source{id: "p", url: p.URL}, source{id: "ok", url: ok.URL})
			for i := range tt.queries {
				a := e.byDomain(plateN(i))
				if a.status != http.StatusOK {
					t.Fatalf("query %d: got status %d, want 200", i+1, a.status)
				}
				en := a.entry(t, "p")
				checkEntry(t, en, "failed", tt.wantSlug)
				if tt.wantSlug == "rate-limited" && retryAfter(en.Problem) < 1 {
					t.Errorf("query %d: rate-limited without retry_after: %+v", i+1, en.Problem)
				}
			}
			if got := p.calls(); got != tt.queries {
				t.Errorf("portal received %d calls, want %d", got, tt.queries)
			}
			b := e.breaker("p", "by_domain")
			if b.State != "closed" || b.Window.Calls != 0 || b.Window.Failures != 0 || b.LastTransition != nil {
				t.Errorf("breaker: got %s, window %+v, last %+v; want closed, empty window, no transition",
					b.State, b.Window, b.LastTransition)
			}
		})
	}
}

// TestCallerBudgetNeverCounts: calls cut short by the query's own budget
// are deadline-exceeded, not source-timeout, and never recorded.
func TestCallerBudgetNeverCounts(t *testing.T) {
	t.Parallel()
	p := newPortal(t, nil)
	p.set(p.slow(1500*time.Millisecond, one("P-1"))) // within its own timeout of 2s
	e := startWith(t, source{id: "p", url: p.URL})

	const n = 5 // more than min_calls
	for i := range n {
		a := e.byDomain(plateN(i), "timeout=300ms")
		checkEntry(t, a.entry(t, "p"), "failed", "deadline-exceeded")
	}
	if got := p.calls(); got != n {
		t.Errorf("portal received %d calls, want %d", got, n)
	}
	// Every cut call has ended at the portal: the aggregator has given up.
	eventually(t, 5*time.Second, "cut calls ended", func() bool { return p.done() == n })
	b := e.breaker("p", "by_domain")
	if b.State != "closed" || b.Window.Calls != 0 {
		t.Errorf("breaker: got %s with window %+v, want closed with no calls", b.State, b.Window)
	}

	// The window records what it should: one call that was not cut.
	p.set(one("P-1"))
	if a := e.byDomain(plateN(100)); a.status != http.StatusOK {
		t.Fatalf("got status %d, want 200", a.status)
	}
	if b := e.breaker("p", "by_domain"); b.Window.Calls != 1 || b.Window.Failures != 0 {
		t.Errorf("window after one success: got %+v, want 1 call, 0 failures", b.Window)
	}
}

// TestSourceTimeoutCounts: the source's own timeout elapsing is
// source-timeout, and counts against the portal.
func TestSourceTimeoutCounts(t *testing.T) {
	t.Parallel()
	p := newPortal(t, nil)
	p.set(p.hang())
	e := startWith(t, source{id: "p", url: p.URL, extra: []string{"timeout: 100ms", "breaker: {open_for: 5s}"}})

	a := e.byDomain(plateN(0))
	if a.status != http.StatusServiceUnavailable {
		t.Fatalf("got status %d, want 503", a.status)
	}
	checkEntry(t, a.entry(t, "p"), "failed", "source-timeout")
	if b := e.breaker("p", "by_domain"); b.Window.Calls != 1 || b.Window.Failures != 1 {
		t.Errorf("window: got %+v, want 1 call, 1 failure", b.Window)
	}
	for i := 1; i < 4; i++ {
		checkEntry(t, e.byDomain(plateN(i)).entry(t, "p"), "failed", "source-timeout")
	}
	if b := e.breaker("p", "by_domain"); b.State != "open" {
		t.Errorf("after 4 timeouts: breaker %s, want open", b.State)
	}
	before := p.calls()
	checkEntry(t, e.byDomain(plateN(4)).entry(t, "p"), "skipped", "circuit-open")
	// A call may time out before the portal's handler sees it (a loaded
	// machine can take 100ms to connect), so the count is at most 4; what
	// matters is that the skipped query made none.
	if got := p.calls(); got > 4 || got != before {
		t.Errorf("portal received %d calls (%d before the skipped query), want at most 4 and none after the trip", got, before)
	}
}

// TestRetryAfterExtendsOpen: a Retry-After on the answer that trips a
// breaker is the floor of its open time (SPEC 4.1).
func TestRetryAfterExtendsOpen(t *testing.T) {
	t.Parallel()
	p := newPortal(t, status(http.StatusServiceUnavailable, "Retry-After", "3"))
	e := startWith(t, source{id: "p", url: p.URL, extra: []string{"breaker: {min_calls: 1}"}})

	a := e.byDomain(plateN(0))
	en := a.entry(t, "p")
	checkEntry(t, en, "failed", "source-unavailable")
	if ra := retryAfter(en.Problem); ra != 3 {
		t.Errorf("retry_after of the call that got Retry-After: got %d, want 3", ra)
	}
	b := e.breaker("p", "by_domain")
	if b.State != "open" {
		t.Fatalf("breaker: got %s, want open", b.State)
	}
	if lt := b.LastTransition; lt == nil || lt.Evidence["retry_after"] != 3 {
		t.Errorf("last_transition: got %+v, want evidence.retry_after 3", lt)
	}

	time.Sleep(time.Second) // open_for (300ms) has passed; Retry-After (3s) has not
	a = e.byDomain(plateN(1))
	en = a.entry(t, "p")
	checkEntry(t, en, "skipped", "circuit-open")
	if ra := retryAfter(en.Problem); ra < 1 {
		t.Errorf("retry_after: got %d, want ≥ 1", ra)
	}
	if a.header.Get("Retry-After") == "" {
		t.Errorf("503 with every source skipped: no Retry-After header")
	}
	if st := e.breaker("p", "by_domain").State; st != "open" {
		t.Errorf("after 1s: breaker %s, want open", st)
	}
	if got := p.calls(); got != 1 {
		t.Errorf("portal received %d calls, want 1", got)
	}

	// After the Retry-After, the breaker lets a probe through.
	e.waitState("p", "by_domain", "half_open")
	p.set(one("P-1"))
	checkEntry(t, e.byDomain(plateN(2)).entry(t, "p"), "succeeded", "")
	if st := e.breaker("p", "by_domain").State; st != "closed" {
		t.Errorf("after the probe: breaker %s, want closed", st)
	}
}

// TestHalfOpen: after open_for, exactly one of many concurrent queries
// reaches the portal; its success closes the breaker with fresh counts, its
// failure opens it again (SPEC 4.1).
func TestHalfOpen(t *testing.T) {
	t.Parallel()
	p := newPortal(t, status(http.StatusServiceUnavailable))
	// A long source timeout, so that the probe can be held at the portal
	// for as long as the test needs.
	e := startWith(t, source{id: "p", url: p.URL, extra: []string{"timeout: 5s"}})
	plates := 0
	// trip makes k failed calls, which trip the breaker.
	trip := func(k int) {
		t.Helper()
		for range k {
			checkEntry(t, e.byDomain(plateN(plates)).entry(t, "p"), "failed", "source-unavailable")
			plates++
		}
		// open_for is short: the breaker may already be half-open.
		if b := e.breaker("p", "by_domain"); b.LastTransition == nil || b.LastTransition.To == "closed" {
			t.Fatalf("after %d failures: breaker %s, last transition %+v; want it tripped", k, b.State, b.LastTransition)
		}
	}

	trip(4)
	// Any reader sees the breaker turn half-open, the metrics included.
	eventually(t, 5*time.Second, "aggregator_breaker_state 1", func() bool {
		_, body := e.get("/metrics")
		return strings.Contains(string(body), `aggregator_breaker_state{breaker="p",operation="by_domain"} 1`+"\n")
	})
	before := p.calls()
	gate := make(chan struct{})
	p.set(p.gated(gate, one("P-1")))
	const n = 20
	answers := make(chan answer, n)
	release := make(chan struct{})
	for i := range n {
		go func() {
			<-release
			answers <- e.byDomain(plateN(200+i), "timeout=8s")
		}()
	}
	close(release)
	// The probe is held at the portal until every other query has been
	// answered: none of them may reach the portal meanwhile.
	var got []answer
	timeout := time.After(8 * time.Second)
wait:
	for len(got) < n-1 {
		select {
		case a := <-answers:
			got = append(got, a)
		case <-timeout:
			t.Errorf("only %d of %d queries answered while the probe was in flight", len(got), n-1)
			break wait
		}
	}
	close(gate)
	for len(got) < n {
		got = append(got, <-answers)
	}
	plates += n
	if got := p.calls() - before; got != 1 {
		t.Errorf("half-open: portal received %d calls, want exactly 1", got)
	}
	var succeeded, skipped int
	for i, a := range got {
		en := a.entry(t, "p")
		switch en.Status {
		case "succeeded":
			succeeded++
		case "skipped":
			skipped++
			checkEntry(t, en, "skipped", "circuit-open")
			if retryAfter(en.Problem) < 1 {
				t.Errorf("answer %d: skipped without retry_after", i)
			}
		default:
			t.Errorf("answer %d: got %s (%+v), want succeeded or skipped", i, en.Status, en.Problem)
		}
	}
	if succeeded != 1 || skipped != n-1 {
		t.Errorf("got %d succeeded and %d skipped, want 1 and %d", succeeded, skipped, n-1)
	}
	b := e.breaker("p", "by_domain")
	if b.State != "closed" || b.Window.Calls != 0 {
		t.Errorf("after the probe succeeded: breaker %s, window %+v; want closed, counts restarted", b.State, b.Window)
	}
	if lt := b.LastTransition; lt == nil || lt.From != "half_open" || lt.To != "closed" {
		t.Errorf("last_transition: got %+v, want half_open→closed", lt)
	}
	p.set(one("P-1"))
	e.byDomain(plateN(plates))
	plates++
	if b := e.breaker("p", "by_domain"); b.Window.Calls != 1 || b.Window.Failures != 0 {
		t.Errorf("window after one more success: got %+v, want 1 call and 0 failures", b.Window)
	}

	// A failed probe opens the breaker again, for open_for (made long
	// here, so that the test can see it open).
	// With that success in the window, 3 failures reach min_calls (4).
	p.set(status(http.StatusServiceUnavailable))
	trip(3)
	e.waitState("p", "by_domain", "half_open")
	if resp, body := e.admin(http.MethodPut, "/sources/p/breaker", `{"open_for": "5s"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT open_for: got %d %s, want 200", resp.StatusCode, body)
	}
	before = p.calls()
	checkEntry(t, e.byDomain(plateN(plates)).entry(t, "p"), "failed", "source-unavailable")
	plates++
	b = e.breaker("p", "by_domain")
	if b.State != "open" {
		t.Errorf("after the probe failed: breaker %s, want open", b.State)
	}
	if lt := b.LastTransition; lt == nil || lt.From != "half_open" || lt.To != "open" {
		t.Errorf("last_transition: got %+v, want half_open→open", lt)
	}
	checkEntry(t, e.byDomain(plateN(plates)).entry(t, "p"), "skipped", "circuit-open")
	if got := p.calls() - before; got != 1 {
		t.Errorf("portal received %d calls after the failed probe, want 1 (the probe)", got)
	}
}

// TestBreakerScope: sources sharing a breaker_key trip together, and each
// operation of a key has its own breaker (SPEC 4.1).
func TestBreakerScope(t *testing.T) {
	t.Parallel()
	platform := func() http.Handler {
		mux := http.NewServeMux()
		mux.Handle("GET /actas", status(http.StatusBadGateway))
		mux.Handle("GET /personas/{kind}/{id}", one("ID-1"))
		mux.Handle("GET /actas/{id}/boleta", voucherPDF())
		return mux
	}
	a, b, c := newPortal(t, platform()), newPortal(t, platform()), newPortal(t, one("C-1"))
	e := startWith(t,
		source{id: "a", url: a.URL, key: "plat", extra: []string{"breaker: {open_for: 5s}"}},
		source{id: "b", url: b.URL, key: "plat", extra: []string{"breaker: {open_for: 5s}"}},
		source{id: "c", url: c.URL},
	)

	// Two queries make four failed calls on the shared breaker: it trips.
	for i := range 2 {
		r := e.byDomain(plateN(i))
		checkEntry(t, r.entry(t, "a"), "failed", "source-unavailable")
		checkEntry(t, r.entry(t, "b"), "failed", "source-unavailable")
		checkEntry(t, r.entry(t, "c"), "succeeded", "")
	}
	bv := e.breaker("plat", "by_domain")
	if bv.State != "open" || !slices.Equal(bv.Sources, []string{"a", "b"}) {
		t.Errorf("plat/by_domain: got %s with sources %q, want open with [a b]", bv.State, bv.Sources)
	}
	r := e.byDomain(plateN(2))
	checkEntry(t, r.entry(t, "a"), "skipped", "circuit-open")
	checkEntry(t, r.entry(t, "b"), "skipped", "circuit-open")
	checkEntry(t, r.entry(t, "c"), "succeeded", "")
	if na, nb := a.calls(), b.calls(); na != 2 || nb != 2 {
		t.Errorf("portals received %d and %d calls, want 2 and 2", na, nb)
	}
	if st := e.breaker("c", "by_domain").State; st != "closed" {
		t.Errorf("c/by_domain: got %s, want closed", st)
	}

	// The other operations of the key are untouched.
	for _, op := range []string{"by_id", "voucher"} {
		if bv := e.breaker("plat", op); bv.State != "closed" || bv.Window.Calls != 0 {
			t.Errorf("plat/%s: got %s with window %+v, want closed and empty", op, bv.State, bv.Window)
		}
	}
	r = e.query("id=" + cuit)
	checkEntry(t, r.entry(t, "a"), "succeeded", "")
	checkEntry(t, r.entry(t, "b"), "succeeded", "")
	resp, body := e.get("/v1/sources/b/infractions/ID-1/voucher")
	if resp.StatusCode != http.StatusOK || string(body) != pdf {
		t.Errorf("voucher while by_domain is open: got %d %q, want 200 and the PDF", resp.StatusCode, body)
	}
	if na, nb := a.calls(), b.calls(); na != 3 || nb != 4 {
		t.Errorf("portals received %d and %d calls, want 3 and 4", na, nb)
	}
	if bv := e.breaker("plat", "by_id"); bv.Window.Calls != 2 {
		t.Errorf("plat/by_id window: got %+v, want 2 calls (one per source)", bv.Window)
	}
}

// TestSlowCall: with breaker.slow_call set, a slow success is used by the
// client and counted as a failure by the breaker (SPEC 4.1).
func TestSlowCall(t *testing.T) {
	t.Parallel()
	p := newPortal(t, nil)
	p.set(p.slow(300*time.Millisecond, one("P-1")))
	e := startWith(t, source{id: "p", url: p.URL, extra: []string{"breaker: {slow_call: 100ms, open_for: 5s}"}})
	for i := range 4 {
		a := e.byDomain(plateN(i))
		checkEntry(t, a.entry(t, "p"), "succeeded", "")
		if len(a.result.Infractions) != 1 {
			t.Errorf("query %d: got %d infractions, want the slow answer's 1", i+1, len(a.result.Infractions))
		}
	}
	b := e.breaker("p", "by_domain")
	if b.State != "open" {
		t.Errorf("after 4 slow calls: breaker %s, want open", b.State)
	}
	checkEntry(t, e.byDomain(plateN(4)).entry(t, "p"), "skipped", "circuit-open")
	if n := p.calls(); n != 4 {
		t.Errorf("portal received %d calls, want 4", n)
	}
}

// failFirst answers the first n requests with code, then with h.
func failFirst(n int, code int, h http.Handler) http.Handler {
	var mu sync.Mutex
	seen := 0
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen++
		fail := seen <= n
		mu.Unlock()
		if fail {
			status(code).ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// TestRetries: a failed call is retried within the query, each attempt
// recorded by the breaker; if the breaker opens meanwhile, the entry is the
// last attempt's failure (SPEC 4.1, 4.3).
func TestRetries(t *testing.T) {
	t.Parallel()
	retry := "retry: {max_retries: 3, initial_backoff: 10ms, max_backoff: 20ms}"

	t.Run("recovers", func(t *testing.T) {
		t.Parallel()
		p := newPortal(t, failFirst(2, http.StatusBadGateway, one("P-1")))
		e := startWith(t, source{id: "p", url: p.URL, extra: []string{retry}})
		checkEntry(t, e.byDomain(plate).entry(t, "p"), "succeeded", "")
		if n := p.calls(); n != 3 {
			t.Errorf("portal received %d calls, want 3", n)
		}
		if b := e.breaker("p", "by_domain"); b.Window.Calls != 3 || b.Window.Failures != 2 {
			t.Errorf("window: got %+v, want every attempt: 3 calls, 2 failures", b.Window)
		}
	})
	t.Run("not a 4xx", func(t *testing.T) {
		t.Parallel()
		p := newPortal(t, status(http.StatusForbidden))
		e := startWith(t, source{id: "p", url: p.URL, extra: []string{retry}})
		checkEntry(t, e.byDomain(plate).entry(t, "p"), "failed", "source-rejected")
		if n := p.calls(); n != 1 {
			t.Errorf("portal received %d calls, want 1", n)
		}
	})
	t.Run("breaker opens while retrying", func(t *testing.T) {
		t.Parallel()
		p := newPortal(t, status(http.StatusServiceUnavailable))
		e := startWith(t, source{id: "p", url: p.URL, extra: []string{retry, "breaker: {min_calls: 2, open_for: 5s}"}})
		checkEntry(t, e.byDomain(plate).entry(t, "p"), "failed", "source-unavailable")
		if n := p.calls(); n != 2 {
			t.Errorf("portal received %d calls, want 2 (the breaker refused the third)", n)
		}
		if b := e.breaker("p", "by_domain"); b.State != "open" {
			t.Errorf("breaker: %s, want open", b.State)
		}
	})
}

// TestProbeCutByCaller: a half-open probe cut short by its caller's budget
// does not hold the probe slot: the next query probes, and closes the
// breaker (SPEC 4.1: a breaker must always be able to close again).
func TestProbeCutByCaller(t *testing.T) {
	t.Parallel()
	p := newPortal(t, status(http.StatusServiceUnavailable))
	e := startWith(t, source{id: "p", url: p.URL})
	for i := range 4 {
		e.byDomain(plateN(i))
	}
	e.waitState("p", "by_domain", "half_open")

	p.set(p.hang())
	checkEntry(t, e.byDomain(plateN(10), "timeout=200ms").entry(t, "p"), "failed", "deadline-exceeded")
	eventually(t, 5*time.Second, "the cut probe ended", func() bool { return p.done() == p.calls() })
	if st := e.breaker("p", "by_domain").State; st != "half_open" {
		t.Errorf("after the cut probe: breaker %s, want half_open", st)
	}

	p.set(one("P-1"))
	checkEntry(t, e.byDomain(plateN(11)).entry(t, "p"), "succeeded", "")
	if st := e.breaker("p", "by_domain").State; st != "closed" {
		t.Errorf("after the next probe: breaker %s, want closed", st)
	}
	if n := p.calls(); n != 6 {
		t.Errorf("portal received %d calls, want 6 (4, the cut probe, the probe)", n)
	}
}

// TestConsecutiveFailures: with breaker.consecutive_failures set, that many
// failures in a row trip the breaker whatever the window's ratio (SPEC 4.1).
func TestConsecutiveFailures(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("P-1"))
	e := startWith(t, source{id: "p", url: p.URL,
		extra: []string{"breaker: {consecutive_failures: 3, min_calls: 100, open_for: 5s}"}})
	for i := range 5 {
		checkEntry(t, e.byDomain(plateN(i)).entry(t, "p"), "succeeded", "")
	}
	p.set(status(http.StatusGatewayTimeout))
	for i := range 3 {
		checkEntry(t, e.byDomain(plateN(10+i)).entry(t, "p"), "failed", "source-unavailable")
	}
	b := e.breaker("p", "by_domain")
	if b.State != "open" {
		t.Errorf("after 3 consecutive failures (3 of 8 calls): breaker %s, want open", b.State)
	}
	if lt := b.LastTransition; lt == nil || lt.Evidence["consecutive_failures"] != 3 {
		t.Errorf("last_transition: got %+v, want evidence.consecutive_failures 3", lt)
	}
	checkEntry(t, e.byDomain(plateN(20)).entry(t, "p"), "skipped", "circuit-open")
	if n := p.calls(); n != 8 {
		t.Errorf("portal received %d calls, want 8", n)
	}
}
