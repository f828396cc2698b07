package sources_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/mapping"
)

// maintenancePage is what a portal in maintenance answers, with a 200.
const maintenancePage = `<html><body><div id="mantenimiento">Sitio en mantenimiento. Disculpe las molestias.</div></body></html>`

// TestMaintenancePageTripsTheBreaker runs a source whose portal answers
// its maintenance page with a 200 through the fan-out and a real breaker:
// recognised by response.unavailable, the page counts as a 503 does.
func TestMaintenancePageTripsTheBreaker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		unavailable string
		settings    breaker.Settings
		calls       int  // queries made while the breaker may still be closed
		trips       bool // whether the breaker is open after them
		outcome     aggregator.Outcome
	}{
		{"min_calls and failure_ratio", "#mantenimiento",
			breaker.Settings{Window: time.Minute, MinCalls: 4, FailureRatio: 0.5, OpenFor: time.Minute, FailureStatuses: []int{500, 502, 503, 504}},
			4, true, aggregator.Unavailable},
		{"consecutive_failures", "#mantenimiento",
			breaker.Settings{Window: time.Minute, MinCalls: 100, FailureRatio: 1, ConsecutiveFailures: 3, OpenFor: time.Minute, FailureStatuses: []int{500, 502, 503, 504}},
			3, true, aggregator.Unavailable},
		// Like a 503: not counted when 503 is not a failure status.
		{"503 not a failure status", "#mantenimiento",
			breaker.Settings{Window: time.Minute, MinCalls: 2, FailureRatio: 0.5, ConsecutiveFailures: 2, OpenFor: time.Minute, FailureStatuses: []int{500}},
			6, false, aggregator.Unavailable},
		// Without the marker the page is only unreadable (not_found is
		// configured, so zero rows is not "no infractions"): never counted.
		{"not recognised", "",
			breaker.Settings{Window: time.Minute, MinCalls: 2, FailureRatio: 0.5, ConsecutiveFailures: 2, OpenFor: time.Minute, FailureStatuses: []int{500, 502, 503, 504}},
			6, false, aggregator.Unreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				w.Header().Set("Content-Type", "text/html; charset=utf-8")
				w.Write([]byte(maintenancePage))
			}))
			t.Cleanup(srv.Close)
			src, err := sources.New(sources.Spec{
				ID: "html", Jurisdiction: "Provincia de Córdoba", BaseURL: srv.URL,
				Operations: map[aggregator.Operation]sources.OperationSpec{aggregator.ByDomain: {Path: "/actas?dominio={domain}"}},
				Response: mapping.Response{Format: "html", Items: mapping.Items{{Select: "table#actas tbody tr"}}, Fields: map[string]mapping.Field{"id": {Select: mapping.List{"td:nth-child(1)"}}},
					NotFound: "div.sin-actas", Unavailable: tt.unavailable}, Currency: "ARS",
			}, srv.Client(), nil)
			if err != nil {
				t.Fatal(err)
			}
			breakers := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{})
			id := breaker.ID{Key: "html", Operation: aggregator.ByDomain}
			breakers.Add(id, "html", tt.settings)
			limiter := ratelimit.New(ratelimit.NewMemoryStore(), nil)
			limiter.Configure("html", ratelimit.Settings{MaxWait: time.Second, MaxPause: time.Minute})
			members := []fanout.Member{{Source: src, BreakerKey: "html", Timeout: 5 * time.Second}}
			engine := fanout.New(members, fanout.Options{
				Breakers: breakers, Limiter: limiter, Problems: problem.Catalog{Base: "https://example.com/problems/"},
			})
			t.Cleanup(engine.Close)
			q := aggregator.Query{Domain: "AB123CD"}
			ctx := context.Background()
			for i := range tt.calls {
				res := engine.Query(ctx, q, members, 10*time.Second)
				e := res.Sources[0]
				if e.Status != aggregator.EntryFailed || e.Outcome != tt.outcome {
					t.Fatalf("query %d: source %s (%s), want failed (%s)", i, e.Status, e.Outcome, tt.outcome)
				}
				if tt.outcome == aggregator.Unavailable && !strings.HasSuffix(e.Problem.Type, "/source-unavailable") {
					t.Errorf("query %d: problem type %q, want source-unavailable", i, e.Problem.Type)
				}
			}
			st, err := breakers.Status(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if open := st.State == breaker.Open; open != tt.trips {
				t.Fatalf("after %d maintenance pages the breaker is %v (calls %d, failures %d); want open %v",
					tt.calls, st.State, st.Calls, st.Failures, tt.trips)
			}
			if !tt.trips {
				return
			}
			before := hits.Load()
			res := engine.Query(ctx, q, members, 10*time.Second)
			if e := res.Sources[0]; e.Status != aggregator.EntrySkipped || !strings.HasSuffix(e.Problem.Type, "/circuit-open") {
				t.Errorf("next query: source %s (%v), want skipped, circuit-open", e.Status, e.Problem)
			}
			if hits.Load() != before {
				t.Error("the portal was called while its breaker was open")
			}
		})
	}
}
