package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/ratelimit"
)

var (
	reserveScript = lua("limit_reserve.lua")
	leaseScript   = lua("limit_lease.lua")
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
// Reserve is one round trip, or none for a budget of more than one token
// per flush interval: such a budget is leased in batches (limit_lease.lua;
// SPEC 11: the shared budget is never exceeded by more than one flush
// interval's worth). PausedUntil is remembered (pauses are rare) and
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
	tat, pause, reason string // keys

	mu     sync.Mutex
	leased int   // tokens taken from the shared budget, not used yet
	leaseA int64 // … valid for calls at leaseA (µs) up to one flush interval on
	// empty is when the next token is due at the earliest (µs), as the
	// budget last refused a call: a budget only ever fills with time (the
	// theoretical arrival time never goes back), so a call before it is
	// refused without asking again.
	empty   float64
	gen     uint64 // bumped by every invalidation
	known   bool   // until is what Redis holds
	reading bool   // a caller reads it again
	until   int64  // end of the pause, Unix µs; 0 none
	readAt  time.Time
}

var (
	_ ratelimit.Store       = (*LimitStore)(nil)
	_ ratelimit.ReasonStore = (*LimitStore)(nil)
)

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
		e = &limitEntry{tat: base + "tat", pause: base + "pause", reason: base + "reason"}
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
	e := l.entry(key)
	interval := 1e6 / s.RPS
	script, args := reserveScript, []any{at.UnixMicro(), interval, max(s.Burst, 1), float64(max(maxWait, 0)) / 1e3}
	flush := l.st.opts.FlushInterval
	lease := int(min(s.RPS*flush.Seconds(), float64(max(s.Burst, 1))))
	us := at.UnixMicro()
	e.mu.Lock()
	if d := e.empty - float64(us); d > float64(maxWait.Microseconds()) {
		e.mu.Unlock()
		return time.Duration(min(math.Round(d*1e3), math.MaxInt64)), false, nil
	}
	e.mu.Unlock()
	if lease > 1 {
		// A budget of more than one token per flush interval is leased:
		// the tokens due within the next flush interval are taken from
		// the shared budget at once, and handed out here.
		e.mu.Lock()
		if e.leased > 0 && us >= e.leaseA && us < e.leaseA+flush.Microseconds() {
			e.leased--
			e.mu.Unlock()
			return 0, true, nil
		}
		e.mu.Unlock()
		script, args = leaseScript, append(args, lease, flush.Microseconds())
	}
	cctx, cancel := l.st.callCtx(ctx)
	res, err := script.Run(cctx, l.st.client, []string{e.tat}, args...).Slice()
	cancel()
	if err != nil {
		l.st.failed(ctx, err)
		return l.local.Reserve(ctx, key, s, maxWait, at)
	}
	if intAt(res, 2) == 1 {
		l.st.bad.Unreadable(e.tat, "", true) // a full bucket now
	}
	w, _ := strconv.ParseFloat(strAt(res, 1), 64)
	wait := time.Duration(min(math.Round(w*1e3), math.MaxInt64))
	taken := intAt(res, 0)
	e.mu.Lock()
	switch {
	case taken == 0 && w > 0 && !math.IsInf(w, 0):
		e.empty = max(e.empty, float64(us)+w)
	case taken > 1 && wait == 0:
		e.leased, e.leaseA = int(min(taken-1, int64(lease))), us
	}
	e.mu.Unlock()
	return wait, taken >= 1, nil
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
	gen, until := e.gen, e.until
	// Remembered only while invalidations are heard (Stores.Listening).
	known := e.known && (time.Since(e.readAt) < pauseCacheTTL || e.reading) && l.st.Listening()
	if e.known && !known {
		// Stale: this caller reads it again; the others meanwhile go
		// on with what was read (pauses are published as they are set:
		// the read again only covers a lost message).
		e.reading = true
	}
	e.mu.Unlock()
	if !known {
		cctx, cancel := l.st.callCtx(ctx)
		res, found, err := l.st.get(cctx, e.pause)
		cancel()
		e.mu.Lock()
		e.reading = false
		e.mu.Unlock()
		if err != nil {
			l.st.failed(ctx, err)
			return l.local.PausedUntil(ctx, key, now)
		}
		until = 0
		if found {
			until = l.parsePause(e.pause, res, now)
		}
		if lu, _ := l.local.PausedUntil(ctx, key, now); !lu.IsZero() && lu.UnixMicro() > until {
			// A pause this replica set, which Redis lost (a restart,
			// FLUSHALL, a failover): written back, as breakers are.
			_ = l.SetPause(ctx, key, lu)
			return lu, nil
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

// maxPauseReason bounds a pause's reason, written or read back.
const maxPauseReason = 256

// storedReason is why a pause was set, as SetPauseReason writes it.
type storedReason struct {
	Reason string `json:"reason"`
	Until  int64  `json:"until"` // Unix µs
}

// SetPauseReason implements ratelimit.ReasonStore: the reason lives beside
// the pause, in its own key, until the pause ends (and some grace). It is
// kept locally too, for when Redis cannot be reached.
func (l *LimitStore) SetPauseReason(ctx context.Context, key, reason string, until time.Time) error {
	reason = truncateUTF8(reason, maxPauseReason)
	_ = l.local.SetPauseReason(ctx, key, reason, until)
	if l.st.Degraded() {
		return nil
	}
	body, err := json.Marshal(storedReason{Reason: reason, Until: until.UnixMicro()})
	if err != nil {
		return err
	}
	e := l.entry(key)
	cctx, cancel := l.st.callCtx(ctx)
	defer cancel()
	expire := until
	if now := time.Now(); expire.Before(now) {
		expire = now
	}
	err = l.st.client.SetArgs(cctx, e.reason, body, redis.SetArgs{ExpireAt: expire.Add(pauseGrace)}).Err()
	if err != nil {
		l.st.failed(ctx, err)
	}
	return nil
}

// PauseReason implements ratelimit.ReasonStore. A value that is not what
// SetPauseReason writes is reported and read as no reason.
func (l *LimitStore) PauseReason(ctx context.Context, key string, now time.Time) (string, error) {
	if l.st.Degraded() {
		return l.local.PauseReason(ctx, key, now)
	}
	e := l.entry(key)
	cctx, cancel := l.st.callCtx(ctx)
	v, found, err := l.st.get(cctx, e.reason)
	cancel()
	if err != nil {
		l.st.failed(ctx, err)
		return l.local.PauseReason(ctx, key, now)
	}
	if !found {
		return "", nil
	}
	var r storedReason
	if json.Unmarshal([]byte(v), &r) != nil || len(r.Reason) > maxPauseReason || !utf8.ValidString(r.Reason) ||
		strings.ContainsFunc(r.Reason, unicode.IsControl) || r.Until <= 0 || r.Until >= 1<<53 {
		l.st.bad.Unreadable(e.reason, "", false)
		return "", nil
	}
	if r.Until <= now.UnixMicro() {
		return "", nil
	}
	return r.Reason, nil
}

// truncateUTF8 cuts s to at most n bytes without splitting a character.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
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
