package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/internal/redistest"
	"github.com/multas/aggregator/ratelimit"
	redisstore "github.com/multas/aggregator/store/redis"
)

// changes records the calls of OnDegraded.
type changes struct {
	mu   sync.Mutex
	seen []bool
}

func (c *changes) record(d bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = append(c.seen, d)
}

func (c *changes) get() []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]bool(nil), c.seen...)
}

// logBuffer collects log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(s string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), s)
}

func equalBools(a, b []bool) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// Redis stops in the middle of the traffic: calls go on with local state,
// the change is reported once, and shared state is used again when Redis is
// back.
func TestRedisDownAndBack(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	client := serverClient(t, srv, 50*time.Millisecond)
	var seen changes
	var logs logBuffer
	st := newStores(t, client, redisstore.Options{
		Prefix: "agg:", HealthInterval: 20 * time.Millisecond, OnDegraded: seen.record,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	s := breakertest.Settings()
	s.ConsecutiveFailures = 3
	set := breaker.NewSet(st.Breakers, breaker.Options{
		Events: st.Events, OnStoreError: func(err error) { t.Errorf("breaker store error: %v", err) },
	})
	set.Add(caba, "caba", s)
	lim := ratelimit.New(st.Limits, nil)
	lim.OnStoreError = func(err error) { t.Errorf("limit store error: %v", err) }
	lim.Configure("caba", ratelimit.Settings{RPS: 1000, Burst: 1000})
	ctx := context.Background()

	// Shared state.
	if !call(t, set, succeed) {
		t.Fatal("refused")
	}
	if _, err := lim.Decide(ctx, "caba", time.Second); err != nil {
		t.Fatal(err)
	}
	if n := client.Exists(ctx, "agg:{caba/by_domain}:breaker", "agg:{ratelimit/caba}:tat").Val(); n != 2 {
		t.Fatalf("%d of the breaker and budget keys in Redis, want 2", n)
	}
	if err := st.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}

	srv.Stop()
	for i := range 50 {
		if !call(t, set, succeed) {
			t.Fatalf("call %d refused with Redis down", i)
		}
		if _, err := lim.Decide(ctx, "caba", time.Second); err != nil {
			t.Fatalf("call %d: limiter: %v", i, err)
		}
	}
	if !st.Degraded() {
		t.Fatal("Degraded() = false with Redis down")
	}
	if got := seen.get(); !equalBools(got, []bool{true}) {
		t.Errorf("OnDegraded calls = %v, want [true]", got)
	}
	if n := logs.count("redis store unreachable"); n != 1 {
		t.Errorf("%d log lines about the outage, want 1", n)
	}
	if err := st.Ping(ctx); !errors.Is(err, redisstore.ErrDegraded) {
		t.Errorf("Ping = %v, want ErrDegraded", err)
	}
	// Local state decides meanwhile: a pause holds, the breaker still trips.
	if got := lim.Pause(ctx, "caba", time.Minute); got != time.Minute {
		t.Errorf("Pause = %v, want 1m", got)
	}
	var le *ratelimit.LimitedError
	if _, err := lim.Decide(ctx, "caba", time.Second); !errors.As(err, &le) || !le.Paused {
		t.Errorf("Decide during a pause = %v, want paused", err)
	}
	for range 3 {
		call(t, set, fail)
	}
	if call(t, set, succeed) {
		t.Error("the local breaker did not trip with Redis down")
	}
	if ev := st.Events.Latest(1); len(ev) != 1 || ev[0].To != breaker.Open {
		t.Errorf("events while degraded = %+v, want the local trip", ev)
	}

	srv.Start() // empty: no persistence
	deadline := time.Now().Add(10 * time.Second)
	for st.Degraded() {
		if time.Now().After(deadline) {
			t.Fatal("still degraded 10s after Redis came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := seen.get(); !equalBools(got, []bool{true, false}) {
		t.Errorf("OnDegraded calls = %v, want [true false]", got)
	}
	if n := logs.count("redis store back"); n != 1 {
		t.Errorf("%d log lines about the recovery, want 1", n)
	}
	if err := st.Ping(ctx); err != nil {
		t.Errorf("Ping after recovery: %v", err)
	}

	// Shared again: another replica's forced open holds here.
	o2, _ := redisstore.ClientOptions(srv.URL(), time.Second)
	client2 := redis.NewClient(o2)
	t.Cleanup(func() { _ = client2.Close() })
	st2 := newStores(t, client2, redisstore.Options{Prefix: "agg:"})
	set2 := breaker.NewSet(st2.Breakers, breaker.Options{Events: st2.Events})
	set2.Add(caba, "caba", s)
	if err := set2.ForceOpen(ctx, caba); err != nil {
		t.Fatal(err)
	}
	if got := state(t, set); got != breaker.ForcedOpen {
		t.Errorf("state = %s after another replica forced it open, want forced_open", got)
	}
	// The trip made while degraded reached the shared log.
	found := false
	for _, e := range st2.Events.Latest(10) {
		found = found || e.To == breaker.Open
	}
	if !found {
		t.Errorf("shared events = %+v, want the trip made while degraded", st2.Events.Latest(10))
	}
}

// A client pointed at a port nothing listens on: calls work locally, and the
// degradation is reported once.
func TestRedisUnreachable(t *testing.T) {
	t.Parallel()
	o, err := redisstore.ClientOptions(fmt.Sprintf("redis://127.0.0.1:%d/0", freePort(t)), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(o)
	t.Cleanup(func() { _ = client.Close() })
	var seen changes
	st := newStores(t, client, redisstore.Options{OnDegraded: seen.record, HealthInterval: 10 * time.Millisecond})
	set := breaker.NewSet(st.Breakers, breaker.Options{Events: st.Events})
	set.Add(caba, "caba", breakertest.Settings())
	start := time.Now()
	for i := range 20 {
		if !call(t, set, succeed) {
			t.Fatalf("call %d refused", i)
		}
	}
	t.Logf("20 calls with Redis unreachable took %v", time.Since(start))
	if st, _ := set.Status(context.Background(), caba); st.Calls != 20 {
		t.Errorf("local state recorded %d calls, want 20", st.Calls)
	}
	time.Sleep(50 * time.Millisecond) // several failed health checks
	if !st.Degraded() {
		t.Error("Degraded() = false")
	}
	if got := seen.get(); !equalBools(got, []bool{true}) {
		t.Errorf("OnDegraded calls = %v, want [true]", got)
	}
	if err := st.Ping(context.Background()); !errors.Is(err, redisstore.ErrDegraded) {
		t.Errorf("Ping = %v, want ErrDegraded", err)
	}
}

// Close stops every goroutine the stores started, degraded or not.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	// Not parallel: it looks at every goroutine of the process.
	base := testClient(t)
	prefix := testPrefix(t, base)
	ignore := goleak.IgnoreCurrent()
	for _, url := range []string{testURL(), fmt.Sprintf("redis://127.0.0.1:%d/0", freePort(t))} {
		o, err := redisstore.ClientOptions(url, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		client := redis.NewClient(o)
		st := redisstore.New(client, redisstore.Options{Prefix: prefix, HealthInterval: 5 * time.Millisecond})
		set := breaker.NewSet(st.Breakers, breaker.Options{Events: st.Events})
		set.Add(caba, "caba", breakertest.Settings())
		call(t, set, succeed)
		time.Sleep(20 * time.Millisecond)
		_ = st.Close()
		_ = client.Close()
	}
	// go-redis's own dialer sleeps a second between attempts before it sees
	// its client closed: wait for it.
	deadline := time.Now().Add(3 * time.Second)
	for goleak.Find(ignore) != nil && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	goleak.VerifyNone(t, ignore)
}

// storeEvents returns the store events of l, as "from→to".
func storeEvents(events []breaker.Event) []string {
	var out []string
	for _, e := range events {
		if e.Kind == breaker.KindStore {
			out = append(out, string(e.From)+"→"+string(e.To))
		}
	}
	return out
}

// Redis that comes back for less than StableFor does not bring the stores
// back: one degradation, one recovery, StableFor after Redis last came
// back; each is a store event of the shared log.
func TestNoFlapping(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	client := serverClient(t, srv, 50*time.Millisecond)
	var failed failures
	client.AddHook(&failed)
	var seen changes
	const stable = 600 * time.Millisecond
	st := newStores(t, client, redisstore.Options{
		Prefix: "agg:", HealthInterval: 10 * time.Millisecond, MaxHealthWait: 50 * time.Millisecond,
		StableFor: stable, OnDegraded: seen.record,
	})
	set := breaker.NewSet(st.Breakers, breaker.Options{Events: st.Events})
	set.Add(caba, "caba", breakertest.Settings())
	call(t, set, succeed)

	srv.Stop()
	_ = st.Ping(context.Background()) // a call decided from the view would not notice
	if !st.Degraded() {
		t.Fatal("not degraded with Redis stopped")
	}
	// Back for a moment, gone again (until a check of the store has seen
	// it gone: checks are StableFor/5 apart), then back for good.
	srv.Start()
	time.Sleep(stable / 3)
	before := failed.n.Load()
	srv.Stop()
	for deadline := time.Now().Add(10 * time.Second); failed.n.Load() == before; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no check of the store failed in 10s with Redis stopped")
		}
	}
	if !st.Degraded() {
		t.Fatal("the stores came back while Redis answered for less than StableFor")
	}
	srv.Start()
	back := time.Now()
	deadline := back.Add(10 * time.Second)
	for st.Degraded() {
		if time.Now().After(deadline) {
			t.Fatal("still degraded 10s after Redis came back")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if d := time.Since(back); d < stable-100*time.Millisecond {
		t.Errorf("shared state again %v after Redis came back, want at least StableFor (%v)", d, stable)
	}
	if got := seen.get(); !equalBools(got, []bool{true, false}) {
		t.Errorf("OnDegraded calls = %v, want [true false]", got)
	}
	if got := storeEvents(st.Events.Latest(100)); fmt.Sprint(got) != "[shared→local local→shared]" {
		t.Errorf("store events in the shared log = %v, want [shared→local local→shared]", got)
	}
}

// failures counts the calls of a client that failed.
type failures struct{ n atomic.Int64 }

func (f *failures) DialHook(next redis.DialHook) redis.DialHook { return next }

func (f *failures) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err != nil && !errors.Is(err, redis.Nil) {
			f.n.Add(1)
		}
		return err
	}
}

func (f *failures) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err != nil && !errors.Is(err, redis.Nil) {
			f.n.Add(1)
		}
		return err
	}
}

