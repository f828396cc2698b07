package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/redistest"
)

// SPEC 9, Redis contents are untrusted, through the whole product: a
// replica with state of every kind in Redis (breakers open, forced open
// and with settings shared, a pause, a budget, events, a pending
// asynchronous query, a DLQ entry, release pace) finds every one of its
// keys clobbered — replaced by random bytes, or kept in type with every
// value corrupted — and then: no endpoint answers 500, what cannot be
// read is absent (the corrupted query and DLQ entry are 404, the listings
// skip them, every breaker is closed), the log names keys but holds none
// of the garbage, and the product recovers: breakers trip and reset, a
// new asynchronous query is delivered, the unreadable query leaves the
// work schedule.

// garbageMarker starts every planted value.
const garbageMarker = "GARBAGE-"

// garbageValues makes the values planted in Redis and remembers their
// tokens (marker and hex), which must appear in no log line.
type garbageValues struct {
	mu     sync.Mutex
	tokens []string
}

func (g *garbageValues) next() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	tok := garbageMarker + hex.EncodeToString(b[:])
	g.mu.Lock()
	g.tokens = append(g.tokens, tok)
	g.mu.Unlock()
	// The token, raw bytes (not UTF-8, NUL), and JSON-looking text.
	return tok + "\x00\xff\xfe{\"id\":\"" + tok + "\",[" + string(b[:])
}

// syncLog collects a replica's log lines.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestRedisContentsUntrusted(t *testing.T) {
	t.Parallel()
	for _, variant := range []string{"replaced", "corrupted"} {
		t.Run(variant, func(t *testing.T) {
			t.Parallel()
			testRedisContentsUntrusted(t, variant)
		})
	}
}

