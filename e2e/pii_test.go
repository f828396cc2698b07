package e2e

import (
	"bytes"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
)

// lockedBuffer is a log sink safe for the handlers that write to it while
// the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestNoPII runs queries for a plate, a CUIT and a DNI through every path,
// successes and failures, and checks that none of them appears in the
// logs (at debug level), the metrics, the events or the breakers (SPEC 4.1).
func TestNoPII(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("GET /actas", one("Q-1"))
	mux.Handle("GET /personas/{kind}/{id}", one("Q-2"))
	mux.Handle("GET /actas/{id}/boleta", voucherPDF())
	ok := newPortal(t, mux)
	failing := newPortal(t, status(http.StatusServiceUnavailable))
	down := newPortal(t, hangUp())
	slow := newPortal(t, nil)
	slow.set(slow.hang())
	throttled := newPortal(t, status(http.StatusTooManyRequests, "Retry-After", "1"))
	unreadable := newPortal(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"resultado": {"actas": [{"nro": {"not": "an id"}}]}}`))
	}))
	rejecting := newPortal(t, status(http.StatusForbidden))

	var logs lockedBuffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := newConfig(t, adminToken,
		source{id: "ok", url: ok.URL},
		source{id: "failing", url: failing.URL},
		source{id: "down", url: down.URL},
		source{id: "slow", url: slow.URL, extra: []string{"timeout: 100ms"}},
		source{id: "throttled", url: throttled.URL},
		source{id: "unreadable", url: unreadable.URL},
		source{id: "rejecting", url: rejecting.URL},
	)
	e := start(t, cfg, app.Options{Logger: logger})

	for i := range 5 { // enough to trip the failing breakers
		e.byDomain(strings.ToLower(plate[:2]) + "-" + plate[2:5] + " " + plate[5:])
		e.query("id=" + cuit)
		e.query("id=" + dni)
		e.query("id=" + cuitDigits + "&timeout=50ms")
		if i == 0 {
			e.byDomain(plate, "timeout=50ms")
			e.byDomain(plate + "X")                 // invalid
			e.query("id=" + badCUIT)                // invalid
			e.query("id=" + cuit + "&sources=nope") // invalid sources
		}
	}
	e.get("/v1/sources/ok/infractions/Q-1/voucher")
	e.get("/v1/sources/failing/infractions/" + plate + "/voucher")
	e.get("/v1/sources/ok/infractions/" + plate + "/voucher")

	if n := ok.calls(); n == 0 {
		t.Fatalf("the healthy portal received no calls")
	}
	if st := e.breaker("failing", "by_domain").State; st != "open" && st != "half_open" {
		t.Errorf("failing/by_domain: %s, want it tripped (transitions logged)", st)
	}
	// Calls cut by a query's budget end in the background: let them.
	eventually(t, 5*time.Second, "calls ended", func() bool { return slow.calls() == slow.done() })

	_, metrics := e.get("/metrics")
	_, events := e.admin(http.MethodGet, "/events", "")
	_, breakers := e.admin(http.MethodGet, "/breakers", "")
	_, sources := e.get("/v1/sources")
	if !strings.Contains(logs.String(), "breaker transition") {
		t.Errorf("logs: no breaker transition logged:\n%s", logs.String())
	}
	for name, text := range map[string]string{
		"logs": logs.String(), "/metrics": string(metrics), "/v1/admin/events": string(events),
		"/v1/admin/breakers": string(breakers), "/v1/sources": string(sources),
	} {
		if text == "" {
			t.Errorf("%s: empty", name)
		}
		for _, pii := range []string{plate, "ab-123", plate[:2] + "-" + plate[2:], cuit, cuitDigits, badCUIT, dni} {
			if i := strings.Index(strings.ToUpper(text), strings.ToUpper(pii)); i >= 0 {
				t.Errorf("%s holds %q: …%s…", name, pii, text[max(0, i-200):min(len(text), i+200)])
			}
		}
	}
}