// A degraded store checks Redis with exponential backoff: a Redis that
// stays away costs a few attempts, not one per HealthInterval.
func TestHealthBackoff(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepts atomic.Int64
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			_ = c.Close() // a Redis that hangs up at once
		}
	})
	t.Cleanup(func() { _ = l.Close(); wg.Wait() })
	o, err := redisstore.ClientOptions("redis://"+l.Addr().String()+"/0", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(o)
	t.Cleanup(func() { _ = client.Close() })
	st := newStores(t, client, redisstore.Options{HealthInterval: 10 * time.Millisecond, MaxHealthWait: 300 * time.Millisecond})
	set := breaker.NewSet(st.Breakers, breaker.Options{Events: st.Events})
	set.Add(caba, "caba", breakertest.Settings())
	call(t, set, succeed)
	if !st.Degraded() {
		t.Fatal("not degraded")
	}
	before := accepts.Load()
	time.Sleep(2 * time.Second)
	n := accepts.Load() - before
	t.Logf("%d connections in 2s of a degraded store (a check every 10ms would be 200 or more)", n)
	if n > 100 {
		t.Errorf("%d connection attempts in 2s, want the backoff to space them", n)
	}
}

// A replica that loses Redis while a breaker is open goes on from what it
// knew: the breaker stays open on local state, and when its time ends one
// probe goes, not a fresh closed breaker's worth of calls.
func TestDegradedKeepsOpenBreaker(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	client := serverClient(t, srv, 50*time.Millisecond)
	st := newStores(t, client, redisstore.Options{Prefix: "agg:", StableFor: time.Hour})
	s := breakertest.Settings()
	s.ConsecutiveFailures, s.OpenFor = 3, 3*time.Second
	set := breaker.NewSet(st.Breakers, breaker.Options{Events: st.Events})
	set.Add(caba, "caba", s)
	for range 3 {
		call(t, set, fail)
	}
	if got := state(t, set); got != breaker.Open {
		t.Fatalf("state = %s, want open", got)
	}
	srv.Stop()
	_ = st.Ping(context.Background())
	if !st.Degraded() {
		t.Fatal("not degraded with Redis stopped")
	}
	status, err := set.Status(context.Background(), caba)
	if err != nil || status.State != breaker.Open || time.Until(status.OpenUntil) <= 0 {
		t.Fatalf("Status on local state = %+v, %v; want open until later", status, err)
	}
	if call(t, set, fail) {
		t.Fatal("a call went through the open breaker on local state")
	}
	time.Sleep(time.Until(status.OpenUntil))
	went := 0
	for range 5 {
		if call(t, set, fail) {
			went++
		}
	}
	if went != 1 {
		t.Errorf("%d calls went once the open time ended on local state, want the one probe", went)
	}
}