func testRedisContentsUntrusted(t *testing.T, variant string) {
	ctx := context.Background()
	c, url := redistest.Connect(t)
	prefix := redistest.Prefix(t, c, "e2e-untrusted-")

	okMux := http.NewServeMux()
	okMux.Handle("GET /actas", one("OK-1"))
	okMux.Handle("GET /actas/OK-1/boleta", voucherPDF())
	ok := newPortal(t, okMux)
	down := newPortal(t, status(http.StatusServiceUnavailable))
	limited := newPortal(t, status(http.StatusTooManyRequests, "Retry-After", "300"))
	forced := newPortal(t, one("F-1"))
	good := newHookReceiver(t, 0)
	bad := newHookReceiver(t, http.StatusInternalServerError)

	text := configYAML(adminToken,
		source{id: "ok", url: ok.URL, extra: []string{"rate_limit: {rps: 100, burst: 100}"}},
		source{id: "down", url: down.URL, extra: []string{"breaker: {min_calls: 2, failure_ratio: 0.5, open_for: 1m}"}},
		source{id: "limited", url: limited.URL, extra: []string{"rate_limit: {max_wait: 0s, max_pause: 10m}"}},
		source{id: "forced", url: forced.URL},
	) + asyncBlock("max_wait: 10m, release_rps: 50",
		"allow_private: true, backoff: 50ms, max_attempts: 2, breaker: {consecutive_failures: 50, open_for: 1s}") +
		// A timeout a loaded machine keeps to: a slow answer would send a
		// replica to local state, which garbage must not (checked below).
		fmt.Sprintf("store: {redis_url: %q, key_prefix: %q, timeout: 2s}\n", url, prefix)
	cfg, err := config.Parse([]byte(text), "e2e.yaml", nil)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, text)
	}
	log := &syncLog{}
	e := startAsync(t, cfg, app.Options{
		Logger: slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})

	// Every kind of state.
	for i := range 2 {
		e.byDomain(plateN(i))
	}
	e.waitState("down", "by_domain", "open")
	e.forceOpen("forced", "by_domain")
	if resp, body := e.admin(http.MethodPut, "/sources/ok/breaker", `{"min_calls": 5}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT breaker settings: %d %s", resp.StatusCode, body)
	}
	pending := e.postQuery(fmt.Sprintf(`{"domain": %q, "callback_url": %q, "sources": ["down"]}`, asyncPlate(1), good.URL+"/hook"))
	if pending.Status != "pending" {
		t.Fatalf("query on a down source: %s, want pending", pending.Status)
	}
	e.postQuery(fmt.Sprintf(`{"domain": %q, "callback_url": %q, "sources": ["ok"]}`, asyncPlate(2), bad.URL+"/hook"))
	var dead []dlqEntry
	eventually(t, 10*time.Second, "a DLQ entry", func() bool { dead = e.listDLQ(); return len(dead) == 1 })

	// Clobber every key under the prefix.
	var keys []string
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	types := map[string]int{}
	garbage := &garbageValues{}
	for _, k := range keys {
		typ := c.Type(ctx, k).Val()
		types[typ]++
		if variant == "replaced" {
			c.Del(ctx, k)
			c.Set(ctx, k, garbage.next(), 0)
			continue
		}
		switch typ {
		case "string":
			c.Set(ctx, k, garbage.next(), redis.KeepTTL)
		case "hash":
			for _, f := range c.HKeys(ctx, k).Val() {
				c.HSet(ctx, k, f, garbage.next())
			}
		case "list":
			for i := range c.LLen(ctx, k).Val() {
				c.LSet(ctx, k, i, garbage.next())
			}
		case "zset":
			// Absurd due times for the members there, and members that
			// are not ids.
			for i, m := range c.ZRange(ctx, k, 0, -1).Val() {
				c.ZAdd(ctx, k, redis.Z{Score: []float64{1e300, -1e300, 0}[i%3], Member: m})
			}
			c.ZAdd(ctx, k, redis.Z{Score: 0, Member: garbage.next()})
		default:
			t.Errorf("key %s of type %s", k, typ)
		}
	}
	t.Logf("%s %d keys: %v", variant, len(keys), types)
	for _, typ := range []string{"string", "hash", "list", "zset"} {
		if types[typ] == 0 {
			t.Errorf("no key of type %s to clobber: the state set up is not every kind", typ)
		}
	}

	// A replica that starts now reads the clobbered settings and pauses.
	log2 := &syncLog{}
	e2 := startAsync(t, cfg, app.Options{
		Logger: slog.New(slog.NewJSONHandler(log2, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})

	// Every endpoint, on both replicas: no 500, what cannot be read is
	// absent. The new replica goes first: the first replica still holds
	// the pause it set, and writes it back over the garbage as soon as it
	// reads Redis again (its pauses are remembered for a second: on a busy
	// machine the read came before the new replica's), after which the
	// new replica rightly skips the paused source.
	expect := func(what string, resp *http.Response, body []byte, want ...int) {
		t.Helper()
		for _, w := range want {
			if resp.StatusCode == w {
				return
			}
		}
		t.Errorf("%s: got %d %s, want %v", what, resp.StatusCode, body, want)
	}
	for i, e := range []*env{e2, e} {
		fresh := i == 0
		for _, path := range []string{"/healthz", "/readyz", "/metrics", "/v1/sources"} {
			resp, body := e.get(path)
			expect(path, resp, body, http.StatusOK)
		}
		for _, b := range e.breakers() {
			if b.State != "closed" {
				t.Errorf("breaker %s/%s %s after its state was clobbered (before any call), want closed", b.BreakerKey, b.Operation, b.State)
			}
			if fresh && b.BreakerKey == "ok" && b.Settings["min_calls"] != float64(4) {
				t.Errorf("the new replica took min_calls %v from clobbered settings, want its own 4", b.Settings["min_calls"])
			}
		}
		a := e.byDomain(plateN(10 + i))
		if a.status != http.StatusOK {
			t.Errorf("query: %d", a.status)
		} else {
			checkEntry(t, a.entry(t, "ok"), "succeeded", "")
			if fresh { // the pause is garbage: the portal is called, and pauses it again
				checkEntry(t, a.entry(t, "limited"), "failed", "rate-limited")
			} else { // the pause the portal just gave, or the one this replica remembers
				checkEntry(t, a.entry(t, "limited"), "skipped", "rate-limited")
			}
		}
		resp, body := e.get("/v1/sources/ok/infractions/OK-1/voucher")
		expect("voucher", resp, body, http.StatusOK)
		e.events(time.Time{})
		e.history()
		if ps := e.opsSources()["limited"].Pause; ps != nil && strings.Contains(ps.Reason, garbageMarker) {
			t.Errorf("the clobbered pause reason reached the admin API: %+v", ps)
		}
		if got := e.listDLQ(); len(got) != 0 {
			t.Errorf("DLQ = %+v, want the unreadable entry left out", got)
		}
		resp, body = e.get("/v1/queries/" + pending.ID)
		expect("the unreadable query", resp, body, http.StatusNotFound)
	}
	resp, body := e.admin(http.MethodPost, "/dlq/"+dead[0].ID+"/redeliver", "")
	expect("redeliver an unreadable entry", resp, body, http.StatusNotFound)
	resp, body = e.admin(http.MethodDelete, "/dlq/"+dead[0].ID, "")
	if variant == "replaced" {
		expect("delete in a DLQ of another type", resp, body, http.StatusNotFound)
	} else {
		expect("delete an unreadable entry", resp, body, http.StatusNoContent)
		if n, _ := c.HLen(ctx, prefix+"async:{async}:dlq").Result(); n != 0 {
			t.Errorf("the unreadable entry is still there after DELETE (%d fields)", n)
		}
	}
	for _, path := range []string{"/breakers/forced/by_domain/reset", "/breakers/ok/by_id/open", "/breakers/ok/by_id/reset"} {
		resp, body := e.admin(http.MethodPost, path, "")
		expect(path, resp, body, http.StatusOK)
	}
	resp, body = e.admin(http.MethodPut, "/sources/ok/breaker", `{"open_for": "2s"}`)
	expect("PUT breaker settings", resp, body, http.StatusOK)

	// Recovery: a breaker trips and resets, with a readable state in
	// Redis; a new asynchronous query is delivered; the unreadable one
	// has left the work schedule.
	for i := range 2 {
		e.byDomain(plateN(20 + i))
	}
	e.waitState("down", "by_domain", "open")
	if st := c.HGet(ctx, prefix+"{down/by_domain}:breaker", "st").Val(); st != "open" {
		t.Errorf("the tripped breaker's state in Redis: %q, want open", st)
	}
	resp, body = e.admin(http.MethodPost, "/breakers/down/by_domain/reset", "")
	expect("reset", resp, body, http.StatusOK)
	if b := e.breaker("down", "by_domain"); b.State != "closed" {
		t.Errorf("after reset: %s", b.State)
	}
	q := e.postQuery(fmt.Sprintf(`{"domain": %q, "callback_url": %q, "sources": ["ok"]}`, asyncPlate(3), good.URL+"/hook"))
	eventually(t, 10*time.Second, "the new query delivered", func() bool { return len(good.delivered(q.ID)) == 1 })
	if got := e.getQuery(q.ID); got.Status != "completed" {
		t.Errorf("new query: %s, want completed", got.Status)
	}
	eventually(t, 10*time.Second, "the unreadable query off the schedule", func() bool {
		return errors.Is(c.ZScore(ctx, prefix+"async:{async}:q:due", pending.ID).Err(), redis.Nil)
	})
	if got := e.events(time.Time{}); len(got) == 0 {
		t.Error("no events after the recovery")
	}
	if resp, body := e.get("/metrics"); resp.StatusCode != http.StatusOK {
		t.Errorf("/metrics: %d %s", resp.StatusCode, body)
	}

	out := log.String() + log2.String()
	if !strings.Contains(out, "unreadable") {
		t.Errorf("nothing logged as unreadable:\n%s", out)
	}
	for _, tok := range garbage.tokens {
		if strings.Contains(out, tok) {
			t.Errorf("the log holds the planted value %s", tok)
		}
	}
	if strings.Contains(out, garbageMarker) {
		t.Errorf("the log holds planted values:\n%s", out)
	}
	for _, key := range []string{"{ok/by_domain}:settings", "{ratelimit/limited}:pause"} {
		name, _ := json.Marshal(prefix + key)
		if !strings.Contains(log2.String(), `"key":`+string(name)) {
			t.Errorf("the new replica did not report %s as unreadable", key)
		}
	}
	if strings.Contains(out, "redis store unreachable") {
		t.Errorf("garbage made the store degrade:\n%s", out)
	}
}
