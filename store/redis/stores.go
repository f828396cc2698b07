// Package redisstore shares the state that decides whether a portal is
// called (breakers, rate-limit budgets and pauses, transition events) among
// every replica, through Redis: standalone, Sentinel or Cluster (NewClient).
//
// Every change of one breaker or one budget is a Lua script of ours, run
// atomically by Redis, on the caller's clock (the time is an argument;
// Redis TIME is never read). All the keys a script touches share a hash
// tag, so the design works on Redis Cluster. A call through a closed
// breaker costs no round trip: each replica decides from its view of the
// shared state and sends its outcome counts in batches (BreakerStore).
//
// Redis failing is not the service failing: every call is bounded by a short
// timeout, and on an error the stores go on with state of their own in this
// process (breaker.MemoryStore, ratelimit.MemoryStore), starting from what
// they knew of the shared one, until Redis has answered steadily again. The
// change is reported once each way (Options.OnDegraded, the logger and a
// store event), never per call.
package redisstore

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/internal/untrusted"
	"github.com/multas/aggregator/ratelimit"
)

// Defaults of Options.
//
// DefaultTimeout is short next to a portal call, yet long enough that a
// busy replica's own scheduling delay (a burst of queries on few CPUs) is
// not taken for a slow Redis. A Redis that is really gone costs it once
// per outage: a degraded store stops calling Redis until the health check
// has seen it answer steadily for DefaultStableFor.
const (
	DefaultPrefix         = "aggregator:"
	DefaultTimeout        = 250 * time.Millisecond
	DefaultHealthInterval = 100 * time.Millisecond
	DefaultMaxHealthWait  = 5 * time.Second
	DefaultStableFor      = time.Second
)

// Options configure the stores; zero values are the documented defaults.
type Options struct {
	// Prefix starts every key and the invalidation channel (store.key_prefix);
	// DefaultPrefix when empty.
	Prefix string
	// Timeout bounds every Redis call; DefaultTimeout when zero.
	Timeout time.Duration
	// Logger hears of the changes between shared and local state.
	Logger *slog.Logger
	// OnDegraded, when set, is called once at each change: true when the
	// stores fall back to local state, false when Redis is used again.
	// Calls are serialised; it must not call back into the stores.
	OnDegraded func(degraded bool)
	// OnSettings, when set, receives the breaker settings another replica
	// shared with BreakerStore.ShareSettings, to apply to this replica's
	// breaker.Set.
	OnSettings func(breaker.ID, breaker.Settings)
	// OnListening, when set, runs (on the stores' own goroutine) each time
	// the replica listens to the fleet again after its subscription was
	// lost, and at the first subscription: the time to read what may have
	// been published unheard (the breakers' shared settings). It reports
	// whether it succeeded; it runs again at the next refresh if not.
	OnListening func(context.Context) bool
	// FlushInterval is how often a replica sends its pending outcome
	// counts (store.flush_interval); DefaultFlushInterval when zero.
	FlushInterval time.Duration
	// RefreshInterval is how often a replica reads every breaker it uses
	// again, should a change have been missed, and writes back those
	// Redis lost; DefaultRefreshInterval when zero.
	RefreshInterval time.Duration
	// HealthInterval is the first wait of a degraded store before it
	// checks whether Redis is back; the waits grow exponentially, with
	// jitter, up to MaxHealthWait. Defaults when zero.
	HealthInterval time.Duration
	MaxHealthWait  time.Duration
	// StableFor is how long Redis must answer every check before the
	// stores use shared state again (DefaultStableFor when zero): a Redis
	// that comes and goes does not make the replica flap.
	StableFor time.Duration
	// MaxPause is the longest pause any source may be given (the largest
	// rate_limit.max_pause); ratelimit.DefaultMaxPause when zero. A pause
	// read from Redis that ends further ahead is garbage.
	MaxPause time.Duration
}