// TestAdminActionsReachTheFleet: an operator's reset is the fleet's. Made
// while this replica decides on local state but Redis answers again, it
// goes to Redis at once; made while Redis is away, it is written back when
// Redis returns, so the other replicas stop skipping the portal.
func TestAdminActionsReachTheFleet(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	// Timeouts a loaded machine keeps to: Redis stopped is refused at once.
	o, err := redisstore.ClientOptions(srv.URL(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	s := breakertest.Settings()
	s.ConsecutiveFailures, s.OpenFor = 3, time.Hour
	replica := func(stableFor time.Duration) (*redisstore.Stores, *breaker.Set) {
		client := redis.NewClient(o)
		t.Cleanup(func() { _ = client.Close() })
		st := newStores(t, client, redisstore.Options{Prefix: "agg:", StableFor: stableFor, Timeout: time.Second})
		set := breaker.NewSet(st.Breakers, breaker.Options{Events: st.Events})
		set.Add(caba, "caba", s)
		return st, set
	}
	stA, a := replica(time.Hour) // once degraded, it stays so
	stB, b := replica(200 * time.Millisecond)
	trip := func() {
		t.Helper()
		for range 3 {
			call(t, a, fail)
		}
		if got, other := state(t, a), state(t, b); got != breaker.Open || other != breaker.Open {
			t.Fatalf("after 3 failures: %s and %s, want open on both", got, other)
		}
	}
	trip()

	// Redis goes away and comes back; a stays on local state.
	srv.Stop()
	_ = stA.Ping(ctx)
	if !stA.Degraded() {
		t.Fatal("not degraded with Redis stopped")
	}
	srv.Start()
	if err := a.Reset(ctx, caba); err != nil {
		t.Fatal(err)
	}
	if !stA.Degraded() {
		t.Fatal("a left local state: the test needs it degraded")
	}
	check := redis.NewClient(o)
	t.Cleanup(func() { _ = check.Close() })
	if st, err := check.HGet(ctx, "agg:{caba/by_domain}:breaker", "st").Result(); err != nil || st != "closed" {
		t.Errorf("a reset made on local state with Redis answering: Redis holds %q, %v; want closed", st, err)
	}
	if got := state(t, a); got != breaker.Closed {
		t.Errorf("the replica that reset it sees %s", got)
	}
	// b finds Redis restarted (its pooled connections died with it), and
	// follows once it is back on shared state.
	deadline := time.Now().Add(10 * time.Second)
	for state(t, b) != breaker.Closed || stB.Degraded() {
		if time.Now().After(deadline) {
			t.Fatalf("the other replica still sees %s (degraded %v)", state(t, b), stB.Degraded())
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Redis away during the reset: written back once it is steady again.
	trip2 := func() {
		for range 3 {
			call(t, b, fail)
		}
		if got := state(t, b); got != breaker.Open {
			t.Fatalf("b after 3 failures: %s, want open", got)
		}
	}
	trip2()
	srv.Stop()
	_ = stB.Ping(ctx)
	if !stB.Degraded() {
		t.Fatal("b not degraded with Redis stopped")
	}
	if err := b.Reset(ctx, caba); err != nil {
		t.Fatal(err)
	}
	srv.Start() // stopped when the test ends
	deadline = time.Now().Add(10 * time.Second)
	for {
		if !stB.Degraded() {
			st, err := check.HGet(ctx, "agg:{caba/by_domain}:breaker", "st").Result()
			if err == nil && st == "closed" {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reset made during the outage never reached Redis (degraded %v)", stB.Degraded())
		}
		_ = stB.Ping(ctx)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestLostScriptsCountOnce: a Redis that lost its scripts (restarted,
// a replica promoted) answers NOSCRIPT to the calls of a round trip that
// use them; the others ran, and only the former are made again: a flush
// run twice would count its calls twice, and trip the breaker early.
func TestLostScriptsCountOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	client := serverClient(t, srv, time.Second)
	ctx := context.Background()
	clock := breakertest.NewClock()
	logger, log := newLog()
	st := newStores(t, client, redisstore.Options{Prefix: "agg:", Timeout: suiteTimeout, FlushInterval: time.Hour, RefreshInterval: time.Hour,
		Logger: logger})
	set := breaker.NewSet(st.Breakers, breaker.Options{Now: clock.Now, Events: st.Events})
	set.Add(caba, "caba", breakertest.Settings())
	call(t, set, fail) // reads the breaker
	clock.Advance(7 * time.Second)
	// Into the next bucket of the window: the first failure's count goes
	// at once, which loads the flush script, and the second's waits.
	call(t, set, fail)
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	call(t, set, fail)
	clock.Advance(7 * time.Second)
	call(t, set, fail) // loads the flush script again; one count waits
	// Status: the waiting count (flush, known) and the read (status,
	// unknown since the SCRIPT FLUSH) in one round trip.
	got, err := set.Status(ctx, caba)
	if st.Degraded() {
		t.Fatalf("the store degraded: the test needs Redis answering\n%s", log)
	}
	if err != nil || got.Calls != 4 || got.Failures != 4 {
		t.Errorf("Status = %+v, %v; want the 4 calls counted once", got, err)
	}
}
