package fanout_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/mapping"
)

// Each source's part of a query is one span (SPEC 10) with the source,
// the operation, the breaker key, the outcome, the problem type when it
// did not succeed and the number of calls that went; an event says when
// the breaker or the limiter kept the call from going. No attribute holds
// the plate.
func TestLookupSpans(t *testing.T) {
	t.Parallel()
	const plate = "AB123CD"
	tests := []struct {
		name         string
		status       int // the portal's answer
		retries      int
		forceOpen    bool
		limited      bool // a first query spends the only token
		oneToken     bool // the limiter lets one call go
		wantOutcome  aggregator.Outcome
		wantProblem  string
		wantAttempts int64
		wantEvent    string
	}{
		{"success", http.StatusOK, 0, false, false, false, aggregator.Succeeded, "", 1, ""},
		{"503 retried", http.StatusServiceUnavailable, 2, false, false, false, aggregator.Unavailable, "source-unavailable", 3, ""},
		{"breaker open", http.StatusOK, 0, true, false, false, aggregator.SkippedOpen, "circuit-open", 0, "circuit breaker open"},
		{"rate limited", http.StatusOK, 0, false, true, false, aggregator.SkippedRateLimited, "rate-limited", 0, "rate limited"},
		{"retry held by the limiter", http.StatusServiceUnavailable, 2, false, false, true, aggregator.Unavailable, "source-unavailable", 1, "rate limited"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var hits atomic.Int64
			portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				if tt.status != http.StatusOK {
					w.WriteHeader(tt.status)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, `{"actas": [{"nro": "Q-1"}]}`)
			}))
			defer portal.Close()
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			src, err := sources.New(sources.Spec{
				ID: "caba", Jurisdiction: "CABA", BaseURL: portal.URL,
				Operations: map[aggregator.Operation]sources.OperationSpec{aggregator.ByDomain: {Method: http.MethodGet, Path: "/actas?dominio={domain}"}},
				Response:   mapping.Response{Items: mapping.Items{{Select: "/actas"}}, Fields: map[string]mapping.Field{"id": {Select: mapping.List{"/nro"}}}},
			}, &http.Client{Transport: tr}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			id := breaker.ID{Key: "caba-key", Operation: aggregator.ByDomain}
			set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{})
			set.Add(id, "caba", breaker.Settings{Window: time.Minute, MinCalls: 100, FailureRatio: 0.5, OpenFor: time.Minute,
				FailureStatuses: []int{500, 502, 503, 504}, ProbeLease: 2 * time.Second})
			if tt.forceOpen {
				if err := set.ForceOpen(ctx, id); err != nil {
					t.Fatal(err)
				}
			}
			lim := ratelimit.New(ratelimit.NewMemoryStore(), time.Now)
			if tt.limited || tt.oneToken {
				lim.Configure("caba", ratelimit.Settings{RPS: 0.001, Burst: 1})
			}
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			eng := fanout.New([]fanout.Member{{Source: src, BreakerKey: "caba-key", Timeout: 5 * time.Second, Retry: fanout.Retry{MaxRetries: tt.retries}}},
				fanout.Options{Breakers: set, Limiter: lim, Problems: problem.Catalog{Base: "https://errors.test/problems/"},
					Tracer: tp.Tracer("test"), Sleep: func(context.Context, time.Duration) error { return nil }})
			t.Cleanup(eng.Close)
			q := aggregator.Query{Domain: plate}
			if tt.limited {
				eng.Query(ctx, aggregator.Query{Domain: "AC456BD"}, eng.Members(), 10*time.Second)
				rec.Reset()
			}
			before := hits.Load()
			res := eng.Query(ctx, q, eng.Members(), 10*time.Second)
			if got := res.Sources[0].Outcome; got != tt.wantOutcome {
				t.Fatalf("outcome %s, want %s", got, tt.wantOutcome)
			}

			spans := rec.Ended()
			var lookups []sdktrace.ReadOnlySpan
			for _, s := range spans {
				if s.Name() == "lookup caba" {
					lookups = append(lookups, s)
				}
			}
			if len(lookups) != 1 {
				t.Fatalf("%d lookup spans, want 1", len(lookups))
			}
			s := lookups[0]
			attrs := map[attribute.Key]attribute.Value{}
			for _, kv := range s.Attributes() {
				attrs[kv.Key] = kv.Value
				if strings.Contains(kv.Value.String(), plate) {
					t.Errorf("attribute %s holds the plate", kv.Key)
				}
			}
			for k, want := range map[attribute.Key]string{
				"aggregator.source": "caba", "aggregator.operation": "by_domain", "aggregator.breaker_key": "caba-key",
				"aggregator.outcome": string(tt.wantOutcome),
			} {
				if got := attrs[k].AsString(); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
			if got := attrs["aggregator.attempts"].AsInt64(); got != tt.wantAttempts || got != hits.Load()-before {
				t.Errorf("attempts %d, want %d (the portal saw %d)", got, tt.wantAttempts, hits.Load()-before)
			}
			pt, ok := attrs["aggregator.problem_type"]
			switch {
			case tt.wantProblem == "" && ok:
				t.Errorf("problem_type %q on a success", pt.AsString())
			case tt.wantProblem != "" && pt.AsString() != "https://errors.test/problems/"+tt.wantProblem:
				t.Errorf("problem_type %q, want …%s", pt.AsString(), tt.wantProblem)
			}
			var reasons []string
			for _, e := range s.Events() {
				for _, kv := range e.Attributes {
					if kv.Key == "aggregator.reason" {
						reasons = append(reasons, kv.Value.AsString())
					}
				}
			}
			if got := strings.Join(reasons, ","); got != tt.wantEvent {
				t.Errorf("events %q, want %q", got, tt.wantEvent)
			}
			if wantErr := tt.wantOutcome == aggregator.Unavailable; (s.Status().Code == codes.Error) != wantErr {
				t.Errorf("status %v, want error %v", s.Status(), wantErr)
			}
		})
	}
}
