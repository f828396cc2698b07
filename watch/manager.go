package watch

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/async"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/internal/loop"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/ratelimit"
)

// Deliveries sends the messages of watches; *async.Manager is one.
type Deliveries interface {
	// Send schedules d (signed, retried, dead-lettered); the same d.ID
	// sent twice is one delivery.
	Send(ctx context.Context, d async.Delivery) error
	// CancelWatch drops the deliveries of watch id that have not gone.
	CancelWatch(ctx context.Context, id string) error
}

var _ Deliveries = (*async.Manager)(nil)

// Observer hears of the checks, for metrics. Its methods must be safe for
// concurrent use.
type Observer interface {
	// WatchChecked hears of a check that ended, its outcome (Outcomes)
	// and how many changes it delivered (a baseline's infractions are no
	// changes).
	WatchChecked(outcome string, changes int)
	// WatchLag hears of a check that started, how late.
	WatchLag(d time.Duration)
	// WatchCount hears of the number of watches of the fleet.
	WatchCount(n int)
}

// Options configure a Manager. Zero values are the documented defaults.
type Options struct {
	Engine   *fanout.Engine
	Breakers *breaker.Set
	// Limiter, when set, is asked whether a portal is paused before a
	// source is called: a paused source is waited for.
	Limiter *ratelimit.Limiter
	// Budgets, when set, holds the watches' share of each source's rate
	// budget under BudgetKey(source) (see Share): a check calls a source
	// only when that share has a token, on top of the source's own budget.
	Budgets *ratelimit.Limiter
	// Deliveries sends the changes; required.
	Deliveries Deliveries
	// Keys seal what a watch keeps (the memory's, SPEC 14); required.
	Keys *memory.Keys
	// Store keeps the watches; a MemoryStore when nil.
	Store  Store
	Logger *slog.Logger
	// Clock schedules the checks; the wall clock when nil.
	Clock async.Clock
	// Observer hears of checks and counts; no one when nil.
	Observer Observer

	// Budget bounds each run of a check's sources (query.deadline; 3s).
	Budget time.Duration
	// MaxWait is async.max_wait: a check retains its failed sources for
	// min(MaxWait, interval) (1h).
	MaxWait time.Duration
	// MinInterval and DefaultInterval are watches.min_interval and
	// watches.default_interval (6h, 24h).
	MinInterval, DefaultInterval time.Duration
	// MaxPerKey is watches.max_per_key (10000).
	MaxPerKey int
	// Lease is how long a claimed watch stays hidden from other replicas:
	// the check of a replica that died is taken over after it, within
	// SPEC 15's 30 s with Poll. It should outlast one run of a check's
	// sources: 20s, or 2·Budget+1s when that is longer, at most 29s (a
	// turn that outlasts its lease is fenced off, not duplicated).
	Lease time.Duration
	// Poll is the longest the scheduler sleeps (1s): work made due by
	// another replica, or a breaker recovered elsewhere, is noticed within
	// it.
	Poll time.Duration
	// Workers bounds the checks worked on at once by this replica (4):
	// checks are background work.
	Workers int
	// Jitter picks the first check of a watch in its first interval d: a
	// point in [0, d); uniformly at random when nil.
	Jitter func(d time.Duration) time.Duration
}

