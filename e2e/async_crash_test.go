package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/redistest"
)

// The environment of the replica that TestAsyncCrash kills: its
// configuration, and the bodies of the queries it accepts.
const (
	crashConfigEnv  = "AGGREGATOR_E2E_CRASH_CONFIG"
	crashQueriesEnv = "AGGREGATOR_E2E_CRASH_QUERIES"
)

// testRedisURL is the Redis of the tests and a key prefix of the test's
// own, whose keys are deleted when the test ends (see internal/redistest).
func testRedisURL(t *testing.T) (string, string) {
	t.Helper()
	c, u := redistest.Connect(t)
	return u, redistest.Prefix(t, c, "aggtest:e2e:")
}

// TestAsyncCrashChild is the replica that TestAsyncCrash kills: it accepts
// the queries it is given, says so, and works until it is killed.
func TestAsyncCrashChild(t *testing.T) {
	text := os.Getenv(crashConfigEnv)
	if text == "" {
		t.Skip("the replica TestAsyncCrash runs and kills")
	}
	cfg, err := config.Parse([]byte(text), "crash.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Server)
	var bodies []string
	if err := json.Unmarshal([]byte(os.Getenv(crashQueriesEnv)), &bodies); err != nil {
		t.Fatal(err)
	}
	for _, body := range bodies {
		resp, err := http.Post(srv.URL+"/v1/queries", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var q struct {
			ID string `json:"id"`
		}
		if resp.StatusCode != http.StatusAccepted || json.Unmarshal(raw, &q) != nil {
			t.Fatalf("POST /v1/queries: %d %s", resp.StatusCode, raw)
		}
		fmt.Printf("QID %s\n", q.ID)
	}
	fmt.Println("READY")
	time.Sleep(time.Hour) // until SIGKILL
}

// TestAsyncCrash: a replica is killed (SIGKILL) with accepted queries and
// pending deliveries, one of them in flight; another replica on the same
// Redis finishes the queries and delivers every result: none lost, and
// duplicates, if any, carry the same webhook-id.
func TestAsyncCrash(t *testing.T) {
	redisURL, prefix := testRedisURL(t)
	caba := newPortal(t, one("Q-1"))
	cordoba := newPortal(t, status(http.StatusServiceUnavailable))
	recv := newHookReceiver(t, http.StatusServiceUnavailable)
	text := configYAML(adminToken, source{id: "caba", url: caba.URL},
		source{id: "cordoba", url: cordoba.URL, extra: []string{"breaker: {min_calls: 1, failure_ratio: 0.5, open_for: 300ms}"}})
	// A short query budget makes a short lease: work held by the killed
	// replica is taken over within seconds.
	text = strings.Replace(text, "query: {deadline: 3s,", "query: {deadline: 500ms,", 1)
	text += fmt.Sprintf("store: {redis_url: %q, key_prefix: %q}\n", redisURL, prefix)
	text += asyncBlock("max_wait: 1m, release_rps: 20",
		"allow_private: true, timeout: 500ms, backoff: 100ms, max_attempts: 100, breaker: {consecutive_failures: 3, open_for: 300ms}")
	var bodies []string
	for i := range 4 { // complete at once: their deliveries are pending
		bodies = append(bodies, fmt.Sprintf(`{"domain": %q, "sources": ["caba"], "callback_url": %q}`, asyncPlate(i), recv.URL))
	}
	for i := 4; i < 7; i++ { // pending on cordoba: the queries themselves must survive
		bodies = append(bodies, fmt.Sprintf(`{"domain": %q, "callback_url": %q}`, asyncPlate(i), recv.URL))
	}
	queries, _ := json.Marshal(bodies)

	child := exec.Command(os.Args[0], "-test.run=^TestAsyncCrashChild$", "-test.count=1", "-test.timeout=5m")
	child.Env = append(os.Environ(), crashConfigEnv+"="+text, crashQueriesEnv+"="+string(queries))
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
	})
	var ids []string
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if id, ok := strings.CutPrefix(line, "QID "); ok {
				ids = append(ids, id)
			}
			if line == "READY" {
				ready <- nil
				_, _ = io.Copy(io.Discard, out)
				return
			}
		}
		ready <- fmt.Errorf("the child replica ended before it was ready: %v", sc.Err())
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the child replica was not ready within 30s")
	}
	if len(ids) != len(bodies) {
		t.Fatalf("the child accepted %d queries, want %d", len(ids), len(bodies))
	}

	// The receiver is down; then a delivery is caught in flight, and the
	// replica is killed.
	eventually(t, 10*time.Second, "failed attempts", func() bool { return len(recv.received()) >= 3 })
	recv.setHang()
	eventually(t, 10*time.Second, "a delivery in flight", func() bool {
		recv.mu.Lock()
		defer recv.mu.Unlock()
		return recv.hanging > 0
	})
	if err := child.Process.Kill(); err != nil { // SIGKILL: no cleanup at all
		t.Fatal(err)
	}
	_ = child.Wait()
	killed = true

	recv.set(http.StatusOK)
	cordoba.set(one("Q-2"))
	cfg, err := config.Parse([]byte(text), "crash.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	e := startAsync(t, cfg, app.Options{})
	eventually(t, 30*time.Second, "every result delivered by the new replica", func() bool {
		for _, id := range ids {
			if len(recv.delivered(id)) == 0 {
				return false
			}
		}
		return true
	})
	time.Sleep(200 * time.Millisecond)
	for i, id := range ids {
		got := recv.delivered(id)
		ev := got[0].event
		if ev.Type != "query.completed" || !ev.Data.Result.Complete {
			t.Errorf("query %d (%s): %s complete=%v, want query.completed", i, id, ev.Type, ev.Data.Result.Complete)
		}
		webhookIDs := map[string]bool{}
		for _, c := range recv.received() {
			if c.event.Data.ID == id {
				webhookIDs[c.header.Get("webhook-id")] = true
			}
		}
		if len(webhookIDs) != 1 {
			t.Errorf("query %s: webhook-ids %v, want one, shared by every attempt and duplicate", id, webhookIDs)
		}
		if len(got) > 1 {
			t.Logf("query %s delivered %d times (at least once), same webhook-id", id, len(got))
		}
		if q := e.getQuery(id); q.Status != "completed" {
			t.Errorf("GET /v1/queries/%s on the new replica: %s, want completed", id, q.Status)
		}
	}
	for i := 4; i < 7; i++ {
		checkEntry(t, recv.delivered(ids[i])[0].event.Data.Result.entry(t, "cordoba"), "succeeded", "")
	}
}
