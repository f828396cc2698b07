package fanout_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/drift"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/mapping"
)

// TestLookupsHeard: every answer a lookup read reaches Options.Lookups
// with what it made of it; calls that got no answer to read do not.
func TestLookupsHeard(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
		want   []drift.Result // one per attempt that read an answer
		items  int
		rule   int // -1: none
	}{
		{"items", 200, `{"actas": [{"nro": "Q-1", "estado": "X"}, {"nro": "Q-2"}]}`, []drift.Result{drift.Items}, 2, -1},
		{"no items", 200, `{"actas": []}`, []drift.Result{drift.Empty}, 0, -1},
		{"404 is no infractions", 404, ``, []drift.Result{drift.Empty}, 0, -1},
		{"captcha matched by a rule", 200, `{"captcha": true}`, []drift.Result{drift.Error}, 0, 0},
		{"not an answer this mapping knows", 200, `<html>captcha</html>`, []drift.Result{drift.Error}, 0, -1},
		{"an item without id", 200, `{"actas": [{"numero": "Q-1"}]}`, []drift.Result{drift.Error}, 0, -1},
		{"a 503 no rule reads, retried", 503, `busy`, nil, 0, -1},
		{"a 429", 429, ``, nil, 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer portal.Close()
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			src, err := sources.New(sources.Spec{
				ID: "caba", Jurisdiction: "CABA", BaseURL: portal.URL,
				Operations: map[aggregator.Operation]sources.OperationSpec{aggregator.ByDomain: {Path: "/actas?dominio={domain}"}},
				Response: mapping.Response{Items: mapping.Items{{Select: "/actas"}},
					Fields:    map[string]mapping.Field{"id": {Select: mapping.List{"/nro"}}, "status": {Select: mapping.List{"/estado"}}},
					StatusMap: map[string]string{"IMPAGA": "unpaid"},
					Errors:    []mapping.Rule{{When: &mapping.When{Select: "/captcha"}, Outcome: "rejected"}}},
			}, &http.Client{Transport: tr}, nil)
			if err != nil {
				t.Fatal(err)
			}
			id := breaker.ID{Key: "caba", Operation: aggregator.ByDomain}
			set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{})
			set.Add(id, "caba", breaker.Settings{Window: time.Minute, MinCalls: 50, FailureRatio: 0.5,
				OpenFor: time.Minute, FailureStatuses: []int{500, 502, 503, 504}, ProbeLease: 2 * time.Second})
			var mu sync.Mutex
			var heard []drift.Lookup
			eng := fanout.New([]fanout.Member{{Source: src, BreakerKey: "caba", Timeout: 5 * time.Second,
				Retry: fanout.Retry{MaxRetries: 1, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond}}},
				fanout.Options{Breakers: set, Problems: problem.Catalog{Base: "https://errors.test/problems/"},
					Lookups: func(l drift.Lookup) {
						mu.Lock()
						heard = append(heard, l)
						mu.Unlock()
					}})
			t.Cleanup(eng.Close)
			eng.Query(context.Background(), aggregator.Query{Domain: "AB123CD"}, eng.Members(), 10*time.Second)
			mu.Lock()
			defer mu.Unlock()
			var got []drift.Result
			for _, l := range heard {
				got = append(got, l.Result)
				if l.Source != "caba" || l.Operation != aggregator.ByDomain {
					t.Errorf("heard %s/%s", l.Source, l.Operation)
				}
			}
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Fatalf("heard %v, want %v", got, tt.want)
			}
			if len(heard) == 0 {
				return
			}
			l := heard[0]
			if l.Items != tt.items {
				t.Errorf("items %d, want %d", l.Items, tt.items)
			}
			rule, ok := l.Health.Rule()
			if !ok {
				rule = -1
			}
			if rule != tt.rule {
				t.Errorf("rule %d, want %d", rule, tt.rule)
			}
			if tt.name == "items" {
				n := 0
				l.Health.UnknownStatuses(func(text string, c int) { n += c })
				if n != 1 || l.Health.Affected() != 2 || !l.Health.Shape().Has("/estado") {
					t.Errorf("health: %d unknown statuses, %d affected, shape %q", n, l.Health.Affected(), l.Health.Shape().Names())
				}
			}
			if tt.name == "an item without id" && !l.Health.Shape().Has("/numero") {
				t.Errorf("the refused answer's shape is %q, want /numero in it", l.Health.Shape().Names())
			}
		})
	}
}
