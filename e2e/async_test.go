package e2e

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
)

// The asynchronous queries of SPEC 3.4, end to end: real portals, a real
// webhook hookReceiver, the whole replica.

// hookKey is the webhook signing key of the tests, whsec_-encoded in the
// configuration.
var hookKey = []byte("e2e webhook signing key, 32 byte")

// asyncBlock is the async and webhooks configuration of a test; extra
// webhooks keys (YAML flow members) override the defaults here.
func asyncBlock(async, webhooks string) string {
	return fmt.Sprintf("async: {%s}\nwebhooks: {signing_secret: %q, %s}\n",
		async, "whsec_"+base64.StdEncoding.EncodeToString(hookKey), webhooks)
}

// asyncConfig is the test configuration of srcs with an async block.
func asyncConfig(t *testing.T, block string, srcs ...source) *config.Config {
	t.Helper()
	text := configYAML(adminToken, srcs...) + block
	cfg, err := config.Parse([]byte(text), "e2e.yaml", nil)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, text)
	}
	return cfg
}

// startAsync is start, with the replica's background work stopped at the
// end of the test.
func startAsync(t *testing.T, cfg *config.Config, opts app.Options) *env {
	t.Helper()
	e := start(t, cfg, opts)
	t.Cleanup(func() { _ = e.app.Close() })
	return e
}

// ---------------------------------------------------------------------------
// A webhook hookReceiver: a real HTTP server recording every delivery.

type hookCall struct {
	at     time.Time
	header http.Header
	body   []byte
	status int
	event  hookEvent
}

// hookEvent is the delivery envelope, decoded independently of the server.
type hookEvent struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      struct {
		ID     string `json:"id"`
		Status string `json:"status"`
		Result result `json:"result"`
	} `json:"data"`
}

type hookReceiver struct {
	URL string

	mu      sync.Mutex
	status  int  // the answer; 200 when 0
	hang    bool // hold requests until the client goes away
	calls   []hookCall
	hanging int
}

func newHookReceiver(t *testing.T, status int) *hookReceiver {
	t.Helper()
	r := &hookReceiver{status: status}
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		if r.hang {
			r.hanging++
			r.mu.Unlock()
			select {
			case <-req.Context().Done():
			case <-stop:
			}
			return
		}
		status := r.status
		if status == 0 {
			status = http.StatusOK
		}
		c := hookCall{at: time.Now(), header: req.Header.Clone(), body: body, status: status}
		if err := json.Unmarshal(body, &c.event); err != nil {
			t.Errorf("webhook body is not the envelope: %v\n%s", err, body)
		}
		r.calls = append(r.calls, c)
		r.mu.Unlock()
		w.WriteHeader(status)
	}))
	r.URL = srv.URL
	t.Cleanup(func() {
		close(stop)
		srv.Close()
	})
	return r
}

func (r *hookReceiver) set(status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status, r.hang = status, false
}

func (r *hookReceiver) setHang() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hang = true
}

func (r *hookReceiver) received() []hookCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hookCall(nil), r.calls...)
}

// delivered lists the calls answered with a 2xx for query qid.
func (r *hookReceiver) delivered(qid string) []hookCall {
	var out []hookCall
	for _, c := range r.received() {
		if c.event.Data.ID == qid && c.status/100 == 2 {
			out = append(out, c)
		}
	}
	return out
}

// verifySignature checks a delivery's Standard Webhooks signature, computed
// here from the key, independently of the server's code.
func verifySignature(t *testing.T, c hookCall) {
	t.Helper()
	id, ts := c.header.Get("webhook-id"), c.header.Get("webhook-timestamp")
	if id == "" || ts == "" {
		t.Fatalf("delivery without webhook-id or webhook-timestamp: %v", c.header)
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Fatalf("webhook-timestamp %q is not Unix seconds", ts)
	}
	// The time of the attempt: against when it was received, not when the
	// test looks (TestAsyncReceiverDownThenBack checks attempts seconds old).
	if d := c.at.Sub(time.Unix(unix, 0)); d < -5*time.Second || d > 5*time.Second {
		t.Errorf("webhook-timestamp %s is %v away from the attempt's arrival", ts, d)
	}
	mac := hmac.New(sha256.New, hookKey)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(c.body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if got := c.header.Get("webhook-signature"); got != want {
		t.Errorf("webhook-signature %q, want %q", got, want)
	}
	if ct := c.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("delivery Content-Type %q, want application/json", ct)
	}
}

