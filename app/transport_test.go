package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/config"
)

// hangingUp is a portal that, once told to, reads each request whole and
// hangs up without an answer: the case where http.Transport replays an
// idempotent request on another pooled connection.
type hangingUp struct {
	*httptest.Server
	hangUp   atomic.Bool
	requests atomic.Int64
}

func newHangingUp(t *testing.T) *hangingUp {
	t.Helper()
	p := &hangingUp{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		p.requests.Add(1)
		if p.hangUp.Load() {
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		time.Sleep(20 * time.Millisecond) // so that warm-up queries hold several connections at once
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(benchBody))
	}))
	t.Cleanup(p.Close)
	return p
}

// metricValue reads one sample of GET /metrics of a.
func metricValue(t *testing.T, a *app.App, sample string) float64 {
	t.Helper()
	rec := httptest.NewRecorder()
	a.Server.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	sc := bufio.NewScanner(rec.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	return 0
}

// Every request that reaches a portal is a call the breaker and the metrics
// see (SPEC 11): a portal that hangs up after reading each request gets
// exactly one request per call, however many pooled connections the
// transport could replay it on.
func TestNoSilentReplays(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"GET", "POST"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			p := newHangingUp(t)
			cfg, err := config.Parse(fmt.Appendf(nil, `problems: {base_uri: "https://problems.test/"}
defaults: {retry: {max_retries: 0}, breaker: {consecutive_failures: 0, min_calls: 1000}}
sources:
  - id: caba
    jurisdiction: CABA
    base_url: %s
    headers: {Idempotency-Key: fixed}
    operations: {by_domain: {method: %s, path: "/q?d={domain}"}}
    response: {items: /items, fields: {id: /id}}
`, p.URL, method), "replay.yaml", nil)
			if err != nil {
				t.Fatal(err)
			}
			a, err := app.New(cfg, app.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = a.Close() })
			q := aggregator.Query{Domain: "AB123CD"}
			set, _ := a.Engine.Select(q, nil)

			// Warm the pool: several idle keep-alive connections.
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() {
					a.Engine.Query(context.Background(), aggregator.Query{Domain: fmt.Sprintf("AA%03dAA", i)}, set, 3*time.Second)
				})
			}
			wg.Wait()
			warm := p.requests.Load()

			p.hangUp.Store(true)
			const calls = 5
			for i := range calls {
				r := a.Engine.Query(context.Background(), aggregator.Query{Domain: fmt.Sprintf("AB%03dCD", i)}, set, 3*time.Second)
				if e := r.Sources[0]; e.Status != aggregator.EntryFailed {
					t.Fatalf("call %d: %s, want failed", i, e.Status)
				}
			}
			got := p.requests.Load() - warm
			st, err := a.Breakers.Status(context.Background(), breaker.ID{Key: "caba", Operation: aggregator.ByDomain})
			if err != nil {
				t.Fatal(err)
			}
			unavailable := metricValue(t, a, `aggregator_source_calls_total{operation="by_domain",outcome="unavailable",source="caba"}`)
			t.Logf("%d warm-up requests; after the hang-ups: %d requests received, breaker saw %d failures, metrics %v unavailable",
				warm, got, st.Failures, unavailable)
			if got != calls || st.Failures != calls || unavailable != calls {
				t.Errorf("the portal received %d requests; the breaker saw %d failures and the metrics %v unavailable calls; want %d each",
					got, st.Failures, unavailable, calls)
			}
		})
	}
}

// A retry after a write that put nothing on the wire is not a replay: a
// pooled connection the server had closed while idle costs nothing, even
// when the transport has not noticed the close yet (its read loop waiting
// for a CPU on a busy machine).
func TestIdleConnectionClosedByServerIsNoFailure(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	closed := make(chan struct{}, 10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"items": []}`)
	}))
	srv.Config.IdleTimeout = 50 * time.Millisecond
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	client := &http.Client{Transport: app.NoReplay(app.NewTransport())}
	t.Cleanup(client.CloseIdleConnections)
	for i := range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		// The server closes the idle connection (a request sent while it
		// is about to is the keep-alive race, which no client wins).
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the server never closed the idle connection")
		}
	}
	if n := requests.Load(); n != 3 {
		t.Errorf("%d requests received, want 3", n)
	}
}