// Stores are the shared stores of one replica, over one Redis client.
type Stores struct {
	// Breakers implements breaker.Store.
	Breakers *BreakerStore
	// Limits implements ratelimit.Store.
	Limits *LimitStore
	// Events implements breaker.EventLog.
	Events *EventLog
	// Memory implements memory.Store (SPEC 14).
	Memory *MemoryStore

	client  redis.UniversalClient
	opts    Options
	channel string
	replica string // tells this replica's own messages apart
	// bad logs the keys whose values could not be read (SPEC 9).
	bad *untrusted.Reporter

	degraded atomic.Bool
	mu       sync.Mutex    // serialises changes of degraded and OnDegraded
	wake     chan struct{} // tells the health check the stores degraded

	// sub is the invalidation subscription: its epoch, bumped at every
	// confirmation and every loss, times two, plus one while it is live.
	// synced is the value sub had when every view was last read again:
	// while the two are equal and the subscription is live, what other
	// replicas change reaches the views as messages (see Listening).
	sub, synced atomic.Uint64
	listen      chan struct{} // tells the subscriber Redis answers again

	stop   context.CancelFunc
	done   sync.WaitGroup
	pubsub *redis.PubSub
	closed sync.Once
}

// New returns the stores of one replica on client, with their background
// work (the invalidation subscriber and the health check) started; Close
// stops it. The client should bound calls by their context (see
// ClientOptions). New does not touch Redis: a Redis that is down at start-up
// is found by the first call, and the stores start degraded from there.
func New(client redis.UniversalClient, opts Options) *Stores {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.HealthInterval <= 0 {
		opts.HealthInterval = DefaultHealthInterval
	}
	if opts.MaxPause <= 0 {
		opts.MaxPause = ratelimit.DefaultMaxPause
	}
	if opts.MaxHealthWait <= 0 {
		opts.MaxHealthWait = DefaultMaxHealthWait
	}
	if opts.StableFor <= 0 {
		opts.StableFor = DefaultStableFor
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = DefaultFlushInterval
	}
	if opts.RefreshInterval <= 0 {
		opts.RefreshInterval = DefaultRefreshInterval
	}
	s := &Stores{client: client, opts: opts, channel: opts.Prefix + "events", replica: newReplicaID(),
		wake: make(chan struct{}, 1), listen: make(chan struct{}, 1), bad: untrusted.New(opts.Logger)}
	s.Breakers = newBreakerStore(s)
	s.Limits = newLimitStore(s)
	s.Events = newEventLog(s)
	s.Memory = newMemoryStore(s)

	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	// Without channels, Subscribe touches no network: New never waits for
	// Redis. The subscriber subscribes, and the client resubscribes after
	// every reconnection.
	s.pubsub = client.Subscribe(ctx)
	s.done.Add(3)
	go s.subscribe(ctx)
	go s.health(ctx)
	go s.Breakers.loop(ctx)
	return s
}

// ClientOptions parses a store.redis_url (redis://, rediss://, unix://) into
// client options that suit the stores: a call is bounded by its context
// (ContextTimeoutEnabled), socket reads and writes by timeout, and it is not
// retried inside the client (the local fallback is the retry).
func ClientOptions(url string, timeout time.Duration) (*redis.Options, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	o.ContextTimeoutEnabled = true
	o.ReadTimeout = timeout
	o.WriteTimeout = timeout
	o.PoolTimeout = timeout
	o.DialTimeout = max(o.DialTimeout, time.Second)
	o.MaxRetries = -1
	return o, nil
}

// Degraded reports whether the stores are on local state because Redis
// failed.
func (s *Stores) Degraded() bool { return s.degraded.Load() }

// ErrDegraded is wrapped by Ping's error while the stores run on local state.
var ErrDegraded = errors.New("redis store degraded: deciding on local state")

