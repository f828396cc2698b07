package async

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/internal/loop"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/tracing"
)

// Options configure a Manager. Zero values are the documented defaults.
type Options struct {
	Engine   *fanout.Engine
	Breakers *breaker.Set
	// Limiter, when set, is asked whether a portal is paused before a
	// retained call is released.
	Limiter *ratelimit.Limiter
	// Store keeps the work; a MemoryStore when nil.
	Store  Store
	Logger *slog.Logger
	// Clock schedules the work; the wall clock when nil.
	Clock Clock

	// Budget bounds each run of a query's sources (query.deadline; 3 s).
	Budget time.Duration
	// MaxWait is async.max_wait: a query's default and largest max_wait
	// (1 h).
	MaxWait time.Duration
	// ReleaseRPS is async.release_rps: the pace of released work per
	// portal and per callback origin (5).
	ReleaseRPS float64

	// Secret is webhooks.signing_secret, "whsec_<base64 key>"; empty
	// sends deliveries unsigned.
	Secret string
	// Keys, when set, seal the payloads of the deliveries handed to Send
	// (the memory's keys, SPEC 14): what a watch reports is never stored
	// in clear, pending or dead-lettered.
	Keys *memory.Keys
	// Secrets are the webhook secrets of API keys, by key name
	// (server.api_keys[].webhook_secret): a delivery whose Signer is one of
	// them is signed with it, any other with Secret. An empty value is
	// Secret.
	Secrets map[string]string
	// Timeout is webhooks.timeout: a delivery succeeds with a 2xx within
	// it (10 s).
	Timeout time.Duration
	// MaxAttempts is webhooks.max_attempts (5).
	MaxAttempts int
	// Backoff is webhooks.backoff: the delay after the n-th failed
	// attempt is min(Backoff · 2^(n-1), 60 s) (1 s).
	Backoff time.Duration
	// AllowPrivate lets callbacks target private, loopback and link-local
	// addresses (webhooks.allow_private).
	AllowPrivate bool
	// BreakerFailures and BreakerOpenFor are webhooks.breaker (5, 10 s).
	BreakerFailures int
	BreakerOpenFor  time.Duration

	// Resolver resolves callback hosts when a query is accepted;
	// net.DefaultResolver when nil.
	Resolver Resolver
	// Transport carries deliveries; when nil, one whose dialer refuses
	// private addresses unless AllowPrivate (it does not follow proxies
	// from the environment, which would bypass that check).
	Transport http.RoundTripper
	// TracerProvider and Propagator make each delivery attempt a client
	// span whose traceparent reaches the receiver (SPEC 10); no spans when
	// nil.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator

	// Poll is the longest pending work waits before it is looked at again
	// (1 s): breakers recovered on another replica, or without an event
	// seen here, are noticed within it.
	Poll time.Duration
	// Lease is how long claimed work stays hidden from other replicas:
	// after it, work claimed by a replica that died is taken over. It must
	// outlast the work on one item: by default twice the longer of Timeout
	// and Budget, plus a second.
	Lease time.Duration
	// Keep is how long a finished query can still be read (24 h).
	Keep time.Duration
	// Workers bounds the queries and deliveries worked on at once (32).
	Workers int

	// OnDelivery hears of every delivery outcome: OutcomeDelivered,
	// OutcomeFailed, OutcomeRetained or OutcomeDeadLettered.
	OnDelivery func(outcome string)
	// OnDLQ hears of the number of DLQ entries whenever it may change.
	OnDLQ func(entries int)
}

