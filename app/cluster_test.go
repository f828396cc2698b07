package app_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/async"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/apptest"
	"github.com/multas/aggregator/internal/redistest"
	"github.com/multas/aggregator/ratelimit"
)

// portal is a fake portal: healthy (three items) or down (503), counting
// the requests it receives.
type portal struct {
	*httptest.Server
	down  atomic.Bool
	calls atomic.Int64
}

func newPortal(t *testing.T) *portal {
	t.Helper()
	p := &portal{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.calls.Add(1)
		if p.down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(benchBody))
	}))
	t.Cleanup(p.Close)
	return p
}

// clusterYAML configures replicas on the Redis Cluster at addrs under
// prefix, over the portals ok (healthy) and dead, and a source with a
// small shared budget (budget, on portal ok).
func clusterYAML(addrs []string, prefix string, ok, dead *portal) string {
	return sharedYAML(fmt.Sprintf(`{cluster: {addrs: ["%s"]}, key_prefix: %q}`, strings.Join(addrs, `", "`), prefix), ok, dead)
}

// sharedYAML is clusterYAML with the store block store.
func sharedYAML(store string, ok, dead *portal) string {
	var b strings.Builder
	fmt.Fprintf(&b, `problems: {base_uri: "https://problems.test/"}
store: %s
webhooks: {allow_private: true, backoff: 50ms}
async: {release_rps: 1000}
defaults: {retry: {max_retries: 0}, breaker: {consecutive_failures: 3, open_for: 1h}}
sources:
`, store)
	for _, s := range []struct {
		id, url, extra string
	}{{"ok", ok.URL, ""}, {"dead", dead.URL, ""}, {"budget", ok.URL, "rate_limit: {rps: 0.001, burst: 4}"}} {
		fmt.Fprintf(&b, `  - id: %s
    jurisdiction: %s
    base_url: %s
    operations: {by_domain: {path: "/q?d={domain}"}}
    response:
      items: /items
      fields: {id: /id, date: /date, amount: /amount, status: /status, place: /place}
      status_map: {IMPAGA: unpaid, PAGADA: paid, "EN GESTION": in_process}
    %s
`, s.id, s.id, s.url, s.extra)
	}
	return b.String()
}

// replicas starts n apps of text.
func replicas(t *testing.T, n int, text string) []*app.App {
	t.Helper()
	cfg, err := config.Parse([]byte(text), "cluster.yaml", nil)
	if err != nil {
		t.Fatalf("config: %v\n%s", err, text)
	}
	out := make([]*app.App, n)
	for i := range out {
		// The store's warnings and errors (degraded, back) go to the test's
		// log, which says what a failing fleet test went through.
		a, err := app.New(cfg, app.Options{Logger: apptest.Logger(t, fmt.Sprintf("replica %d", i), slog.LevelWarn)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close() })
		out[i] = a
	}
	return out
}

// query runs one by_domain query on a's engine over the sources named.
func query(t *testing.T, a *app.App, plate string, ids ...string) map[string]aggregator.SourceResult {
	t.Helper()
	q := aggregator.Query{Domain: plate}
	set, bad := a.Engine.Select(q, ids)
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	r := a.Engine.Query(context.Background(), q, set, 3*time.Second)
	out := map[string]aggregator.SourceResult{}
	for _, e := range r.Sources {
		out[e.Source] = e
	}
	return out
}

var deadID = breaker.ID{Key: "dead", Operation: aggregator.ByDomain}

func breakerState(t *testing.T, a *app.App, id breaker.ID) breaker.State {
	t.Helper()
	st, err := a.Breakers.Status(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return st.State
}

// Two replicas on a Redis Cluster (SPEC 11) share breakers, budgets and
// asynchronous queries.
func TestClusterReplicasShareState(t *testing.T) {
	c, addrs := redistest.ConnectCluster(t)
	prefix := redistest.ClusterPrefix(t, c, "aggtest:app:")
	ok, dead := newPortal(t), newPortal(t)
	dead.down.Store(true)
	rs := replicas(t, 2, clusterYAML(addrs, prefix, ok, dead))
	a, b := rs[0], rs[1]

	// A trip on one replica is seen by the other.
	for i := range 3 {
		if e := query(t, a, fmt.Sprintf("AB%03dCD", i), "dead")["dead"]; e.Status != aggregator.EntryFailed {
			t.Fatalf("query %d: dead is %s, want failed", i, e.Status)
		}
	}
	if got := breakerState(t, b, deadID); got != breaker.Open {
		t.Fatalf("the other replica sees the breaker %s, want open", got)
	}
	before := dead.calls.Load()
	if e := query(t, b, "AB999CD", "dead")["dead"]; e.Status != aggregator.EntrySkipped {
		t.Errorf("the other replica's query: dead is %s, want skipped", e.Status)
	}
	if n := dead.calls.Load() - before; n != 0 {
		t.Errorf("the dead portal received %d calls from the other replica, want 0", n)
	}

	// One budget for the fleet: a burst of 4, not 4 each.
	admitted := 0
	for i := range 12 {
		_, err := rs[i%2].Limiter.Decide(context.Background(), "budget", 0)
		switch {
		case err == nil:
			admitted++
		case !errors.Is(err, ratelimit.ErrLimited):
			t.Fatal(err)
		}
	}
	if admitted != 4 {
		t.Errorf("%d calls admitted across two replicas, want the shared burst of 4", admitted)
	}

	// An asynchronous query accepted by one is read by the other, and its
	// webhook delivered once.
	var hooks atomic.Int64
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hooks.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	q := aggregator.Query{Domain: "AC123DE"}
	set, bad := a.Engine.Select(q, []string{"ok"})
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	v, err := a.Async.Submit(context.Background(), async.Request{Query: q, Sources: set, CallbackURL: receiver.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Async.Get(context.Background(), v.ID)
	if err != nil || got.Status != async.Completed {
		t.Fatalf("the other replica reads %+v, %v; want the completed query", got, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for hooks.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	if n := hooks.Load(); n != 1 {
		t.Errorf("%d webhooks delivered, want 1", n)
	}
}
