package watch

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/async"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/client"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/internal/fakeclock"
	"github.com/multas/aggregator/internal/redistest"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/mapping"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// t0 is when the tests' clocks start.
var t0 = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

// fakeClock is an async.Clock that moves only when the test says so.
type fakeClock = fakeclock.Clock

func newFakeClock() *fakeClock { return fakeclock.New(t0) }

// acta is one infraction a test portal holds.
type acta struct {
	Nro    string `json:"nro"`
	Fecha  string `json:"fecha,omitempty"`
	Monto  string `json:"monto,omitempty"`
	Moneda string `json:"moneda,omitempty"`
	Estado string `json:"estado"`
}

// portal is a fake jurisdiction portal: the actas of each plate, which the
// test changes, or a status while down; a request may be held until the
// test lets it go.
type portal struct {
	id    string
	srv   *httptest.Server
	clock *fakeClock

	mu    sync.Mutex
	actas map[string][]acta
	down  int
	hits  map[string]int
	at    []time.Time // arrivals, by the fake clock
	hold  chan struct{}
	held  chan struct{} // told when a request is held
}

func newPortal(t *testing.T, id string, clock *fakeClock) *portal {
	p := &portal{id: id, clock: clock, actas: map[string][]acta{}, hits: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		plate := r.URL.Query().Get("dominio")
		p.mu.Lock()
		p.hits[plate]++
		if p.clock != nil {
			p.at = append(p.at, p.clock.Now())
		}
		hold, held, down := p.hold, p.held, p.down
		p.hold = nil
		list := slices.Clone(p.actas[plate])
		p.mu.Unlock()
		if hold != nil {
			held <- struct{}{}
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
		if down != 0 {
			w.WriteHeader(down)
			return
		}
		if list == nil {
			list = []acta{}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"resultado": map[string]any{"actas": list}})
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *portal) set(plate string, actas ...acta) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.actas[plate] = actas
}

func (p *portal) setDown(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = status
}

func (p *portal) hitsOf(plate string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[plate]
}

func (p *portal) arrivals() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.at)
}

// holdNext makes the next request wait until the returned func is called;
// held is told when it arrives.
func (p *portal) holdNext() (held <-chan struct{}, release func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	hold, h := make(chan struct{}), make(chan struct{}, 1)
	p.hold, p.held = hold, h
	var once sync.Once
	return h, func() { once.Do(func() { close(hold) }) }
}

