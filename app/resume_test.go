package app_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/internal/redistest"
)

// TestBackAfterRestartHearsTheFleet (issue 23): after Redis restarts, a
// replica that says it is back (the log line, /readyz ok) hears what the
// fleet does from then on. Redis stays down until every backoff is at its
// longest: the health check's and the subscriber's (5 s, the defaults),
// and the client's dialer (with pool_size 2 its dial breaker opens, then
// tries once a second). Right after replica 1 is back, replica 2 trips the
// dead portal's breaker; replica 1's next query must skip that portal.
func TestBackAfterRestartHearsTheFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	ok, dead := newPortal(t), newPortal(t)
	dead.down.Store(true)
	text := sharedYAML(fmt.Sprintf(`{redis_url: %q, key_prefix: "back:", pool_size: 2}`, srv.URL()), ok, dead) +
		"server: {admin_token: admin-secret}\n"
	r1 := replicas(t, 1, text)[0]
	if e := query(t, r1, "AB001CD", "dead")["dead"]; e.Status != aggregator.EntryFailed {
		t.Fatalf("first query: dead is %s, want failed", e.Status)
	}
	if got := readyz(t, r1); got != "ok" {
		t.Fatalf("/readyz before the outage: %q, want ok", got)
	}

	srv.Stop()
	if got := readyz(t, r1); got != "degraded" {
		t.Fatalf("/readyz with Redis stopped: %q, want degraded", got)
	}
	// A precondition, not a wait for luck: the backoffs grow to their
	// longest (100 ms doubling to 5 s takes about 6 s).
	time.Sleep(9 * time.Second)
	srv.Start()
	deadline := time.Now().Add(20 * time.Second)
	for r1.StoreDegraded() {
		if time.Now().After(deadline) {
			t.Fatal("replica 1 still degraded 20s after Redis came back")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := readyz(t, r1); got != "ok" {
		t.Errorf("/readyz once back: %q, want ok", got)
	}

	// Right then a replica trips the breaker of the dead portal, and shares
	// settings of another breaker: replica 1 hears the trip before them.
	r2 := replicas(t, 1, text)[0]
	for i := range 3 {
		query(t, r2, fmt.Sprintf("AB%03dCD", 100+i), "dead")
	}
	okID := breaker.ID{Key: "ok", Operation: aggregator.ByDomain}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPut, "/v1/admin/sources/ok/breaker", strings.NewReader(`{"min_calls": 7}`))
	req.Header.Set("Authorization", "Bearer admin-secret")
	r2.Server.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("PUT the ok breaker's settings: %d %s", rec.Code, rec.Body)
	}
	deadline = time.Now().Add(10 * time.Second)
	for s, _ := r1.Breakers.Settings(okID); s.MinCalls != 7; s, _ = r1.Breakers.Settings(okID) {
		if time.Now().After(deadline) {
			t.Error("replica 1 never heard the settings replica 2 shared: it does not listen")
			break
		}
		time.Sleep(5 * time.Millisecond)
	}

	before := dead.calls.Load()
	if e := query(t, r1, "AB999CD", "dead")["dead"]; e.Status != aggregator.EntrySkipped {
		t.Errorf("replica 1's next query: dead is %s, want skipped", e.Status)
	}
	if n := dead.calls.Load() - before; n != 0 {
		t.Errorf("the dead portal received %d calls from replica 1 after replica 2 opened its breaker, want 0", n)
	}
}

// readyz is the status a's /readyz answers.
func readyz(t *testing.T, a *app.App) string {
	t.Helper()
	rec := httptest.NewRecorder()
	a.Server.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	var body struct{ Status string }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("/readyz: %d %s", rec.Code, rec.Body)
	}
	return body.Status
}