// ---------------------------------------------------------------------------
// Helpers over the API.

type asyncQuery struct {
	ID          string     `json:"id"`
	Status      string     `json:"status"`
	CreatedAt   time.Time  `json:"created_at"`
	ExpiresAt   time.Time  `json:"expires_at"`
	CompletedAt *time.Time `json:"completed_at"`
	Result      result     `json:"result"`
}

// submit posts an asynchronous query and expects a 202.
func (e *env) postQuery(body string) asyncQuery {
	e.t.Helper()
	resp, raw := e.do(http.MethodPost, "/v1/queries", http.Header{"Content-Type": {"application/json"}}, body)
	if resp.StatusCode != http.StatusAccepted {
		e.t.Fatalf("POST /v1/queries %s: got %d %s, want 202", body, resp.StatusCode, raw)
	}
	var q asyncQuery
	if err := json.Unmarshal(raw, &q); err != nil {
		e.t.Fatalf("POST /v1/queries: %v\n%s", err, raw)
	}
	if loc := resp.Header.Get("Location"); loc != "/v1/queries/"+q.ID {
		e.t.Errorf("Location %q, want /v1/queries/%s", loc, q.ID)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		e.t.Errorf("POST /v1/queries: Cache-Control %q, want no-store", cc)
	}
	return q
}

// getQuery reads GET /v1/queries/{qid}.
func (e *env) getQuery(qid string) asyncQuery {
	e.t.Helper()
	resp, raw := e.get("/v1/queries/" + qid)
	if resp.StatusCode != http.StatusOK {
		e.t.Fatalf("GET /v1/queries/%s: got %d %s", qid, resp.StatusCode, raw)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		e.t.Errorf("GET /v1/queries: Cache-Control %q, want no-store", cc)
	}
	var q asyncQuery
	if err := json.Unmarshal(raw, &q); err != nil {
		e.t.Fatalf("GET /v1/queries/%s: %v", qid, err)
	}
	return q
}

type dlqEntry struct {
	ID          string          `json:"id"`
	QueryID     string          `json:"query_id"`
	CallbackURL string          `json:"callback_url"`
	Attempts    int             `json:"attempts"`
	LastError   string          `json:"last_error"`
	CreatedAt   time.Time       `json:"created_at"`
	FailedAt    time.Time       `json:"failed_at"`
	Payload     json.RawMessage `json:"payload"`
}