func (o *Options) defaults() {
	if o.Store == nil {
		o.Store = NewMemoryStore()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = async.WallClock()
	}
	if o.Budget <= 0 {
		o.Budget = 3 * time.Second
	}
	if o.MaxWait <= 0 {
		o.MaxWait = time.Hour
	}
	if o.MinInterval <= 0 {
		o.MinInterval = 6 * time.Hour
	}
	if o.DefaultInterval <= 0 {
		o.DefaultInterval = max(24*time.Hour, o.MinInterval)
	}
	if o.MaxPerKey < 1 {
		o.MaxPerKey = 10000
	}
	if o.Lease <= 0 {
		o.Lease = min(max(20*time.Second, 2*o.Budget+time.Second), 29*time.Second)
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.Jitter == nil {
		o.Jitter = uniform
	}
}

// uniform is a point of [0, d), uniformly at random.
func uniform(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return rand.N(d)
}

// BudgetKey is the key of the watches' share of source's rate budget in
// Options.Budgets.
func BudgetKey(source string) string { return "watches/" + source }

// Share is the part of a source's rate budget s that watch checks may
// use: share of its rate, and of its burst (at least one call); a source
// without a budget gives none (its checks are paced by their spreading
// alone). The share never waits for a token: a check whose source has
// none now tries again later.
func Share(s ratelimit.Settings, share float64) ratelimit.Settings {
	if !(s.RPS > 0) || math.IsInf(s.RPS, 1) {
		return ratelimit.Settings{}
	}
	burst := s.Burst
	if burst <= 0 {
		burst = int(math.Ceil(s.RPS))
	}
	return ratelimit.Settings{RPS: s.RPS * share, Burst: max(1, int(float64(burst)*share)), MaxPause: s.MaxPause}
}

// Manager keeps the watches and runs their checks. Start runs the
// scheduler; Close stops it.
type Manager struct {
	opts  Options
	store Store
	clock async.Clock

	loop *loop.Loop
	// ctx is the loop's: the checks run under it, and end with Close.
	ctx   context.Context
	sem   chan struct{}
	start sync.Once

	mu        sync.Mutex
	recovered map[breaker.ID]time.Time
	inflight  map[string]bool
	// again holds the claim of a watch claimed anew while it was worked on
	// here (its turn outlasted its lease): its token fences the turn in
	// flight, and it is worked on once that turn ends.
	again map[string]*Claim
	// storeErrors keeps store errors to a log line in storeErrorEvery.
	storeErrors *loop.Throttle

	counted time.Time // the scheduler's own: when it last counted the watches
}

// New returns a Manager; it checks nothing until Start.
func New(opts Options) (*Manager, error) {
	if opts.Engine == nil || opts.Breakers == nil || opts.Deliveries == nil || opts.Keys == nil {
		return nil, errors.New("watch: Options.Engine, Breakers, Deliveries and Keys are required")
	}
	opts.defaults()
	m := &Manager{
		opts: opts, store: opts.Store, clock: opts.Clock, loop: loop.New(), sem: make(chan struct{}, opts.Workers),
		recovered: make(map[breaker.ID]time.Time), inflight: make(map[string]bool), again: make(map[string]*Claim),
		storeErrors: loop.NewThrottle(storeErrorEvery),
	}
	m.ctx = m.loop.Context()
	return m, nil
}

// Start runs the scheduler until Close.
func (m *Manager) Start() {
	m.start.Do(func() {
		if _, ok := m.store.(*MemoryStore); ok {
			m.opts.Logger.Warn("watches are kept in memory: they do not survive a restart (set store.redis_url to share and keep them)")
		}
		m.loop.Start(m.clock, m.scan)
	})
}

// Close stops the scheduler and every check, and waits for them. A check
// in flight is left to its lease: another replica, or this store's next
// user, takes it over.
func (m *Manager) Close() error {
	m.loop.Stop()
	return nil
}

// MinInterval is the shortest interval a watch may ask for.
func (m *Manager) MinInterval() time.Duration { return m.opts.MinInterval }

// DefaultInterval is the interval of a watch that asks for none.
func (m *Manager) DefaultInterval() time.Duration { return m.opts.DefaultInterval }

// OnTransition hears of every breaker transition: a source retained by a
// check is called again soon after its breaker closes.
func (m *Manager) OnTransition(e breaker.Event) {
	if e.To != breaker.Closed {
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

func (m *Manager) poke() { m.loop.Poke() }

// scan is the scheduler's turn (the loop sleeps until the next due time,
// a poke, or Poll): it claims due watches for the free workers and
// returns how long to wait.
func (m *Manager) scan() time.Duration {
	ctx := m.ctx
	now := m.clock.Now()
	if free := cap(m.sem) - len(m.sem); free > 0 {
		claims, err := m.store.Claim(ctx, now, m.opts.Lease, free)
		m.storeError("claiming watches", err)
		for _, c := range claims {
			m.spawn(c)
		}
	}
	if now.Sub(m.counted) >= 10*m.opts.Poll {
		m.counted = now
		m.count(ctx)
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

// count reports the fleet's number of watches.
func (m *Manager) count(ctx context.Context) {
	if m.opts.Observer == nil {
		return
	}
	n, err := m.store.Count(ctx)
	if err == nil {
		m.opts.Observer.WatchCount(n)
	}
}

// spawn works on claim c; when its watch is already worked on here, once
// that turn ends (whose writes c's token now refuses).
func (m *Manager) spawn(c *Claim) {
	id := c.Watch.ID
	m.mu.Lock()
	busy := m.inflight[id]
	if busy {
		m.again[id] = c
	} else {
		m.inflight[id] = true
	}
	m.mu.Unlock()
	if busy {
		return
	}
	m.sem <- struct{}{}
	m.loop.Go(func() {
		defer func() {
			<-m.sem
			m.poke()
		}()
		for c != nil && m.ctx.Err() == nil {
			m.work(c)
			m.mu.Lock()
			c = m.again[id]
			delete(m.again, id)
			if c == nil {
				delete(m.inflight, id)
			}
			m.mu.Unlock()
		}
		m.mu.Lock()
		delete(m.inflight, id)
		delete(m.again, id)
		m.mu.Unlock()
	})
}

// storeError logs a store error, at most once in storeErrorEvery.
func (m *Manager) storeError(what string, err error) {
	if err == nil || errors.Is(err, context.Canceled) {
		return
	}
	if m.storeErrors.Allow() {
		m.opts.Logger.Warn("watch store error: checks wait until the store answers", "op", what, "err", err.Error())
	}
}

const storeErrorEvery = 30 * time.Second

// selection is the members a watch's check asks for q: those it names
// that are still configured and answer q, or, when it names none, every
// member that answers q (sources configured since included).
func (m *Manager) selection(w *Watch, q aggregator.Query) []fanout.Member {
	if len(w.Sources) == 0 {
		set, _ := m.opts.Engine.Select(q, nil)
		return set
	}
	op := q.Operation()
	var out []fanout.Member
	for _, id := range w.Sources {
		if mem, ok := m.opts.Engine.Member(id); ok && mem.Source.Supports(op, q.IDKind) {
			out = append(out, mem)
		}
	}
	return out
}
