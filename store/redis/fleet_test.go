package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/internal/redistest"
	redisstore "github.com/multas/aggregator/store/redis"
)

var (
	caba    = breaker.ID{Key: "caba", Operation: aggregator.ByDomain}
	fail    = breaker.Report{Outcome: aggregator.Unavailable, Status: 503}
	succeed = breaker.Report{Outcome: aggregator.Succeeded}
)

// counter counts the commands a client sends: its round trips.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		// Background work (the health check's PING, the subscription, a
		// new connection's handshake) shares the client: count only what
		// a decision sends.
		switch cmd.Name() {
		case "ping", "subscribe", "psubscribe", "hello", "client", "auth", "select":
		default:
			c.n.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// replica is one aggregator replica: its own client, stores and Set.
type replica struct {
	client   *redis.Client
	stores   *redisstore.Stores
	set      *breaker.Set
	commands *counter
	prefix   string
}

// fleet starts n replicas sharing one Redis under one prefix, on clock now,
// and waits until each listens to the others' changes.
func fleet(t *testing.T, n int, now func() time.Time, s breaker.Settings, opts redisstore.Options) []*replica {
	t.Helper()
	base := testClient(t)
	opts.Prefix = testPrefix(t, base)
	rs := make([]*replica, n)
	for i := range rs {
		rs[i] = newReplica(t, testURL(), now, s, opts)
	}
	waitListening(t, rs...)
	return rs
}

// newReplica starts a replica on the Redis at url, with breaker caba of
// settings s on clock now; calls are bounded by suiteTimeout unless opts
// say otherwise.
func newReplica(t *testing.T, url string, now func() time.Time, s breaker.Settings, opts redisstore.Options) *replica {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = suiteTimeout
	}
	o, err := redisstore.ClientOptions(url, opts.Timeout)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	cnt := &counter{}
	c.AddHook(cnt)
	st := newStores(t, c, opts)
	set := breaker.NewSet(st.Breakers, breaker.Options{Now: now, Events: st.Events})
	set.Add(caba, "caba", s)
	return &replica{client: c, stores: st, set: set, commands: cnt, prefix: opts.Prefix}
}

// call makes one call through set with report r; false if refused.
func call(t *testing.T, set *breaker.Set, r breaker.Report) bool {
	t.Helper()
	c, err := set.Allow(context.Background(), caba)
	if err != nil {
		if !errors.Is(err, breaker.ErrOpen) {
			t.Fatalf("Allow: %v", err)
		}
		return false
	}
	c.Done(context.Background(), r)
	return true
}

func state(t *testing.T, set *breaker.Set) breaker.State {
	t.Helper()
	st, err := set.Status(context.Background(), caba)
	if err != nil {
		t.Fatalf("Status: %v", err)
	}
	return st.State
}

// portalCalls sends calls to a portal that is down, round robin over sets,
// until every set refuses, and returns how many reached the portal. After
// each round, flush (when set) sends the replicas' counts, as their
// background flush would within a flush interval.
func portalCalls(t *testing.T, sets []*breaker.Set, flush ...func()) int {
	calls := 0
	for refusals := 0; refusals < len(sets); {
		refusals = 0
		for _, set := range sets {
			if call(t, set, fail) {
				calls++
			} else {
				refusals++
			}
		}
		for _, f := range flush {
			f()
		}
		if calls > 1000 {
			t.Fatal("the breakers never opened")
		}
	}
	return calls
}

func TestFleetTripsAfterMinCalls(t *testing.T) {
	t.Parallel()
	clock := breakertest.NewClock()
	s := breakertest.Settings()
	// Flushes only when the test says: each replica's calls of a round
	// are what it sends within one flush interval.
	rs := fleet(t, 3, clock.Now, s, redisstore.Options{FlushInterval: time.Hour})
	var flushes []func()
	for _, r := range rs {
		flushes = append(flushes, func() {
			if err := r.stores.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		})
	}
	shared := portalCalls(t, []*breaker.Set{rs[0].set, rs[1].set, rs[2].set}, flushes...)

	var alone []*breaker.Set
	for range 3 {
		set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{Now: clock.Now})
		set.Add(caba, "caba", s)
		alone = append(alone, set)
	}
	unshared := portalCalls(t, alone)
	t.Logf("calls to a down portal before every replica skips it: %d shared, %d unshared", shared, unshared)
	// SPEC 11: min_calls, plus what each replica sends within one flush
	// interval (one call a round each: two more than the trip's).
	if shared > s.MinCalls+len(rs)-1 {
		t.Errorf("the down portal received %d calls with shared state, want at most min_calls+%d = %d",
			shared, len(rs)-1, s.MinCalls+len(rs)-1)
	}
	for i, r := range rs {
		if got := state(t, r.set); got != breaker.Open {
			t.Errorf("replica %d: state %s, want open", i, got)
		}
	}
	// The trip is logged once, by the replica that made it.
	if events := rs[2].stores.Events.Latest(10); len(events) != 1 || events[0].To != breaker.Open {
		t.Errorf("shared event log = %+v, want the one trip", events)
	}
}