// Ping checks Redis now, within ctx and the store timeout, for /readyz. Its
// error wraps ErrDegraded while the stores are on local state.
func (s *Stores) Ping(ctx context.Context) error {
	err := s.check(ctx)
	if err != nil {
		s.failed(ctx, err)
	}
	switch {
	case err != nil && s.Degraded():
		return fmt.Errorf("%w: %w", ErrDegraded, err)
	case err != nil:
		return fmt.Errorf("redis store: %w", err)
	case s.Degraded():
		return fmt.Errorf("%w: Redis answers again, shared state resumes once it has for %s", ErrDegraded, s.opts.StableFor)
	}
	return nil
}

// Close stops the background work. It does not close the client, which the
// caller owns.
func (s *Stores) Close() error {
	s.closed.Do(func() {
		s.stop()
		_ = s.pubsub.Close()
		s.done.Wait()
		if !s.Degraded() {
			s.Breakers.sync(context.Background(), true, false) // the last counts
		}
	})
	return nil
}

// callCtx bounds one Redis call.
func (s *Stores) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.opts.Timeout)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// message is what the breaker scripts publish when a breaker changes, the
// pause script when a pause does, ShareSettings when a breaker's settings
// do, and MemoryStore.ForgetSource when a source's memory is forgotten.
type message struct {
	// Pause is the source whose pause changed.
	Pause string `json:"p,omitempty"`
	// Memory is the source whose remembered answers were forgotten.
	Memory    string `json:"m,omitempty"`
	Key       string `json:"k"`
	Operation string `json:"o"`
	// Ver is the breaker's version after the change (breaker scripts),
	// followed by the breaker as it stands (a replica's new view).
	Ver        string `json:"v,omitempty"`
	State      string `json:"st,omitempty"`
	Gen        string `json:"g,omitempty"`
	Since      string `json:"sn,omitempty"`
	OpenUntil  string `json:"ou,omitempty"`
	ProbeUntil string `json:"pu,omitempty"`
	OpenTotal  string `json:"ot,omitempty"`
	// Settings are shared settings, from replica Replica.
	Settings *sharedSettings `json:"s,omitempty"`
	Replica  string          `json:"r,omitempty"`
}

// pingEvery is how long the subscription may stay silent before it is
// checked with a PING, so that a dead connection is found.
const pingEvery = 10 * time.Second

