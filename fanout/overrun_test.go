package fanout_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/sources"
)

// stuckSource is an adapter that ignores its context: a lookup of it
// returns only once gate is closed, whatever the budget.
type stuckSource struct {
	id    string
	gate  <-chan struct{}
	calls chan struct{}
}

func (s stuckSource) ID() string                                            { return s.id }
func (s stuckSource) Jurisdiction() string                                  { return "J " + s.id }
func (s stuckSource) Supports(aggregator.Operation, aggregator.IDKind) bool { return true }
func (s stuckSource) Voucher(context.Context, string) (*sources.Voucher, error) {
	return nil, sources.ErrUnsupported
}
func (s stuckSource) Lookup(context.Context, aggregator.Query) (sources.Answer, error) {
	if s.calls != nil {
		s.calls <- struct{}{}
	}
	if s.gate != nil {
		<-s.gate
	}
	return sources.Answer{Infractions: []aggregator.Infraction{{Source: s.id, ID: s.id + "-1"}}}, nil
}

// A call that overruns its context (an adapter, or a store, that does not
// honour it) does not hold the query past its budget: its member is
// deadline-exceeded, the others answer, and a second query that follows
// the stuck call in flight answers on time too.
func TestOverrunningCallKeepsTheBudget(t *testing.T) {
	gate := make(chan struct{})
	calls := make(chan struct{}, 4)
	set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{})
	var members []fanout.Member
	for _, s := range []stuckSource{{id: "stuck", gate: gate, calls: calls}, {id: "quick"}} {
		set.Add(breaker.ID{Key: s.id, Operation: aggregator.ByDomain}, s.id, breaker.Settings{Window: time.Minute, MinCalls: 100,
			FailureRatio: 0.5, OpenFor: time.Minute, ProbeLease: time.Second})
		members = append(members, fanout.Member{Source: s, BreakerKey: s.id, Timeout: time.Minute})
	}
	e := fanout.New(members, fanout.Options{Breakers: set, Problems: problem.Catalog{Base: "https://errors.test/problems/"}})
	t.Cleanup(e.Close)
	q := aggregator.Query{Domain: "AB123CD"}
	sel, _ := e.Select(q, nil)

	var wg sync.WaitGroup
	results := make([]aggregator.Result, 2)
	for i := range results {
		if i > 0 {
			<-calls // the first query leads the stuck call: the second follows it
		}
		wg.Go(func() { results[i] = e.Query(context.Background(), q, sel, 100*time.Millisecond) })
	}
	wg.Wait() // both answered while the stuck call still runs
	for i, r := range results {
		got := map[string]aggregator.Outcome{}
		for _, s := range r.Sources {
			got[s.Source] = s.Outcome
		}
		if got["stuck"] != aggregator.Deadline || got["quick"] != aggregator.Succeeded {
			t.Errorf("query %d: outcomes %v, want stuck deadline-exceeded and quick succeeded", i, got)
		}
		if len(r.Infractions) != 1 || r.Infractions[0].ID != "quick-1" {
			t.Errorf("query %d: infractions %+v, want quick's alone", i, r.Infractions)
		}
	}
	close(gate) // the stuck call ends; goleak (TestMain) sees nothing left behind
	select {
	case <-calls:
		t.Error("the follower called the stuck source itself")
	default:
	}
}