func TestFleetOneProbe(t *testing.T) {
	t.Parallel()
	clock := breakertest.NewClock()
	rs := fleet(t, 3, clock.Now, breakertest.Settings(), redisstore.Options{})
	portalCalls(t, []*breaker.Set{rs[0].set, rs[1].set, rs[2].set})
	clock.Advance(31 * time.Second)

	var (
		wg      sync.WaitGroup
		permits = make(chan *breaker.Call, 60)
		start   = make(chan struct{})
	)
	for _, r := range rs {
		for range 20 {
			wg.Go(func() {
				<-start
				c, err := r.set.Allow(context.Background(), caba)
				if err == nil {
					permits <- c
					return
				}
				var oe *breaker.OpenError
				if !errors.As(err, &oe) || !oe.Probing {
					t.Errorf("refusal = %v, want probe in flight", err)
				}
			})
		}
	}
	close(start)
	wg.Wait()
	close(permits)
	if len(permits) != 1 {
		t.Fatalf("%d permits granted in half-open across 3 replicas × 20 goroutines, want exactly 1", len(permits))
	}
	probe := <-permits
	if !probe.Probe() {
		t.Error("the permit is not marked as the probe")
	}
	probe.Done(context.Background(), succeed)
	for i, r := range rs {
		if got := state(t, r.set); got != breaker.Closed {
			t.Errorf("replica %d: state %s after the probe succeeded, want closed", i, got)
		}
	}
}

// A replica takes the probe and dies: after the lease, another one probes
// and the breaker closes.
func TestFleetDeadProbeHolder(t *testing.T) {
	t.Parallel()
	clock := breakertest.NewClock()
	s := breakertest.Settings()
	rs := fleet(t, 3, clock.Now, s, redisstore.Options{})
	portalCalls(t, []*breaker.Set{rs[0].set, rs[1].set, rs[2].set})
	clock.Advance(31 * time.Second)
	if _, err := rs[0].set.Allow(context.Background(), caba); err != nil {
		t.Fatalf("probe refused: %v", err)
	}
	_ = rs[0].stores.Close() // dies holding the lease; Done never comes
	_ = rs[0].client.Close()

	if call(t, rs[1].set, succeed) {
		t.Fatal("a second probe went while the first held its lease")
	}
	clock.Advance(s.ProbeLease)
	if !call(t, rs[1].set, succeed) {
		t.Fatal("the breaker stayed wedged after the dead replica's lease expired")
	}
	if got := state(t, rs[2].set); got != breaker.Closed {
		t.Errorf("state = %s, want closed", got)
	}
}

