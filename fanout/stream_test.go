package fanout_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/mapping"
)

// gatedPortal answers one infraction, id, once gate is closed.
func gatedPortal(t *testing.T, id string, gate <-chan struct{}) *httptest.Server {
	t.Helper()
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"actas": [{"nro": "`+id+`"}]}`)
	}))
	t.Cleanup(p.Close)
	return p
}

// engineOver is an engine over one source per portal, named by ids.
func engineOver(t *testing.T, ids []string, urls []string) *fanout.Engine {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{})
	var members []fanout.Member
	for i, id := range ids {
		src, err := sources.New(sources.Spec{
			ID: id, Jurisdiction: "J " + id, BaseURL: urls[i],
			Operations: map[aggregator.Operation]sources.OperationSpec{aggregator.ByDomain: {Path: "/actas?dominio={domain}"}},
			Response:   mapping.Response{Items: mapping.Items{{Select: "/actas"}}, Fields: map[string]mapping.Field{"id": {Select: mapping.List{"/nro"}}}},
		}, &http.Client{Transport: tr}, nil)
		if err != nil {
			t.Fatal(err)
		}
		set.Add(breaker.ID{Key: id, Operation: aggregator.ByDomain}, id, breaker.Settings{Window: time.Minute, MinCalls: 100,
			FailureRatio: 0.5, OpenFor: time.Minute, FailureStatuses: []int{500}, ProbeLease: 2 * time.Second})
		members = append(members, fanout.Member{Source: src, BreakerKey: id, Timeout: 5 * time.Second})
	}
	e := fanout.New(members, fanout.Options{Breakers: set, Limiter: ratelimit.New(ratelimit.NewMemoryStore(), time.Now),
		Problems: problem.Catalog{Base: "https://errors.test/problems/"}})
	t.Cleanup(e.Close)
	return e
}

// TestStream: each member's part is handed over as that member finishes,
// one at a time in the calling goroutine: here every part releases the
// next portal, so the order is the portals' (c, a, b), never the
// configured one; a member still without an outcome at the deadline is
// handed over as deadline-exceeded; and the result is Answer's, in the
// configured order.
func TestStream(t *testing.T) {
	t.Parallel()
	gates := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{}), "c": make(chan struct{}), "hung": make(chan struct{})}
	ids := []string{"a", "b", "c", "hung"}
	var urls []string
	for _, id := range ids {
		urls = append(urls, gatedPortal(t, "X-"+id, gates[id]).URL)
	}
	eng := engineOver(t, ids, urls)
	releases := map[string]string{"c": "a", "a": "b"} // each part releases the next portal
	var order []string                                // written by each alone: the race detector watches it
	close(gates["c"])
	res := eng.Stream(context.Background(), aggregator.Query{Domain: "AB123CD"}, eng.Members(), time.Second, memory.Directives{},
		func(p aggregator.Part) {
			order = append(order, p.Source)
			if n := len(p.Infractions); p.Status == aggregator.EntrySucceeded && (n != 1 || p.Infractions[0].ID != "X-"+p.Source) {
				t.Errorf("%s's part has infractions %+v", p.Source, p.Infractions)
			}
			if next, ok := releases[p.Source]; ok {
				close(gates[next])
			}
		})
	defer close(gates["hung"])
	if got := fmt.Sprint(order); got != "[c a b hung]" {
		t.Errorf("parts handed over in the order %s, want [c a b hung]", got)
	}
	var got []string
	for _, en := range res.Sources {
		got = append(got, en.Source+":"+string(en.Outcome))
	}
	if want := "[a:succeeded b:succeeded c:succeeded hung:deadline]"; fmt.Sprint(got) != want {
		t.Errorf("result's entries %v, want %s", got, want)
	}
	if res.Summary.Succeeded != 3 || res.Summary.Failed != 1 || len(res.Infractions) != 3 || res.Complete {
		t.Errorf("result %+v with %d infractions", res.Summary, len(res.Infractions))
	}
}