// source is the configuration-driven adapter of p.
func (p *portal) source(t *testing.T) *sources.Source {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	src, err := sources.New(sources.Spec{
		ID: p.id, Jurisdiction: "Jurisdicción " + p.id, BaseURL: p.srv.URL,
		Operations: map[aggregator.Operation]sources.OperationSpec{aggregator.ByDomain: {Method: http.MethodGet, Path: "/actas?dominio={domain}"}},
		Response: mapping.Response{Decimal: ".", Items: mapping.Items{{Select: "/resultado/actas"}},
			Fields: map[string]mapping.Field{"id": {Select: mapping.List{"/nro"}}, "date": {Select: mapping.List{"/fecha"}},
				"amount": {Select: mapping.List{"/monto"}}, "currency": {Select: mapping.List{"/moneda"}},
				"status": {Select: mapping.List{"/estado"}}},
			StatusMap: map[string]string{"IMPAGA": "unpaid", "PAGADA": "paid"}},
		Location: time.FixedZone("ART", -3*3600), Currency: "ARS",
	}, &http.Client{Transport: tr}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return src
}

// hook is one delivery a receiver got.
type hook struct {
	header http.Header
	body   []byte
	event  Event
	// verified names the secrets (of secrets) the delivery verifies with.
	verified []string
}

// receiver is a webhook receiver that checks every delivery's signature
// with the client package's verifier, under each known secret.
type receiver struct {
	srv     *httptest.Server
	secrets map[string]string

	mu  sync.Mutex
	got []hook
}

func newReceiver(t *testing.T, secrets map[string]string) *receiver {
	r := &receiver{secrets: secrets}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		h := hook{header: req.Header.Clone(), body: body}
		for name, s := range r.secrets {
			// The fake clocks run in 2026; the tolerance admits them.
			if client.VerifyWebhook(s, req.Header, body, 1<<62, time.Now()) == nil {
				h.verified = append(h.verified, name)
			}
		}
		slices.Sort(h.verified)
		_ = json.Unmarshal(body, &h.event)
		r.mu.Lock()
		r.got = append(r.got, h)
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) hooks() []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// messages are the distinct webhook-ids received.
func (r *receiver) messages() []string {
	var ids []string
	for _, h := range r.hooks() {
		if id := h.header.Get(client.HeaderWebhookID); !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// eventually polls cond (real time) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// secret is a Standard Webhooks secret made of s.
func secret(s string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(s)) }

// The secrets of the tests' API keys.
var (
	defaultSecret = secret("the default signing key, 32 byte")
	fleetSecret   = secret("the fleet's own signing key, 32b")
	rentalSecret  = secret("the rental's own signing key, 32")
)

// testKeys are memory keys made of a fixed test key.
func testKeys(t testing.TB) *memory.Keys {
	k, err := memory.NewKeys([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// testRedis connects to the test Redis with a key prefix of the test's
// own, deleted at the end.
func testRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	c, _ := redistest.Connect(t)
	return c, redistest.Prefix(t, c, "aggtest:watch:")
}

// replicaOpts shape one replica of a fleet.
type replicaOpts struct {
	watches    Store
	deliveries async.Store
	// limiter and budgets limit the portals (nil: none).
	limiter, budgets *ratelimit.Limiter
	jitter           func(time.Duration) time.Duration
	// now is the clock of the engine and breakers: the fake clock's when
	// nil.
	now     func() time.Time
	workers int
	send    func(context.Context, async.Delivery) error // wraps the deliveries' Send
	// budget bounds a run of a check's sources (1s when zero).
	budget time.Duration
	// clock schedules the manager and the deliveries: the fleet's fake
	// clock when nil.
	clock async.Clock
	// maxPerKey is watches.max_per_key (5000 when zero).
	maxPerKey int
	// quiet discards the log lines (the test's log keeps them all).
	quiet bool
}

// replica is one aggregator replica's watch machinery: a fan-out over the
// portals with breakers, the async deliveries, and the watch manager.
type replica struct {
	m      *Manager
	async  *async.Manager
	eng    *fanout.Engine
	set    *breaker.Set
	counts *counts
}

// fleet is the portals, receiver and clock the replicas of a test share.
type fleet struct {
	t       *testing.T
	clock   *fakeClock
	portals []*portal
	recv    *receiver
	keys    *memory.Keys
}

func newFleet(t *testing.T, portals ...string) *fleet {
	f := &fleet{t: t, clock: newFakeClock(), keys: testKeys(t)}
	for _, id := range portals {
		f.portals = append(f.portals, newPortal(t, id, f.clock))
	}
	f.recv = newReceiver(t, map[string]string{"default": defaultSecret, "fleet": fleetSecret, "rental": rentalSecret})
	return f
}

// replica starts one replica; it stops when the test ends (or before, by
// closing its manager).
func (f *fleet) replica(o replicaOpts) *replica {
	t := f.t
	now := o.now
	if now == nil {
		now = f.clock.Now
	}
	r := &replica{counts: &counts{}}
	set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{Now: now, OnTransition: func(e breaker.Event) {
		if r.m != nil {
			r.m.OnTransition(e)
		}
	}})
	var members []fanout.Member
	for _, p := range f.portals {
		set.Add(breaker.ID{Key: p.id, Operation: aggregator.ByDomain}, p.id, breaker.Settings{
			Window: time.Minute, MinCalls: 100, FailureRatio: 0.5, ConsecutiveFailures: 3, OpenFor: 10 * time.Minute,
			FailureStatuses: []int{500, 502, 503, 504}, ProbeLease: 5 * time.Second,
		})
		members = append(members, fanout.Member{Source: p.source(t), BreakerKey: p.id, Timeout: 2 * time.Second})
	}
	r.set = set
	r.eng = fanout.New(members, fanout.Options{Breakers: set, Limiter: o.limiter, Now: now,
		Problems: problem.Catalog{Base: "https://errors.test/problems/"}})
	t.Cleanup(r.eng.Close)
	if o.deliveries == nil {
		o.deliveries = async.NewMemoryStore()
	}
	var clock async.Clock = f.clock
	if o.clock != nil {
		clock = o.clock
	}
	if o.budget == 0 {
		o.budget = time.Second
	}
	if o.maxPerKey == 0 {
		o.maxPerKey = 5000
	}
	am, err := async.New(async.Options{Engine: r.eng, Breakers: set, Store: o.deliveries, Clock: clock, Keys: f.keys,
		AllowPrivate: true, Secret: defaultSecret, Secrets: map[string]string{"fleet": fleetSecret, "rental": rentalSecret},
		Backoff: time.Second, MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	am.Start()
	t.Cleanup(func() { _ = am.Close() })
	r.async = am
	var deliveries Deliveries = am
	if o.send != nil {
		deliveries = sendHook{am, o.send}
	}
	if o.jitter == nil {
		o.jitter = func(time.Duration) time.Duration { return 0 }
	}
	logger := slog.New(slog.NewTextHandler(testLog{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if o.quiet {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := New(Options{Engine: r.eng, Breakers: set, Limiter: o.limiter, Budgets: o.budgets,
		Deliveries: deliveries, Keys: f.keys, Store: o.watches, Clock: clock, Observer: r.counts,
		Budget: o.budget, MaxWait: time.Hour, MinInterval: time.Hour, DefaultInterval: 6 * time.Hour,
		MaxPerKey: o.maxPerKey, Workers: o.workers, Jitter: o.jitter, Lease: 20 * time.Second,
		Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(func() { _ = m.Close() })
	r.m = m
	return r
}

// testLog writes log lines to the test's log.
type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Logf("%s", bytes.TrimSpace(p))
	return len(p), nil
}

// sendHook is the async deliveries with Send wrapped: a replica that dies
// between deciding on a delivery and handing it over.
type sendHook struct {
	*async.Manager
	send func(context.Context, async.Delivery) error
}

func (s sendHook) Send(ctx context.Context, d async.Delivery) error { return s.send(ctx, d) }

// counts is an Observer that counts.
type counts struct {
	mu       sync.Mutex
	outcomes map[string]int
	changes  int
	lags     []time.Duration
	watches  int
}

func (c *counts) WatchChecked(outcome string, changes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.outcomes == nil {
		c.outcomes = map[string]int{}
	}
	c.outcomes[outcome]++
	c.changes += changes
}

func (c *counts) WatchLag(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lags = append(c.lags, d)
}

func (c *counts) WatchCount(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watches = n
}

func (c *counts) outcome(o string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.outcomes[o]
}

func (c *counts) checks() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checksLocked()
}

func (c *counts) checksLocked() int {
	n := 0
	for _, v := range c.outcomes {
		n += v
	}
	return n
}

// stores are the two kinds of store every behaviour is proven on: the
// watches' and the deliveries'.
var stores = map[string]func(t *testing.T) (Store, async.Store){
	"memory": func(*testing.T) (Store, async.Store) { return NewMemoryStore(), async.NewMemoryStore() },
	"redis": func(t *testing.T) (Store, async.Store) {
		c, prefix := testRedis(t)
		return NewRedisStore(c, prefix+"watches:"), async.NewRedisStore(c, prefix+"async:")
	},
}