// A breaker seen open is not asked again until its time ends, and a reset on
// one replica holds on the others at once.
func TestFleetResetSeenAtOnce(t *testing.T) {
	t.Parallel()
	s := breakertest.Settings()
	s.OpenFor = time.Hour
	s.ConsecutiveFailures = 3
	rs := fleet(t, 3, time.Now, s, redisstore.Options{})
	for range 3 {
		call(t, rs[0].set, fail)
	}
	for i, r := range rs[1:] {
		if call(t, r.set, succeed) {
			t.Fatalf("replica %d: a call went through an open breaker", i+1)
		}
		before := r.commands.n.Load()
		for range 100 {
			if call(t, r.set, succeed) {
				t.Fatalf("replica %d: a call went through an open breaker", i+1)
			}
		}
		if n := r.commands.n.Load() - before; n != 0 {
			t.Errorf("replica %d: %d Redis commands for 100 calls to a breaker known open, want 0", i+1, n)
		}
	}

	if err := rs[0].set.Reset(context.Background(), caba); err != nil {
		t.Fatal(err)
	}
	for i, r := range rs[1:] {
		deadline := time.Now().Add(time.Second)
		for !call(t, r.set, succeed) {
			if time.Now().After(deadline) {
				t.Fatalf("replica %d still refuses a second after the reset on replica 0", i+1)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// Forced open, then reset: the same.
	if err := rs[1].set.ForceOpen(context.Background(), caba); err != nil {
		t.Fatal(err)
	}
	var deadline time.Time
	// Published, not polled: seen within moments.
	deadline = time.Now().Add(time.Second)
	for call(t, rs[2].set, succeed) {
		if time.Now().After(deadline) {
			t.Fatal("calls still go a second after another replica forced the breaker open")
		}
		time.Sleep(time.Millisecond)
	}
	if err := rs[0].set.Reset(context.Background(), caba); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(time.Second)
	for !call(t, rs[2].set, succeed) {
		if time.Now().After(deadline) {
			t.Fatal("replica 2 still refuses a second after the reset")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSharedSettings(t *testing.T) {
	t.Parallel()
	got := make(chan breaker.Settings, 4)
	rs := fleet(t, 2, time.Now, breakertest.Settings(), redisstore.Options{
		OnSettings: func(id breaker.ID, s breaker.Settings) {
			if id == caba {
				got <- s
			}
		},
	})
	s := breakertest.Settings()
	s.MinCalls = 3
	s.FailureStatuses = []int{502}
	if err := rs[0].stores.Breakers.ShareSettings(context.Background(), caba, s); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if !g.Equal(s) {
			t.Errorf("settings received = %+v, want %+v", g, s)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("the other replica never received the settings")
	}
	select {
	case g := <-got:
		t.Errorf("settings delivered twice, or to their own replica: %+v", g)
	case <-time.After(50 * time.Millisecond):
	}
	stored, ok, err := rs[1].stores.Breakers.SharedSettings(context.Background(), caba)
	if err != nil || !ok || !stored.Equal(s) {
		t.Errorf("SharedSettings = %+v, %v, %v; want %+v", stored, ok, err, s)
	}
	other := breaker.ID{Key: "cordoba", Operation: aggregator.ByDomain}
	if _, ok, err := rs[1].stores.Breakers.SharedSettings(context.Background(), other); ok || err != nil {
		t.Errorf("SharedSettings of a breaker never shared = %v, %v; want none", ok, err)
	}
}

// waitListening waits until each of rs hears the others' changes
// (Stores.Listening): its subscription confirmed and its views read again
// since. Until then a replica's decisions ask Redis.
func waitListening(t *testing.T, rs ...*replica) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range rs {
		for !r.stores.Listening() {
			if time.Now().After(deadline) {
				t.Fatal("a replica never listened to its invalidation channel")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// serverClient is a client of srv as the stores want it (ClientOptions),
// closed when the test ends.
func serverClient(t *testing.T, srv *redistest.Server, timeout time.Duration) *redis.Client {
	t.Helper()
	o, err := redisstore.ClientOptions(srv.URL(), timeout)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// freePort returns a TCP port nothing listens on (see redistest.FreePorts).
func freePort(t *testing.T) int { return redistest.FreePorts(t, 1, 0)[0] }

// A probe in flight is remembered by the other replicas, and forgotten at
// once when its neutral verdict frees the slot.
func TestFleetNeutralProbeFreesTheSlot(t *testing.T) {
	t.Parallel()
	clock := breakertest.NewClock()
	rs := fleet(t, 2, clock.Now, breakertest.Settings(), redisstore.Options{})
	portalCalls(t, []*breaker.Set{rs[0].set, rs[1].set})
	clock.Advance(31 * time.Second)
	probe, err := rs[0].set.Allow(context.Background(), caba)
	if err != nil {
		t.Fatalf("probe refused: %v", err)
	}
	if call(t, rs[1].set, succeed) {
		t.Fatal("a second probe went")
	}
	before := rs[1].commands.n.Load()
	if call(t, rs[1].set, succeed) {
		t.Fatal("a second probe went")
	}
	if n := rs[1].commands.n.Load() - before; n != 0 {
		t.Errorf("%d Redis commands for a call refused while a probe is known in flight, want 0", n)
	}
	probe.Done(context.Background(), breaker.Report{Outcome: aggregator.RateLimited, Status: 429})
	deadline := time.Now().Add(time.Second)
	for !call(t, rs[1].set, succeed) {
		if time.Now().After(deadline) {
			t.Fatal("the other replica still refuses a second after the probe slot was freed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := state(t, rs[0].set); got != breaker.Closed {
		t.Errorf("state = %s, want closed", got)
	}
}
