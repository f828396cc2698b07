package e2e

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The operators' views behind the dashboard (SPEC 10): which sources a
// rate limit holds, until when and why; each source's recent calls; each
// breaker's states over the last day, and when an open one probes.

type opsSource struct {
	ID         string `json:"id"`
	BreakerKey string `json:"breaker_key"`
	Pause      *struct {
		Until      time.Time `json:"until"`
		RetryAfter int       `json:"retry_after"`
		Reason     string    `json:"reason"`
	} `json:"pause"`
	Calls          int64            `json:"calls"`
	CallsPerMinute float64          `json:"calls_per_minute"`
	Outcomes       map[string]int64 `json:"outcomes"`
	Latency        *struct {
		P50 float64 `json:"p50"`
		P95 float64 `json:"p95"`
	} `json:"latency_ms"`
}

// opsSources reads GET /v1/admin/sources by source id.
func (e *env) opsSources() map[string]opsSource {
	e.t.Helper()
	resp, body := e.admin(http.MethodGet, "/sources", "")
	var doc struct {
		WindowSeconds float64     `json:"window_seconds"`
		Sources       []opsSource `json:"sources"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &doc) != nil {
		e.t.Fatalf("GET /v1/admin/sources: %d %s", resp.StatusCode, body)
	}
	out := map[string]opsSource{}
	for _, s := range doc.Sources {
		out[s.ID] = s
	}
	return out
}

type segment struct {
	State string    `json:"state"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

type opsHistory struct {
	BreakerKey string             `json:"breaker_key"`
	Operation  string             `json:"operation"`
	State      string             `json:"state"`
	KnownFrom  time.Time          `json:"known_from"`
	Segments   []segment          `json:"segments"`
	Seconds    map[string]float64 `json:"seconds"`
}

// history reads GET /v1/admin/history, by "key/operation".
func (e *env) history() (from, to time.Time, out map[string]opsHistory) {
	e.t.Helper()
	resp, body := e.admin(http.MethodGet, "/history", "")
	var doc struct {
		From     time.Time    `json:"from"`
		To       time.Time    `json:"to"`
		Breakers []opsHistory `json:"breakers"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &doc) != nil {
		e.t.Fatalf("GET /v1/admin/history: %d %s", resp.StatusCode, body)
	}
	out = map[string]opsHistory{}
	for _, h := range doc.Breakers {
		out[h.BreakerKey+"/"+h.Operation] = h
	}
	return doc.From, doc.To, out
}

func states(h opsHistory) string {
	var s []string
	for _, seg := range h.Segments {
		s = append(s, seg.State)
	}
	return strings.Join(s, ",")
}

func TestOperatorViews(t *testing.T) {
	t.Parallel()
	ok := newPortal(t, one("Q-1"))
	throttled := newPortal(t, status(http.StatusTooManyRequests, "Retry-After", "120"))
	down := newPortal(t, status(http.StatusServiceUnavailable))
	e := startWith(t,
		source{id: "caba", url: ok.URL},
		source{id: "pba", url: throttled.URL},
		source{id: "rosario", url: down.URL, extra: []string{"breaker: {min_calls: 2, open_for: 1m}"}})

	for i := range 3 {
		e.byDomain(plateN(i))
	}
	ops := e.opsSources()

	// pba: paused by its 429, breaker closed, and it says why.
	pba := ops["pba"]
	if pba.Pause == nil {
		t.Fatalf("pba: no pause after a 429 with Retry-After: 120 (%+v)", pba)
	}
	if pba.Pause.RetryAfter < 100 || pba.Pause.RetryAfter > 120 || time.Until(pba.Pause.Until) > 2*time.Minute {
		t.Errorf("pba's pause: %+v, want about 120 s left", pba.Pause)
	}
	if !strings.Contains(pba.Pause.Reason, "429") || !strings.Contains(pba.Pause.Reason, "2m0s") {
		t.Errorf("pba's pause reason %q, want the 429 and its 2m", pba.Pause.Reason)
	}
	if b := e.breaker("pba", "by_domain"); b.State != "closed" {
		t.Errorf("pba's breaker is %s, want closed (a 429 never trips it)", b.State)
	}
	if got := pba.Outcomes; got["rate_limited"] != 1 || got["skipped_rate_limited"] != 2 || pba.Calls != 3 {
		t.Errorf("pba's outcomes %v (%d calls), want the 429 and 2 calls skipped", got, pba.Calls)
	}

	// caba: three calls that succeeded, timed.
	caba := ops["caba"]
	if caba.Pause != nil || caba.Calls != 3 || caba.Outcomes["succeeded"] != 3 {
		t.Errorf("caba = %+v, want 3 succeeded calls, no pause", caba)
	}
	if caba.Latency == nil || caba.Latency.P50 <= 0 || caba.Latency.P95 < caba.Latency.P50 || caba.Latency.P95 > 2000 {
		t.Errorf("caba's latency %+v, want 0 < p50 ≤ p95", caba.Latency)
	}
	if ops["rosario"].Outcomes["unavailable"] != 2 || ops["rosario"].Outcomes["skipped_open"] != 1 {
		t.Errorf("rosario's outcomes %v, want 2 failures then 1 skipped", ops["rosario"].Outcomes)
	}

	// rosario's breaker tripped after two failures: open, with its probe a
	// minute away, and a history of closed then open.
	b := e.breaker("rosario", "by_domain")
	if b.State != "open" || b.OpenUntil == nil {
		t.Fatalf("rosario: %s, open_until %v; want open with a time to probe", b.State, b.OpenUntil)
	}
	if left := time.Until(*b.OpenUntil); left < 50*time.Second || left > time.Minute {
		t.Errorf("rosario probes in %v, want within open_for (1m)", left)
	}
	if c := e.breaker("caba", "by_domain"); c.OpenUntil != nil {
		t.Errorf("a closed breaker has open_until %v", c.OpenUntil)
	}
	from, to, hist := e.history()
	if d := to.Sub(from); d != 24*time.Hour {
		t.Errorf("history covers %v, want 24h", d)
	}
	r := hist["rosario/by_domain"]
	if got := states(r); got != "closed,open" || r.State != "open" {
		t.Errorf("rosario's history %q (now %s), want closed,open", got, r.State)
	}
	if r.KnownFrom.Before(from) || r.KnownFrom.After(r.Segments[0].Start) {
		t.Errorf("known_from %v outside the window or after the first segment", r.KnownFrom)
	}
	if r.Seconds["open"] <= 0 || r.Seconds["closed"] <= 0 || r.Seconds["half_open"] != 0 {
		t.Errorf("rosario's seconds %v", r.Seconds)
	}
	if got := states(hist["caba/by_id"]); got != "closed" {
		t.Errorf("caba/by_id's history %q, want closed all along", got)
	}

	// A forced open shows in the history at once.
	e.forceOpen("caba", "by_domain")
	if _, _, hist := e.history(); states(hist["caba/by_domain"]) != "closed,forced_open" {
		t.Errorf("after a forced open: %q", states(hist["caba/by_domain"]))
	}

	for _, tt := range []struct{ query, param string }{
		{"since=yesterday", "since"},
		{"since=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "since"},
	} {
		resp, body := e.admin(http.MethodGet, "/history?"+tt.query, "")
		var pd problemDoc
		_ = json.Unmarshal(body, &pd)
		if resp.StatusCode != http.StatusBadRequest || strings.Join(paramNames(pd), ",") != tt.param {
			t.Errorf("%s: %d %s, want 400 naming %s", tt.query, resp.StatusCode, body, tt.param)
		}
	}
	resp, _ := e.admin(http.MethodGet, "/history?since="+time.Now().Add(-time.Minute).UTC().Format(time.RFC3339), "")
	if resp.StatusCode != http.StatusOK {
		t.Errorf("history since a minute ago: %d", resp.StatusCode)
	}
	for _, path := range []string{"/v1/admin/sources", "/v1/admin/history"} {
		if resp, _ := e.get(path); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s without a token: %d, want 401", path, resp.StatusCode)
		}
	}
}

// TestFleetOperatorViews: with Redis, what one replica saw every replica
// shows: the pause and its reason, and the breaker's history.
func TestFleetOperatorViews(t *testing.T) {
	t.Parallel()
	url, prefix := fleetRedis(t)
	throttled := newPortal(t, status(http.StatusTooManyRequests, "Retry-After", "60"))
	down := newPortal(t, status(http.StatusServiceUnavailable))
	fl := fleet(t, 2, fleetYAML(url, prefix,
		source{id: "pba", url: throttled.URL},
		source{id: "p", url: down.URL, extra: []string{"breaker: {min_calls: 2, consecutive_failures: 2, open_for: 1m}"}}))
	for i := range 2 {
		fl[0].byDomain(plateN(i))
		time.Sleep(flushed)
	}
	fl[0].waitState("p", "by_domain", "open")
	var got opsSource
	eventually(t, 2*time.Second, "replica 2 showing pba's pause and why", func() bool {
		got = fl[1].opsSources()["pba"]
		return got.Pause != nil && strings.Contains(got.Pause.Reason, "429")
	})
	if got.Calls != 0 {
		t.Errorf("replica 2 counted %d calls of pba, want none: the figures are its own", got.Calls)
	}
	_, _, hist := fl[1].history()
	if h := hist["p/by_domain"]; states(h) != "closed,open" {
		t.Errorf("replica 2's history of p/by_domain: %q, want closed,open (%+v)", states(h), h)
	}
	if b := fl[1].breaker("p", "by_domain"); b.OpenUntil == nil {
		t.Errorf("replica 2: no open_until for an open breaker (%s)", b.State)
	} else if left := time.Until(*b.OpenUntil); left <= 0 || left > time.Minute {
		t.Errorf("replica 2: probe in %v", left)
	}
}

// TestSinceOfABreakerThatNeverMoved: a breaker without a transition is in
// its state since its history began (the start-up, here), as its strip
// says, not since the admin API first listed it.
func TestSinceOfABreakerThatNeverMoved(t *testing.T) {
	t.Parallel()
	ok := newPortal(t, one("Q-1"))
	e := startWith(t, source{id: "caba", url: ok.URL})
	time.Sleep(1100 * time.Millisecond)
	listed := time.Now()
	resp, body := e.admin(http.MethodGet, "/breakers", "")
	var doc struct {
		Breakers []struct {
			BreakerKey string    `json:"breaker_key"`
			Operation  string    `json:"operation"`
			Since      time.Time `json:"since"`
		} `json:"breakers"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &doc) != nil {
		t.Fatalf("GET /v1/admin/breakers: %d %s", resp.StatusCode, body)
	}
	_, _, hist := e.history()
	for _, b := range doc.Breakers {
		known := hist[b.BreakerKey+"/"+b.Operation].KnownFrom
		if !b.Since.Equal(known) || listed.Sub(b.Since) < time.Second {
			t.Errorf("%s/%s: since %v, want the start of its history %v (listed at %v)", b.BreakerKey, b.Operation, b.Since, known, listed)
		}
	}
}