// subscribe applies invalidations until ctx ends. After an error it tries
// again with the health check's backoff, so a Redis that is down costs few
// attempts, or as soon as the health check finds Redis answering again.
// Every (re)subscription drops what the stores remember, since
// invalidations may have been lost in between; until it is confirmed and
// the views read again, decisions ask Redis (Listening).
func (s *Stores) subscribe(ctx context.Context) {
	defer s.done.Done()
	_ = s.pubsub.Subscribe(ctx, s.channel) // kept for reconnections even if it fails now
	b := s.newBackoff()
	for ctx.Err() == nil {
		m, err := s.pubsub.ReceiveTimeout(ctx, pingEvery)
		if err == nil {
			b.Reset()
			s.receive(m)
			continue
		}
		if ctx.Err() != nil || errors.Is(err, redis.ErrClosed) {
			return
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && s.pubsub.Ping(ctx) == nil {
			continue // silent but alive: the PONG comes as a message
		}
		// The client reconnects and resubscribes at the next receive;
		// the subscription's confirmation then drops what the stores
		// remember. A refusal (an error reply: the connection is fine)
		// is asked again.
		s.deaf()
		s.reload()
		select {
		case <-ctx.Done():
			return
		case <-time.After(b.NextBackOff()):
		case <-s.listen:
		}
		var refused redis.Error
		if errors.As(err, &refused) {
			_ = s.pubsub.Subscribe(ctx, s.channel)
		}
	}
}

// Listening reports whether this replica hears the changes other replicas
// make: its invalidation subscription is confirmed, and every breaker it
// uses was read again since (a change published before the subscription
// took effect is in what was read). Until then, and whenever the
// subscription is lost, a decision asks Redis instead of trusting the
// replica's view, and a degraded replica does not return to shared state.
func (s *Stores) Listening() bool {
	sub := s.sub.Load()
	return sub&1 == 1 && s.synced.Load() == sub
}

// heard records that the subscription is confirmed: a new epoch, live.
// Only the subscriber changes sub.
func (s *Stores) heard() { s.sub.Store(((s.sub.Load()>>1)+1)<<1 | 1) }

// deaf records that the subscription is lost: a new epoch, not live.
func (s *Stores) deaf() {
	if sub := s.sub.Load(); sub&1 == 1 {
		s.sub.Store(((sub >> 1) + 1) << 1)
	}
}

// readAgain records that every view was read again, in a read that began
// when the subscription was sub; it reports whether the replica listens
// now (the subscription was not lost meanwhile).
func (s *Stores) readAgain(sub uint64) bool {
	if sub&1 == 0 {
		return false
	}
	s.synced.Store(sub)
	return s.sub.Load() == sub
}

// wakeSubscriber has a subscriber waiting out its backoff try again now.
func (s *Stores) wakeSubscriber() {
	select {
	case s.listen <- struct{}{}:
	default:
	}
}

func (s *Stores) receive(m any) {
	switch m := m.(type) {
	case *redis.Subscription:
		// (Re)subscribed: what was published meanwhile is lost. The
		// views count again once read after this (BreakerStore.loop).
		if m.Kind == "subscribe" {
			s.heard()
		}
		s.Limits.forget()
		s.Memory.invalidate("")
		s.Breakers.settingsMissed.Store(true)
		s.Breakers.refreshSoon()
	case *redis.Message:
		var msg message
		if json.Unmarshal([]byte(m.Payload), &msg) != nil {
			s.bad.Unreadable(s.channel, "a message", false)
			return
		}
		if msg.Pause != "" {
			s.Limits.invalidate(msg.Pause)
			return
		}
		if msg.Memory != "" {
			s.Memory.invalidate(msg.Memory)
			return
		}
		if msg.Key == "" {
			return
		}
		id := breaker.ID{Key: msg.Key, Operation: aggregator.Operation(msg.Operation)}
		if msg.Settings != nil {
			if !msg.Settings.valid() {
				s.bad.Unreadable(s.channel, "a message", false)
				return
			}
			if msg.Replica != s.replica && s.opts.OnSettings != nil {
				s.opts.OnSettings(id, msg.Settings.settings())
			}
			return
		}
		ver, err := strconv.ParseInt(msg.Ver, 10, 64)
		if _, ok := viewOf(msg); err != nil || ver < 0 || ver >= maxExact || msg.State != "" && !ok {
			s.bad.Unreadable(s.channel, "a message", false) // not what a script publishes
			return
		}
		s.Breakers.onMessage(id, msg)
	}
}

// get reads the string at key with getScript: found is false when there is
// none, or when the key holds another type (reported: treated as absent).
func (s *Stores) get(ctx context.Context, key string) (val string, found bool, err error) {
	res, err := getScript.Run(ctx, s.client, []string{key}).Result()
	switch {
	case isNil(err):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	val, ok := res.(string)
	if !ok {
		s.bad.Unreadable(key, "", false)
	}
	return val, ok, nil
}

//go:embed lua/*.lua
var luaFiles embed.FS

func lua(names ...string) *redis.Script {
	var src []byte
	for _, n := range names {
		b, err := luaFiles.ReadFile("lua/" + n)
		if err != nil {
			panic(err) // embedded at build time: cannot happen
		}
		src = append(src, b...)
		src = append(src, '\n')
	}
	return redis.NewScript(string(src))
}

// Flush sends this replica's pending outcome counts now, in one round
// trip, as the background loop does every FlushInterval.
func (s *Stores) Flush(ctx context.Context) error {
	if s.Degraded() {
		return ErrDegraded
	}
	if !s.Breakers.sync(ctx, true, false) {
		return fmt.Errorf("%w: the flush failed", ErrDegraded)
	}
	return nil
}
