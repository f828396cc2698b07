package app_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/apitest"
)

// hungRedis accepts connections and never answers: every Redis call costs
// its whole timeout.
func hungRedis(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "redis://" + l.Addr().String() + "/0"
}

// A replica whose Redis does not answer serves within a second of
// starting (SPEC 11), reports the degradation in /readyz, in
// aggregator_store_degraded and as a store event, and decides on local
// state.
func TestStartupWithRedisHung(t *testing.T) {
	t.Parallel()
	p := newPortal(t)
	var b strings.Builder
	fmt.Fprintf(&b, "problems: {base_uri: \"https://problems.test/\"}\nserver: {admin_token: admin-secret}\nstore: {redis_url: %q}\nsources:\n", hungRedis(t))
	for i := range 8 { // 24 breakers
		fmt.Fprintf(&b, `  - id: s%d
    jurisdiction: S%d
    base_url: %s
    operations: {by_domain: {path: "/q?d={domain}"}, by_id: {path: "/q?id={id}"}, voucher: {path: "/v/{infraction_id}"}}
    response: {items: /items, fields: {id: /id}}
`, i, i, p.URL)
	}
	cfg, err := config.Parse([]byte(b.String()), "hung.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	a, err := app.New(cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	v := apitest.New(t)
	serve := func(method, path string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		req.Header.Set("Authorization", "Bearer admin-secret")
		rec := httptest.NewRecorder()
		a.Server.ServeHTTP(rec, req)
		v.CheckRecorder(t, req, rec)
		return rec
	}
	rec := serve(http.MethodGet, "/v1/infractions?domain=AB123CD")
	elapsed := time.Since(start)
	t.Logf("started and answered the first query in %v", elapsed)
	if rec.Code != http.StatusOK {
		t.Fatalf("first query: %d %s", rec.Code, rec.Body)
	}
	if elapsed > time.Second {
		t.Errorf("start-up and first query took %v with Redis hung, want under a second", elapsed)
	}
	if !a.StoreDegraded() {
		t.Error("StoreDegraded() = false with Redis hung")
	}

	rec = serve(http.MethodGet, "/readyz")
	var ready struct{ Status string }
	if err := json.Unmarshal(rec.Body.Bytes(), &ready); err != nil || rec.Code != http.StatusOK || ready.Status != "degraded" {
		t.Errorf("/readyz = %d %s, want 200 degraded", rec.Code, rec.Body)
	}
	if got := metricValue(t, a, "aggregator_store_degraded"); got != 1 {
		t.Errorf("aggregator_store_degraded = %v, want 1", got)
	}
	rec = serve(http.MethodGet, "/v1/admin/events")
	var events struct {
		Events []struct {
			Kind, From, To, BreakerKey, Operation, Reason string
		}
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &events); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, e := range events.Events {
		if e.Kind == "store" && e.From == "shared" && e.To == "local" && e.BreakerKey == "" && e.Operation == "" {
			found++
		}
	}
	if found != 1 {
		t.Errorf("events = %s, want one store event shared → local", rec.Body)
	}
}
