package redisstore

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/ratelimit"
)

var (
	reserveScript = lua("limit_reserve.lua")
	pauseScript   = lua("limit_pause.lua")
	getScript     = lua("get.lua")
)

const (
	// pauseGrace keeps a pause key past its end, for replicas whose clocks
	// lag Redis's: the key holds the end itself, and expiry only collects it.
	pauseGrace = time.Minute
	// pauseCacheTTL bounds, on the wall clock, how long a pause read from
	// Redis is trusted without reading it again, should an invalidation be
	// lost.
	pauseCacheTTL = time.Second
	// skew is how far the clocks of replicas may disagree: a time further
	// ahead than what a replica could have written, by more than this, is
	// garbage (the breaker scripts use the same margin).
	skew = 5 * time.Minute
)

// LimitStore implements ratelimit.Store on Redis: each source's budget is a
// GCRA (one theoretical arrival time per source), each pause a key holding
// its end, which only ever extends. Times are the callers'.
//
// Reserve is one round trip. PausedUntil is remembered (pauses are rare) and
// costs a round trip only after a pause was set, by any replica, which
// publishes it: a pause set through one replica holds for all at once.
type LimitStore struct {
	st    *Stores
	local *ratelimit.MemoryStore

	mu      sync.RWMutex
	sources map[string]*limitEntry
}

// limitEntry is what this replica keeps of one source.
type limitEntry struct {
	tat, pause string // keys

	mu     sync.Mutex
	gen    uint64 // bumped by every invalidation
	known  bool   // until is what Redis holds
	until  int64  // end of the pause, Unix µs; 0 none
	readAt time.Time
}

var _ ratelimit.Store = (*LimitStore)(nil)

func newLimitStore(s *Stores) *LimitStore {
	return &LimitStore{st: s, local: ratelimit.NewMemoryStore(), sources: make(map[string]*limitEntry)}
}

func (l *LimitStore) entry(source string) *limitEntry {
	l.mu.RLock()
	e := l.sources[source]
	l.mu.RUnlock()
	if e != nil {
		return e
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e = l.sources[source]; e == nil {
		base := l.st.opts.Prefix + "{ratelimit/" + source + "}:"
		e = &limitEntry{tat: base + "tat", pause: base + "pause"}
		l.sources[source] = e
	}
	return e
}

// invalidate forgets the pause of source, which another replica changed.
func (l *LimitStore) invalidate(source string) {
	l.mu.RLock()
	e := l.sources[source]
	l.mu.RUnlock()
	if e == nil {
		return // never read here
	}
	e.mu.Lock()
	e.gen++
	e.known = false
	e.mu.Unlock()
}

// forget forgets every pause, when invalidations may have been lost.
func (l *LimitStore) forget() {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for _, e := range l.sources {
		e.mu.Lock()
		e.gen++
		e.known = false
		e.mu.Unlock()
	}
}

// Reserve implements ratelimit.Store.
func (l *LimitStore) Reserve(ctx context.Context, key string, s ratelimit.Settings, maxWait time.Duration, at time.Time) (time.Duration, bool, error) {
	if !(s.RPS > 0) {
		return 0, true, nil
	}
	if l.st.Degraded() {
		return l.local.Reserve(ctx, key, s, maxWait, at)
	}
	interval := 1e6 / s.RPS
	cctx, cancel := l.st.callCtx(ctx)
	e := l.entry(key)
	res, err := reserveScript.Run(cctx, l.st.client, []string{e.tat},
		at.UnixMicro(), interval, max(s.Burst, 1), float64(max(maxWait, 0))/1e3).Slice()
	cancel()
	if err != nil {
		l.st.failed(ctx, err)
		return l.local.Reserve(ctx, key, s, maxWait, at)
	}
	if intAt(res, 2) == 1 {
		l.st.bad.Unreadable(e.tat, "", true) // a full bucket now
	}
	us, _ := strconv.ParseFloat(strAt(res, 1), 64)
	wait := time.Duration(min(math.Round(us*1e3), math.MaxInt64))
	return wait, intAt(res, 0) == 1, nil
}

// SetPause implements ratelimit.Store. The pause is kept locally too, so
// that it holds here should Redis fail.
func (l *LimitStore) SetPause(ctx context.Context, key string, until time.Time) error {
	_ = l.local.SetPause(ctx, key, until)
	if l.st.Degraded() {
		return nil
	}
	expire := until
	if now := time.Now(); expire.Before(now) {
		expire = now
	}
	e := l.entry(key)
	cctx, cancel := l.st.callCtx(ctx)
	res, err := pauseScript.Run(cctx, l.st.client, []string{e.pause},
		until.UnixMicro(), expire.Add(pauseGrace).UnixMilli(), l.st.channel, key,
		until.Add(l.st.opts.MaxPause+skew).UnixMicro()).Slice()
	cancel()
	l.invalidate(key)
	if err != nil {
		l.st.failed(ctx, err)
	}
	if intAt(res, 1) == 1 {
		l.st.bad.Unreadable(e.pause, "", true)
	}
	return nil
}

// PausedUntil implements ratelimit.Store.
func (l *LimitStore) PausedUntil(ctx context.Context, key string, now time.Time) (time.Time, error) {
	if l.st.Degraded() {
		return l.local.PausedUntil(ctx, key, now)
	}
	e := l.entry(key)
	e.mu.Lock()
	gen, known, until := e.gen, e.known && time.Since(e.readAt) < pauseCacheTTL, e.until
	e.mu.Unlock()
	if !known {
		cctx, cancel := l.st.callCtx(ctx)
		res, found, err := l.st.get(cctx, e.pause)
		cancel()
		if err != nil {
			l.st.failed(ctx, err)
			return l.local.PausedUntil(ctx, key, now)
		}
		until = 0
		if found {
			until = l.parsePause(e.pause, res, now)
		}
		e.mu.Lock()
		if e.gen == gen { // no invalidation came meanwhile
			e.known, e.until, e.readAt = true, until, time.Now()
		}
		e.mu.Unlock()
	}
	if until <= now.UnixMicro() {
		return time.Time{}, nil
	}
	return time.UnixMicro(until).In(now.Location()), nil
}

// parsePause reads the end of a pause as SetPause writes it (Unix µs). It
// is 0, no pause, for anything else: not an integer, or further ahead than
// any pause could have been set (MaxPause, and clocks that disagree), which
// would otherwise keep the portal from being called for ever; the next
// pause set overwrites it.
func (l *LimitStore) parsePause(key, v string, now time.Time) int64 {
	us, err := strconv.ParseInt(v, 10, 64)
	if err != nil || us >= 1<<53 || us > now.Add(l.st.opts.MaxPause+skew).UnixMicro() {
		l.st.bad.Unreadable(key, "", false)
		return 0
	}
	return us
}

func isNil(err error) bool { return errors.Is(err, redis.Nil) }
