package fanout_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
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

// A request the product cannot make (a token or a session value with a
// line break, bound for a header) is a source-error that the breaker never
// counts: ten such lookups leave it closed with no failure, where a token
// endpoint that fails (503) opens it after five (SPEC 9).
func TestUnsendableNotCounted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		token       string // what the token endpoint issues; "" for a session value
		tokenStatus int
		session     string
		wantOutcome aggregator.Outcome
		wantState   breaker.State
	}{
		{"token with CR LF", "tok\r\nX-Evil: 1", 0, "", aggregator.Unreadable, breaker.Closed},
		{"token with NUL", "tok\x00", 0, "", aggregator.Unreadable, breaker.Closed},
		{"session value with CR LF", "", 0, "v\r\nX-Evil: 1", aggregator.Unreadable, breaker.Closed},
		{"token endpoint down (counted)", "", http.StatusServiceUnavailable, "", aggregator.Unavailable, breaker.Open},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var lookups atomic.Int64
			portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				switch r.URL.Path {
				case "/oauth/token":
					if tt.tokenStatus != 0 {
						w.WriteHeader(tt.tokenStatus)
						return
					}
					json.NewEncoder(w).Encode(map[string]any{"access_token": tt.token, "token_type": "Bearer", "expires_in": 3600})
				case "/sesion":
					json.NewEncoder(w).Encode(map[string]string{"token": tt.session})
				default:
					lookups.Add(1)
					io.WriteString(w, `{"actas": [{"nro": "Q-1"}]}`)
				}
			}))
			defer portal.Close()
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			spec := sources.Spec{
				ID: "caba", Jurisdiction: "CABA", BaseURL: portal.URL,
				Operations: map[aggregator.Operation]sources.OperationSpec{aggregator.ByDomain: {
					Path: "/actas?dominio={domain}", Headers: map[string]string{"X-Token": "{session.token}"}}},
				Response: mapping.Response{Items: mapping.Items{{Select: "/actas"}}, Fields: map[string]mapping.Field{"id": {Select: mapping.List{"/nro"}}}},
				Auth: sources.Auth{Session: &sources.Session{Path: "/sesion", TTL: time.Minute, Format: "json",
					Extract: map[string]string{"token": "/token"}}},
			}
			if tt.session == "" {
				spec.Operations[aggregator.ByDomain] = sources.OperationSpec{Path: "/actas?dominio={domain}"}
				spec.Auth = sources.Auth{OAuth2: &sources.OAuth2{TokenURL: portal.URL + "/oauth/token", ClientID: "id", ClientSecret: "secret"}}
			}
			src, err := sources.New(spec, &http.Client{Transport: tr}, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			id := breaker.ID{Key: "caba", Operation: aggregator.ByDomain}
			set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{})
			set.Add(id, "caba", breaker.Settings{Window: time.Minute, MinCalls: 5, FailureRatio: 0.5, ConsecutiveFailures: 5,
				OpenFor: time.Minute, FailureStatuses: []int{500, 502, 503, 504}, ProbeLease: 2 * time.Second})
			eng := fanout.New([]fanout.Member{{Source: src, BreakerKey: "caba", Timeout: 5 * time.Second}},
				fanout.Options{Breakers: set, Limiter: ratelimit.New(ratelimit.NewMemoryStore(), time.Now),
					Problems: problem.Catalog{Base: "https://errors.test/problems/"}})
			t.Cleanup(eng.Close)
			for i := range 10 {
				res := eng.Query(ctx, aggregator.Query{Domain: "AB123CD"}, eng.Members(), 10*time.Second)
				got := res.Sources[0].Outcome
				if i < 5 && got != tt.wantOutcome {
					t.Fatalf("query %d: outcome %s, want %s", i, got, tt.wantOutcome)
				}
			}
			st, err := set.Status(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if st.State != tt.wantState {
				t.Errorf("after 10 queries: breaker %s (%d failures in %d calls), want %s", st.State, st.Failures, st.Calls, tt.wantState)
			}
			if tt.wantState == breaker.Closed && st.Failures != 0 {
				t.Errorf("after 10 queries: %d failures counted, want none", st.Failures)
			}
			if n := lookups.Load(); n != 0 {
				t.Errorf("the portal received %d lookups, want none", n)
			}
		})
	}
}