func (o *Options) defaults() {
	if o.Store == nil {
		o.Store = NewMemoryStore()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = loop.Wall()
	}
	if o.Budget <= 0 {
		o.Budget = 3 * time.Second
	}
	if o.MaxWait <= 0 {
		o.MaxWait = time.Hour
	}
	if o.ReleaseRPS <= 0 {
		o.ReleaseRPS = 5
	}
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.MaxAttempts < 1 {
		o.MaxAttempts = 5
	}
	if o.Backoff < 0 {
		o.Backoff = 0
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Lease <= 0 {
		o.Lease = 2*max(o.Timeout, o.Budget) + time.Second
	}
	if o.Keep <= 0 {
		o.Keep = 24 * time.Hour
	}
	if o.Workers <= 0 {
		o.Workers = 32
	}
}

// Manager accepts asynchronous queries, retains what they could not get
// yet, and delivers them. Start runs it; Close stops every goroutine.
type Manager struct {
	opts    Options
	store   Store
	clock   Clock
	guard   guard
	key     []byte
	keys    map[string][]byte // by API key name (Options.Secrets)
	client  *http.Client
	ownedTr *http.Transport
	origins *originBreakers
	pace    pace

	loop *loop.Loop
	// ctx is the loop's: the work runs under it, and ends with Close.
	ctx   context.Context
	flip  bool // which kind of work the scheduler claims first
	sem   chan struct{}
	start sync.Once
	stop  sync.Once

	mu        sync.Mutex
	recovered map[breaker.ID]time.Time
	inflight  map[string]bool
	// storeErrors and paceErrors keep store and pace errors to a log line
	// in storeErrorEvery.
	storeErrors, paceErrors *loop.Throttle

	dlqSeen time.Time // the scheduler's own: when it last read the DLQ size
}

// New returns a Manager; it does no work until Start.
func New(opts Options) (*Manager, error) {
	if opts.Engine == nil || opts.Breakers == nil {
		return nil, errors.New("async: Options.Engine and Options.Breakers are required")
	}
	opts.defaults()
	key, err := ParseSecret(opts.Secret)
	if err != nil {
		return nil, err
	}
	keys := make(map[string][]byte, len(opts.Secrets))
	for name, secret := range opts.Secrets {
		if secret == "" {
			continue
		}
		k, err := ParseSecret(secret)
		if err != nil {
			return nil, fmt.Errorf("the webhook secret of API key %q: %w", name, err)
		}
		keys[name] = k
	}
	g := guard{resolver: opts.Resolver, allowPrivate: opts.AllowPrivate}
	m := &Manager{
		opts: opts, store: opts.Store, clock: opts.Clock, guard: g, key: key, keys: keys,
		origins: newOriginBreakers(opts.BreakerFailures, opts.BreakerOpenFor, opts.Timeout+time.Second),
		loop:    loop.New(),
		sem:     make(chan struct{}, opts.Workers),

		storeErrors: loop.NewThrottle(storeErrorEvery), paceErrors: loop.NewThrottle(storeErrorEvery),

		recovered: make(map[breaker.ID]time.Time),
		inflight:  make(map[string]bool),
	}
	m.origins.recheck = opts.Poll
	m.pace = newPacer(opts.ReleaseRPS)
	if rs, ok := opts.Store.(*RedisStore); ok {
		// The work is shared by the fleet, and so is its release pace.
		rp := newRedisPace(rs.c, rs.prefix, opts.ReleaseRPS)
		rp.onError = m.paceError
		rp.bad = rs.bad
		m.pace = rp
	}
	tr := opts.Transport
	if tr == nil {
		m.ownedTr = &http.Transport{
			DialContext:           g.dialer().DialContext,
			MaxIdleConns:          64,
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
			ResponseHeaderTimeout: opts.Timeout,
			ForceAttemptHTTP2:     true,
		}
		tr = m.ownedTr
	}
	m.client = &http.Client{
		Transport: tracing.Transport(tr, opts.TracerProvider, opts.Propagator),
		// A redirect is not a delivery, and following one could lead the
		// delivery anywhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	m.ctx = m.loop.Context()
	return m, nil
}

// Start runs the manager's scheduler until Close.
func (m *Manager) Start() {
	m.start.Do(func() {
		if _, ok := m.store.(*MemoryStore); ok {
			m.opts.Logger.Warn("asynchronous queries are kept in memory: accepted queries and pending webhook deliveries do not survive a restart (set store.redis_url to make them durable)")
		}
		m.loop.Start(m.clock, m.scan)
	})
}

// Close stops the scheduler and every worker, and waits for them. Work in
// flight is left to be taken up again (by this store's next user), never
// lost.
func (m *Manager) Close() error {
	m.stop.Do(func() {
		m.loop.Stop()
		if m.ownedTr != nil {
			m.ownedTr.CloseIdleConnections()
		}
	})
	return nil
}

// MaxWait is the largest max_wait a query may ask for.
func (m *Manager) MaxWait() time.Duration { return m.opts.MaxWait }

// CheckCallback validates a callback URL (SPEC 3.4): the reason it is
// refused, or "" when it is acceptable.
func (m *Manager) CheckCallback(ctx context.Context, raw string) string {
	return m.guard.check(ctx, raw)
}

// OnTransition hears of every breaker transition: a breaker that closes
// again releases the calls retained for it at once, whatever backoff they
// were waiting out. (A breaker turning half-open needs no event: calls
// skipped because it was open wait exactly until then, and the first is
// its probe.)
func (m *Manager) OnTransition(e breaker.Event) {
	switch e.To {
	case breaker.Open, breaker.ForcedOpen:
		// The slots reserved for its sources are moot until it recovers.
		for _, mem := range m.opts.Engine.Members() {
			if mem.BreakerKey == e.BreakerKey {
				m.pace.reset("source\x00" + mem.Source.ID())
			}
		}
		return
	case breaker.Closed:
	default:
		return
	}
	m.mu.Lock()
	m.recovered[breaker.ID{Key: e.BreakerKey, Operation: e.Operation}] = m.clock.Now()
	m.mu.Unlock()
	m.poke()
}

// recoveredSince reports whether breaker id let calls through again after t.
func (m *Manager) recoveredSince(id breaker.ID, t time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.recovered[id]
	return ok && at.After(t)
}

// poke wakes the scheduler.
func (m *Manager) poke() { m.loop.Poke() }

// Request is a validated asynchronous query.
type Request struct {
	Query aggregator.Query
	// Sources are the members that answer it (fanout.Engine.Select).
	Sources     []fanout.Member
	CallbackURL string
	// MaxWait is the query's max_wait; 0 means Options.MaxWait.
	MaxWait time.Duration
	// Directives are the request's Cache-Control (SPEC 14): the first run
	// follows them; the sources retained after it never read memory.
	Directives memory.Directives
	// Signer is the name of the API key that sent the query: its webhook
	// secret signs the delivery (Options.Secrets).
	Signer string
}

// Submit accepts a query, runs it at once, and returns it as it stands:
// completed already, or pending with the result so far.
func (m *Manager) Submit(ctx context.Context, r Request) (View, error) {
	ctx = context.WithoutCancel(ctx)
	now := m.clock.Now()
	wait := r.MaxWait
	if wait <= 0 || wait > m.opts.MaxWait {
		wait = m.opts.MaxWait
	}
	q := &Query{
		ID: newID("q_"), Status: Pending, Domain: r.Query.Domain, PersonID: r.Query.ID, IDKind: r.Query.IDKind,
		CallbackURL: r.CallbackURL, CreatedAt: now, ExpiresAt: now.Add(wait),
		// The request's span, which the work done later links to.
		Trace:  traceContextOf(ctx),
		Signer: r.Signer,
	}
	op := r.Query.Operation()
	for _, mem := range r.Sources {
		q.Parts = append(q.Parts, Part{Entry: aggregator.SourceResult{
			Source: mem.Source.ID(), Jurisdiction: mem.Source.Jurisdiction(), Operation: op, Status: aggregator.EntrySkipped,
		}})
	}
	// Leased to this call while it runs the sources: a replica that dies
	// meanwhile leaves the query to another.
	if err := m.store.CreateQuery(ctx, q, now.Add(m.opts.Lease)); err != nil {
		return View{}, err
	}
	m.mark(q.ID, true)
	defer m.mark(q.ID, false)
	res := m.opts.Engine.Answer(ctx, r.Query, r.Sources, m.opts.Budget, r.Directives)
	idx := make([]int, len(q.Parts))
	for i := range idx {
		idx[i] = i
	}
	m.apply(ctx, q, idx, res, now, false)
	if err := m.settle(ctx, q, m.clock.Now()); err != nil {
		return View{}, err
	}
	return q.View(), nil
}

// Get returns query id as the API shows it.
func (m *Manager) Get(ctx context.Context, id string) (View, error) {
	if !validID(id, "q_") {
		return View{}, ErrNotFound
	}
	q, err := m.store.Query(ctx, id)
	if err != nil {
		return View{}, err
	}
	return q.View(), nil
}

// DLQ lists the dead letter queue, sealed payloads opened for the
// operators. An entry whose payload no key opens (sealed under a memory
// key no longer configured) is left out, with a log line naming it: DELETE
// it by its id.
func (m *Manager) DLQ(ctx context.Context) ([]DLQEntry, error) {
	entries, err := m.store.DLQ(ctx)
	if err == nil && m.opts.OnDLQ != nil {
		m.opts.OnDLQ(len(entries))
	}
	out := entries[:0]
	for _, e := range entries {
		if e.Sealed != nil {
			p, err := m.open(e.MessageID, e.Sealed)
			if err != nil {
				m.opts.Logger.Warn("dead letter's payload cannot be opened (sealed under a memory key no longer configured): not listed", "dlq_id", e.ID)
				continue
			}
			e.Payload = p
		}
		out = append(out, e)
	}
	return out, err
}

// sealedAD is the associated data of a sealed payload: its webhook-id,
// which a redelivery keeps.
func sealedAD(msgID string) []byte { return []byte("aggregator/async/v1/payload/" + msgID) }

// open opens a payload Send sealed.
func (m *Manager) open(msgID string, sealed []byte) (json.RawMessage, error) {
	if m.opts.Keys == nil {
		return nil, errors.New("no memory key to open the sealed payload")
	}
	p, err := m.opts.Keys.Open(sealedAD(msgID), sealed)
	if err != nil {
		return nil, errors.New("the sealed payload cannot be opened (a memory key no longer configured?)")
	}
	return p, nil
}

// Redeliver takes DLQ entry id out of the queue as a fresh delivery of the
// same message (same webhook-id), its attempts starting over.
func (m *Manager) Redeliver(ctx context.Context, id string) error {
	if !validID(id, "dlv_") {
		return ErrNotFound
	}
	now := m.clock.Now()
	err := m.store.Redeliver(ctx, id, func(e DLQEntry) *Delivery {
		msg := e.MessageID
		if msg == "" {
			msg = "msg_" + e.QueryID
		}
		d := &Delivery{ID: newID("dlv_"), MessageID: msg, QueryID: e.QueryID, WatchID: e.WatchID, CallbackURL: e.CallbackURL,
			Signer: e.Signer, Payload: e.Payload, Sealed: e.Sealed, CreatedAt: now, Due: now, Trace: e.Trace}
		if d.Sealed != nil {
			d.Payload = nil
		}
		return d
	})
	if err != nil {
		return err
	}
	m.opts.Logger.Info("dead letter redelivered", "dlq_id", id)
	m.reportDLQ(ctx)
	m.poke()
	return nil
}

// DeleteDLQ drops DLQ entry id.
func (m *Manager) DeleteDLQ(ctx context.Context, id string) error {
	if !validID(id, "dlv_") {
		return ErrNotFound
	}
	if err := m.store.DeleteDLQ(ctx, id); err != nil {
		return err
	}
	m.opts.Logger.Info("dead letter deleted", "dlq_id", id)
	m.reportDLQ(ctx)
	return nil
}

// ErrInvalidDelivery is Send's refusal of a delivery that is not one this
// package could have made.
var ErrInvalidDelivery = errors.New("async: invalid delivery")

// Send hands the delivery of other work (a watch's, SPEC 15) to the
// manager's deliveries: signed, retried, held by its origin's breaker and
// dead-lettered like a query's. d.ID must be derived from what the message
// is (WatchMessage): a delivery already sent under that id is not sent
// again while it is pending. d.Due is the earliest it goes (now when zero).
func (m *Manager) Send(ctx context.Context, d Delivery) error {
	now := m.clock.Now()
	if d.CreatedAt.IsZero() {
		d.CreatedAt = now
	}
	if d.Due.IsZero() {
		d.Due = now
	}
	d.Attempts, d.LastError, d.Retained, d.Slot = 0, "", false, time.Time{}
	if m.opts.Keys != nil && d.Payload != nil {
		sealed, err := m.opts.Keys.Seal(sealedAD(d.MessageID), d.Payload)
		if err != nil {
			return err
		}
		d.Payload, d.Sealed = nil, sealed
	}
	doc, err := json.Marshal(&d)
	if err != nil {
		return err
	}
	if _, ok, _ := decodeDelivery(doc, d.ID); !ok || d.WatchID == "" {
		return ErrInvalidDelivery
	}
	added, err := m.store.AddDelivery(ctx, &d)
	if err != nil {
		return err
	}
	if added {
		m.opts.Logger.Info("webhook delivery scheduled", "delivery_id", d.ID, "watch_id", d.WatchID, "webhook_id", d.MessageID)
		m.poke()
	}
	return nil
}

// CancelWatch drops the deliveries of watch id that have not gone yet,
// and its dead letters: the watch was deleted or its subject forgotten.
// An attempt already on the wire ends as it ends.
func (m *Manager) CancelWatch(ctx context.Context, id string) error {
	if !validID(id, "w_") {
		return nil
	}
	n, err := m.store.CancelWatch(ctx, id)
	if err != nil {
		return err
	}
	if n > 0 {
		m.opts.Logger.Info("webhook deliveries cancelled", "watch_id", id, "deliveries", n)
		m.reportDLQ(ctx)
	}
	return nil
}

// signingKey is the key that signs the deliveries of signer.
func (m *Manager) signingKey(signer string) []byte {
	if k, ok := m.keys[signer]; ok {
		return k
	}
	return m.key
}

func (m *Manager) reportDLQ(ctx context.Context) {
	if m.opts.OnDLQ == nil {
		return
	}
	if n, err := m.store.DLQLen(ctx); err == nil {
		m.opts.OnDLQ(n)
	}
}

func (m *Manager) delivered(outcome string) {
	if m.opts.OnDelivery != nil {
		m.opts.OnDelivery(outcome)
	}
}

// mark records that id is (or no longer is) being worked on here.
func (m *Manager) mark(id string, on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if on {
		m.inflight[id] = true
	} else {
		delete(m.inflight, id)
	}
}

func (m *Manager) busy(id string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.inflight[id]
}

// scan is the scheduler's turn (the loop sleeps until the next due time,
// a poke, or Poll): it claims due work for the free workers and returns
// how long to wait.
func (m *Manager) scan() time.Duration {
	ctx := m.ctx
	now := m.clock.Now()
	claimQueries := func() {
		if free := cap(m.sem) - len(m.sem); free > 0 {
			ids, err := m.store.ClaimQueries(ctx, now, m.opts.Lease, free)
			m.storeError("claiming queries", err)
			for _, id := range ids {
				m.spawn(id, func() { m.retain(id) })
			}
		}
	}
	claimDeliveries := func() {
		if free := cap(m.sem) - len(m.sem); free > 0 {
			ds, err := m.store.ClaimDeliveries(ctx, now, m.opts.Lease, free)
			m.storeError("claiming deliveries", err)
			for _, d := range ds {
				m.spawn(d.ID, func() { m.deliver(d) })
			}
		}
	}
	// Each kind of work goes first in turn, so neither starves the other
	// when the workers are all busy.
	m.flip = !m.flip
	if m.flip {
		claimQueries()
		claimDeliveries()
	} else {
		claimDeliveries()
		claimQueries()
	}
	if now.Sub(m.dlqSeen) >= 10*m.opts.Poll {
		m.dlqSeen = now
		m.reportDLQ(ctx)
		m.pace.prune(now)
	}
	if len(m.sem) == cap(m.sem) {
		return m.opts.Poll // a finishing worker pokes
	}
	wait := m.opts.Poll
	next, ok, err := m.store.NextDue(ctx)
	m.storeError("reading the schedule", err)
	if ok {
		wait = min(wait, max(next.Sub(m.clock.Now()), 0))
	}
	return wait
}

// spawn runs f on a worker, unless id is already being worked on here.
func (m *Manager) spawn(id string, f func()) {
	if m.busy(id) {
		return
	}
	m.mark(id, true)
	m.sem <- struct{}{}
	m.loop.Go(func() {
		defer func() {
			m.mark(id, false)
			<-m.sem
			m.poke()
		}()
		f()
	})
}

// storeError logs a store error, at most once in storeErrorEvery: an
// unreachable store fails every scan, and one line says it.
func (m *Manager) storeError(what string, err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	if m.storeErrors.Allow() {
		m.opts.Logger.Warn("async store error: work waits until the store answers", "op", what, "err", err.Error())
	}
}

// paceError logs, now and then, that the shared release pace failed: the
// work is paced by this replica alone meanwhile.
func (m *Manager) paceError(err error) {
	if m.paceErrors.Allow() {
		m.opts.Logger.Warn("async release pace: Redis error, released work paced by this replica meanwhile", "err", err.Error())
	}
}

// storeErrorEvery bounds how often store errors are logged.
const storeErrorEvery = 30 * time.Second