func (e *env) listDLQ() []dlqEntry {
	e.t.Helper()
	resp, raw := e.admin(http.MethodGet, "/dlq", "")
	var doc struct {
		Entries []dlqEntry `json:"entries"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &doc) != nil || doc.Entries == nil {
		e.t.Fatalf("GET /v1/admin/dlq: got %d %s", resp.StatusCode, raw)
	}
	return doc.Entries
}

// metric reads one sample of /metrics by its full name with labels, e.g.
// `aggregator_webhook_deliveries_total{outcome="delivered"}`; 0 if absent.
func (e *env) sample(sample string) float64 {
	e.t.Helper()
	_, body := e.get("/metrics")
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				e.t.Fatalf("metric %s: %q", sample, v)
			}
			return f
		}
	}
	return 0
}

// asyncPlate is the n-th of a series of distinct valid plates.
func asyncPlate(n int) string { return fmt.Sprintf("AB%03dCD", n) }

// timedHandler wraps h to record when each request arrived.
type timedHandler struct {
	mu sync.Mutex
	at []time.Time
	h  http.Handler
}

func (tm *timedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tm.mu.Lock()
	tm.at = append(tm.at, time.Now())
	h := tm.h
	tm.mu.Unlock()
	h.ServeHTTP(w, r)
}

func (tm *timedHandler) set(h http.Handler) {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	tm.h = h
}

func (tm *timedHandler) since(t0 time.Time) []time.Time {
	tm.mu.Lock()
	defer tm.mu.Unlock()
	var out []time.Time
	for _, at := range tm.at {
		if !at.Before(t0) {
			out = append(out, at)
		}
	}
	return out
}

// checkPace fails when two of the times (sorted) are closer than the pace
// of rps allows, less a tolerance for scheduling and network jitter.
func checkPace(t *testing.T, what string, times []time.Time, rps float64) {
	t.Helper()
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	min := time.Duration(float64(time.Second)/rps) - 40*time.Millisecond
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < min {
			t.Errorf("%s: calls %d and %d only %v apart: faster than %v/s", what, i, i+1, gap, rps)
		}
	}
}

// ---------------------------------------------------------------------------

// TestAsyncDelivered: a query whose sources all answer completes at once
// and is delivered, signed, as query.completed with the document of 3.1.
func TestAsyncDelivered(t *testing.T) {
	caba := newPortal(t, one("Q-1"))
	cordoba := newPortal(t, one("Q-2"))
	recv := newHookReceiver(t, 0)
	cfg := asyncConfig(t, asyncBlock("max_wait: 1m, release_rps: 5", "allow_private: true, backoff: 100ms"),
		source{id: "caba", url: caba.URL}, source{id: "cordoba", url: cordoba.URL})
	e := startAsync(t, cfg, app.Options{})

	q := e.postQuery(fmt.Sprintf(`{"domain": "ab-123-cd", "callback_url": %q}`, recv.URL+"/hooks?tenant=7"))
	if q.Status != "completed" || !q.Result.Complete || q.Result.Query.Domain != plate || q.CompletedAt == nil {
		t.Errorf("202 body: %+v, want completed with the whole result", q)
	}
	if d := q.ExpiresAt.Sub(q.CreatedAt); d != time.Minute {
		t.Errorf("expires_at - created_at = %v, want async.max_wait (1m)", d)
	}
	eventually(t, 5*time.Second, "delivery", func() bool { return len(recv.received()) == 1 })
	c := recv.received()[0]
	verifySignature(t, c)
	ev := c.event
	if ev.Type != "query.completed" || ev.Data.ID != q.ID || ev.Data.Status != "completed" {
		t.Errorf("envelope: type %q id %q status %q, want query.completed %s completed", ev.Type, ev.Data.ID, ev.Data.Status, q.ID)
	}
	if time.Since(ev.Timestamp) > 10*time.Second || ev.Timestamp.IsZero() {
		t.Errorf("envelope timestamp %v", ev.Timestamp)
	}
	r := ev.Data.Result
	if !r.Complete || r.Summary.Total != 2 || r.Summary.Succeeded != 2 || len(r.Infractions) != 2 || r.Query.Domain != plate {
		t.Errorf("delivered result: %+v", r)
	}
	checkEntry(t, r.entry(t, "cordoba"), "succeeded", "")

	got := e.getQuery(q.ID)
	if got.Status != "completed" || got.CompletedAt == nil || !got.Result.Complete {
		t.Errorf("GET: %+v", got)
	}
	resp, body := e.get("/v1/queries/q_unknown")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), baseURI+"not-found") {
		t.Errorf("unknown query: got %d %s, want 404 not-found", resp.StatusCode, body)
	}
	time.Sleep(100 * time.Millisecond)
	if n := len(recv.received()); n != 1 {
		t.Errorf("%d deliveries, want exactly 1", n)
	}
	if v := e.sample(`aggregator_webhook_deliveries_total{outcome="delivered"}`); v != 1 {
		t.Errorf("delivered metric = %v, want 1", v)
	}
}

// asyncDNS resolves callback names for the SSRF tests.
type asyncDNS map[string]string

func (f asyncDNS) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	a, ok := f[host]
	if !ok {
		return nil, fmt.Errorf("no such host: %s", host)
	}
	return []netip.Addr{netip.MustParseAddr(a)}, nil
}

// TestAsyncValidation: every bad member is named; callbacks that lead to
// private, loopback or link-local addresses, by literal or by name, are
// refused.
func TestAsyncValidation(t *testing.T) {
	caba := newPortal(t, one("Q-1"))
	cfg := asyncConfig(t, asyncBlock("max_wait: 1m", "allow_private: false"), source{id: "caba", url: caba.URL})
	e := startAsync(t, cfg, app.Options{Resolver: asyncDNS{
		"hooks.example.com": "203.0.113.7", "evil.example.com": "127.0.0.1", "meta.example.com": "169.254.169.254",
	}})
	good := `"callback_url": "https://hooks.example.com/cb"`
	for _, tc := range []struct {
		body string
		want []string
	}{
		{`{"domain": "AB123CD"}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "callback_url": "https://evil.example.com/cb"}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "callback_url": "https://meta.example.com/latest"}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "callback_url": "http://127.0.0.1:8080/cb"}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "callback_url": "http://[::1]/cb"}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "callback_url": "http://10.1.2.3/cb"}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "callback_url": "http://192.168.0.10/cb"}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "callback_url": "http://169.254.169.254/latest/meta-data"}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "callback_url": "https://unresolvable.example.com/cb"}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "callback_url": "ftp://hooks.example.com/cb"}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "callback_url": "/cb"}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "callback_url": 7}`, []string{"callback_url"}},
		{`{"domain": "AB123CD", "id": "20-31415926-9", ` + good + `}`, []string{"domain", "id"}},
		{`{` + good + `}`, []string{"domain", "id"}},
		{`{"domain": "ZZ", ` + good + `}`, []string{"domain"}},
		{`{"id": "20-31415926-8", ` + good + `}`, []string{"id"}},
		{`{"domain": "AB123CD", "sources": ["nope"], ` + good + `}`, []string{"sources"}},
		{`{"domain": "AB123CD", "sources": "caba", ` + good + `}`, []string{"sources"}},
		{`{"domain": "AB123CD", "sources": [], ` + good + `}`, []string{"sources"}},
		{`{"domain": "AB123CD", "max_wait": "2h", ` + good + `}`, []string{"max_wait"}},
		{`{"domain": "AB123CD", "max_wait": "soon", ` + good + `}`, []string{"max_wait"}},
		{`{"domain": "AB123CD", "max_wait": "-1s", ` + good + `}`, []string{"max_wait"}},
		{`{"domain": "ZZ", "callback_url": "http://127.0.0.1/", "max_wait": "2h"}`, []string{"domain", "callback_url", "max_wait"}},
		{`not json`, []string{"body"}},
		{`["domain"]`, []string{"body"}},
	} {
		resp, raw := e.do(http.MethodPost, "/v1/queries", http.Header{"Content-Type": {"application/json"}}, tc.body)
		var p problemDoc
		_ = json.Unmarshal(raw, &p)
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("%s: got %d %s, want 400", tc.body, resp.StatusCode, raw)
			continue
		}
		checkType(t, p, "invalid-query")
		if got := paramNames(p); !slices.Equal(got, tc.want) {
			t.Errorf("%s: invalid_params %v, want %v (%s)", tc.body, got, tc.want, raw)
		}
	}
	if n := caba.calls(); n != 0 {
		t.Errorf("the portal was called %d times by invalid queries", n)
	}
}

// TestAsyncReceiverDownThenBack: a hookReceiver that is down gets, once it is
// back, every result, without anyone resending anything, at no more than
// async.release_rps; each query's deliveries share one webhook-id.
func TestAsyncReceiverDownThenBack(t *testing.T) {
	caba := newPortal(t, one("Q-1"))
	recv := newHookReceiver(t, http.StatusServiceUnavailable)
	const rps = 5
	cfg := asyncConfig(t, asyncBlock(fmt.Sprintf("max_wait: 1m, release_rps: %d", rps),
		"allow_private: true, backoff: 100ms, max_attempts: 50, breaker: {consecutive_failures: 3, open_for: 400ms}"),
		source{id: "caba", url: caba.URL})
	e := startAsync(t, cfg, app.Options{})
	const n = 8
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.postQuery(fmt.Sprintf(`{"domain": %q, "callback_url": %q}`, asyncPlate(i), recv.URL)).ID
	}
	eventually(t, 5*time.Second, "origin breaker open, deliveries retained", func() bool {
		return e.sample(`aggregator_webhook_deliveries_total{outcome="retained"}`) > 0
	})
	time.Sleep(time.Second) // down a while: probes fail, the pause starts again
	down := len(recv.received())
	back := time.Now()
	recv.set(http.StatusOK)
	eventually(t, 15*time.Second, "every result delivered", func() bool {
		for _, id := range ids {
			if len(recv.delivered(id)) == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(300 * time.Millisecond)
	calls := recv.received()
	var after []time.Time
	for _, c := range calls {
		if !c.at.Before(back) {
			after = append(after, c.at)
		}
	}
	checkPace(t, "released deliveries", after, rps)
	if len(after) != n {
		t.Errorf("%d calls after the hookReceiver came back, want %d (one per query)", len(after), n)
	}
	// While down, the breaker kept attempts few: far fewer than n queries
	// retried every 100ms for over a second.
	if down > 3*n {
		t.Errorf("%d attempts while the hookReceiver was down: the origin's breaker did not retain them", down)
	}
	for _, id := range ids {
		if got := len(recv.delivered(id)); got != 1 {
			t.Errorf("query %s delivered %d times, want 1", id, got)
		}
		webhookIDs := map[string]bool{}
		for _, c := range calls {
			if c.event.Data.ID == id {
				webhookIDs[c.header.Get("webhook-id")] = true
				verifySignature(t, c)
			}
		}
		if len(webhookIDs) != 1 {
			t.Errorf("query %s: webhook-ids %v, want one, stable across attempts", id, webhookIDs)
		}
	}
	if v := e.sample(`aggregator_webhook_deliveries_total{outcome="delivered"}`); v != n {
		t.Errorf("delivered metric %v, want %d", v, n)
	}
	if len(e.listDLQ()) != 0 {
		t.Error("DLQ not empty")
	}
}

// TestAsyncDeadLetter: a hookReceiver that never recovers gets exactly
// max_attempts attempts at min(backoff·2^(n-1), 60s) intervals, then the
// delivery is in the DLQ; redelivered, it makes a new entry if it fails
// again, and arrives once the hookReceiver is fixed; entries can be deleted.
func TestAsyncDeadLetter(t *testing.T) {
	caba := newPortal(t, one("Q-1"))
	recv := newHookReceiver(t, http.StatusInternalServerError)
	cfg := asyncConfig(t, asyncBlock("max_wait: 1m, release_rps: 50",
		"allow_private: true, backoff: 100ms, max_attempts: 3, breaker: {consecutive_failures: 50, open_for: 1s}"),
		source{id: "caba", url: caba.URL})
	e := startAsync(t, cfg, app.Options{})
	q := e.postQuery(fmt.Sprintf(`{"domain": %q, "callback_url": %q}`, plate, recv.URL+"/hook"))

	var entries []dlqEntry
	eventually(t, 5*time.Second, "DLQ entry", func() bool { entries = e.listDLQ(); return len(entries) == 1 })
	calls := recv.received()
	if len(calls) != 3 {
		t.Fatalf("%d attempts before the DLQ, want exactly max_attempts (3)", len(calls))
	}
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond} {
		if gap := calls[i+1].at.Sub(calls[i].at); gap < want-10*time.Millisecond || gap > want+250*time.Millisecond {
			t.Errorf("gap after attempt %d = %v, want %v", i+1, gap, want)
		}
	}
	en := entries[0]
	if en.QueryID != q.ID || en.Attempts != 3 || en.LastError != "HTTP 500" || en.CallbackURL != recv.URL+"/hook" ||
		en.FailedAt.Before(en.CreatedAt) {
		t.Errorf("DLQ entry %+v", en)
	}
	var payload hookEvent
	if err := json.Unmarshal(en.Payload, &payload); err != nil || payload.Type != "query.completed" || payload.Data.ID != q.ID {
		t.Errorf("DLQ payload %s: %v", en.Payload, err)
	}
	if v := e.sample("aggregator_dlq_entries"); v != 1 {
		t.Errorf("aggregator_dlq_entries %v, want 1", v)
	}
	if v := e.sample(`aggregator_webhook_deliveries_total{outcome="dead_lettered"}`); v != 1 {
		t.Errorf("dead_lettered %v, want 1", v)
	}
	if v := e.sample(`aggregator_webhook_deliveries_total{outcome="failed"}`); v != 2 {
		t.Errorf("failed %v, want 2", v)
	}
	if resp, _ := e.do(http.MethodGet, "/v1/admin/dlq", nil, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("DLQ without a token: %d, want 401", resp.StatusCode)
	}

	// Redelivered while the hookReceiver still fails: a fresh delivery, with
	// its attempts starting over, and a new entry at the end.
	if resp, body := e.admin(http.MethodPost, "/dlq/"+en.ID+"/redeliver", ""); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("redeliver: %d %s", resp.StatusCode, body)
	}
	if resp, _ := e.admin(http.MethodPost, "/dlq/"+en.ID+"/redeliver", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("redeliver twice: %d, want 404", resp.StatusCode)
	}
	eventually(t, 5*time.Second, "new DLQ entry", func() bool { entries = e.listDLQ(); return len(entries) == 1 })
	if entries[0].ID == en.ID || entries[0].Attempts != 3 || entries[0].QueryID != q.ID {
		t.Errorf("new entry %+v, want another id, 3 attempts", entries[0])
	}
	if n := len(recv.received()); n != 6 {
		t.Errorf("%d attempts in all, want 6", n)
	}

	// Fixed hookReceiver: the redelivery arrives, with the same webhook-id.
	recv.set(http.StatusNoContent)
	if resp, body := e.admin(http.MethodPost, "/dlq/"+entries[0].ID+"/redeliver", ""); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("redeliver: %d %s", resp.StatusCode, body)
	}
	eventually(t, 5*time.Second, "redelivery", func() bool { return len(recv.delivered(q.ID)) == 1 })
	all := recv.received()
	for _, c := range all {
		if c.header.Get("webhook-id") != all[0].header.Get("webhook-id") {
			t.Errorf("webhook-id changed across redeliveries: %s, then %s", all[0].header.Get("webhook-id"), c.header.Get("webhook-id"))
		}
	}
	verifySignature(t, all[len(all)-1])
	if len(e.listDLQ()) != 0 {
		t.Error("DLQ not empty after a successful redelivery")
	}
	if v := e.sample("aggregator_dlq_entries"); v != 0 {
		t.Errorf("aggregator_dlq_entries %v, want 0", v)
	}

	// Delete.
	recv.set(http.StatusGone)
	e.postQuery(fmt.Sprintf(`{"domain": %q, "callback_url": %q}`, asyncPlate(2), recv.URL))
	eventually(t, 5*time.Second, "DLQ entry", func() bool { entries = e.listDLQ(); return len(entries) == 1 })
	if resp, body := e.admin(http.MethodDelete, "/dlq/"+entries[0].ID, ""); resp.StatusCode != http.StatusNoContent {
		t.Errorf("delete: %d %s, want 204", resp.StatusCode, body)
	}
	if resp, _ := e.admin(http.MethodDelete, "/dlq/"+entries[0].ID, ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("delete twice: %d, want 404", resp.StatusCode)
	}
	if resp, _ := e.admin(http.MethodPost, "/dlq/nope/redeliver", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("redeliver unknown: %d, want 404", resp.StatusCode)
	}
	if len(e.listDLQ()) != 0 {
		t.Error("DLQ not empty after delete")
	}
}

// TestAsyncRetainedSourceRecovers: a source whose breaker is open is
// retained; when the portal recovers the query completes with that source
// succeeded, and is delivered as query.completed.
func TestAsyncRetainedSourceRecovers(t *testing.T) {
	caba := newPortal(t, one("Q-1"))
	cordoba := newPortal(t, status(http.StatusServiceUnavailable))
	recv := newHookReceiver(t, 0)
	cfg := asyncConfig(t, asyncBlock("max_wait: 1m, release_rps: 5", "allow_private: true"),
		source{id: "caba", url: caba.URL},
		source{id: "cordoba", url: cordoba.URL, extra: []string{"breaker: {min_calls: 1, failure_ratio: 0.5, open_for: 300ms}"}})
	e := startAsync(t, cfg, app.Options{})

	q := e.postQuery(fmt.Sprintf(`{"domain": %q, "callback_url": %q}`, plate, recv.URL))
	if q.Status != "pending" || q.CompletedAt != nil || q.Result.Complete {
		t.Fatalf("202 body %+v, want pending", q)
	}
	checkEntry(t, q.Result.entry(t, "caba"), "succeeded", "")
	checkEntry(t, q.Result.entry(t, "cordoba"), "failed", "source-unavailable")
	e.waitState("cordoba", "by_domain", "open")

	time.Sleep(time.Second)
	if got := e.getQuery(q.ID); got.Status != "pending" {
		t.Fatalf("GET while the source is down: %s, want pending", got.Status)
	}
	if n := cordoba.calls(); n > 6 {
		t.Errorf("the down portal got %d calls in a second: retained calls must wait for the breaker", n)
	}
	cordoba.set(one("Q-2"))
	eventually(t, 10*time.Second, "delivery", func() bool { return len(recv.received()) > 0 })
	c := recv.received()[0]
	verifySignature(t, c)
	if c.event.Type != "query.completed" || c.event.Data.Status != "completed" || !c.event.Data.Result.Complete {
		t.Errorf("delivered %s %s complete=%v, want query.completed", c.event.Type, c.event.Data.Status, c.event.Data.Result.Complete)
	}
	checkEntry(t, c.event.Data.Result.entry(t, "cordoba"), "succeeded", "")
	if len(c.event.Data.Result.Infractions) != 2 {
		t.Errorf("delivered %d infractions, want 2", len(c.event.Data.Result.Infractions))
	}
	got := e.getQuery(q.ID)
	if got.Status != "completed" || got.CompletedAt == nil {
		t.Errorf("GET after recovery: %+v", got)
	}
	checkEntry(t, got.Result.entry(t, "cordoba"), "succeeded", "")
	if n := caba.calls(); n != 1 {
		t.Errorf("the healthy source was called %d times, want once", n)
	}
}

// TestAsyncExpired: a source that never recovers within max_wait leaves
// the query expired, delivered with what it has.
func TestAsyncExpired(t *testing.T) {
	caba := newPortal(t, one("Q-1"))
	cordoba := newPortal(t, status(http.StatusServiceUnavailable))
	recv := newHookReceiver(t, 0)
	cfg := asyncConfig(t, asyncBlock("max_wait: 1m", "allow_private: true"),
		source{id: "caba", url: caba.URL}, source{id: "cordoba", url: cordoba.URL})
	e := startAsync(t, cfg, app.Options{})
	q := e.postQuery(fmt.Sprintf(`{"domain": %q, "callback_url": %q, "max_wait": "700ms"}`, plate, recv.URL))
	eventually(t, 5*time.Second, "delivery", func() bool { return len(recv.received()) > 0 })
	c := recv.received()[0]
	if c.event.Type != "query.expired" || c.event.Data.Status != "expired" || c.event.Data.Result.Complete {
		t.Errorf("delivered %s %s, want query.expired", c.event.Type, c.event.Data.Status)
	}
	checkEntry(t, c.event.Data.Result.entry(t, "caba"), "succeeded", "")
	if st := c.event.Data.Result.entry(t, "cordoba").Status; st == "succeeded" {
		t.Error("cordoba succeeded while down")
	}
	if got := e.getQuery(q.ID); got.Status != "expired" || got.CompletedAt == nil {
		t.Errorf("GET: %+v, want expired", got)
	}
	if d := c.at.Sub(q.CreatedAt); d < 700*time.Millisecond {
		t.Errorf("expired after %v, before max_wait", d)
	}
}

// TestAsyncSourceReleasePace: after a portal recovers, the calls retained
// for it go at no more than async.release_rps, not as one burst.
func TestAsyncSourceReleasePace(t *testing.T) {
	portal := &timedHandler{h: status(http.StatusServiceUnavailable)}
	cordoba := newPortal(t, portal)
	recv := newHookReceiver(t, 0)
	const rps = 5
	cfg := asyncConfig(t, asyncBlock(fmt.Sprintf("max_wait: 1m, release_rps: %d", rps), "allow_private: true"),
		source{id: "cordoba", url: cordoba.URL, extra: []string{"breaker: {min_calls: 1, failure_ratio: 0.5, open_for: 300ms}"}})
	e := startAsync(t, cfg, app.Options{})
	const n = 6
	ids := make([]string, n)
	for i := range ids {
		ids[i] = e.postQuery(fmt.Sprintf(`{"domain": %q, "callback_url": %q}`, asyncPlate(i), recv.URL)).ID
	}
	time.Sleep(time.Second)
	back := time.Now()
	portal.set(one("Q-9"))
	eventually(t, 10*time.Second, "every query completed", func() bool {
		for _, id := range ids {
			if len(recv.delivered(id)) == 0 {
				return false
			}
		}
		return true
	})
	after := portal.since(back)
	checkPace(t, "released source calls", after, rps)
	if len(after) < n {
		t.Errorf("%d calls after the recovery, want at least %d", len(after), n)
	}
	for _, id := range ids {
		ev := recv.delivered(id)[0].event
		if ev.Type != "query.completed" {
			t.Errorf("query %s: %s, want query.completed", id, ev.Type)
		}
		checkEntry(t, ev.Data.Result.entry(t, "cordoba"), "succeeded", "")
	}
}
