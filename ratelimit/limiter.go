// Package ratelimit keeps the aggregator within the rate limits of the
// portals it calls and holds its own clients to theirs (SPEC 4.2).
//
// Outbound, each source has a token budget (rate_limit.rps and burst) and a
// pause that a portal sets by asking to back off (429 or 503 with
// Retry-After, or a RateLimit field with r=0). A portal that throttles is not
// a portal that is down: this package knows nothing of breakers, and the
// fan-out asks the Limiter before it asks the breaker for a permit, so a call
// the limiter refuses never holds a half-open probe slot.
//
// Inbound, Keys gives every configured API key its own budget and the
// RateLimit and RateLimit-Policy fields that announce it.
package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxPause is the longest pause a portal can impose when
// Settings.MaxPause is zero (SPEC 6: rate_limit.max_pause).
const DefaultMaxPause = 10 * time.Minute

// Settings is one source's rate_limit block.
type Settings struct {
	// RPS is the sustained budget in requests per second; 0 means no budget
	// (pauses still apply).
	RPS float64
	// Burst is how many requests may go at once; 0 with RPS > 0 means
	// ceil(RPS).
	Burst int
	// MaxWait is the longest a call waits rather than being refused: for
	// the end of a pause and a token together; 0 means never wait.
	MaxWait time.Duration
	// MaxPause caps the pause a portal can impose; 0 means DefaultMaxPause.
	MaxPause time.Duration
}

// normalized applies the documented defaults: what the Limiter keeps and
// what a Store receives.
func (s Settings) normalized() Settings {
	if !(s.RPS > 0) || math.IsInf(s.RPS, 1) {
		s.RPS, s.Burst = 0, 0
	} else if s.Burst <= 0 {
		s.Burst = int(min(math.Ceil(s.RPS), math.MaxInt32))
	}
	s.MaxWait = max(s.MaxWait, 0)
	if s.MaxPause <= 0 {
		s.MaxPause = DefaultMaxPause
	}
	return s
}

// ErrLimited is matched, through errors.Is, by every *LimitedError.
var ErrLimited = errors.New("ratelimit: rate limited")

// LimitedError says a call must not go now: the source is paused by its
// portal, or its budget has no token within the wait the call can afford.
type LimitedError struct {
	// Source is the source whose call was refused.
	Source string
	// RetryAfter is how long until the call could go.
	RetryAfter time.Duration
	// Paused is true when the portal's pause refused the call, false when
	// the budget did (RetryAfter then counts any pause before the token).
	Paused bool
}

func (e *LimitedError) Error() string {
	if e.Paused {
		return fmt.Sprintf("ratelimit: source %q paused by its portal, retry after %v", e.Source, e.RetryAfter)
	}
	return fmt.Sprintf("ratelimit: source %q over its request budget, retry after %v", e.Source, e.RetryAfter)
}

// Is makes errors.Is(err, ErrLimited) true.
func (e *LimitedError) Is(target error) bool { return target == ErrLimited }

// Decision says how long a call the limiter admitted must wait before it goes.
type Decision struct {
	// Wait is the time before the call may go; 0 means now.
	Wait time.Duration
	// Paused is true when part of Wait is the end of a portal's pause.
	Paused bool
}

// Limiter applies each configured source's budget and pauses. The state
// lives in a Store, so replicas sharing one share the budgets and pauses.
// A Limiter is safe for concurrent use.
//
// Store errors never fail a call: a limiter that cannot reach its store lets
// calls through (the breaker still protects the portal) and reports the
// error to OnStoreError. An error of the caller's own context is not a store
// error: Admit and Decide return it.
type Limiter struct {
	// OnStoreError, when set, receives every store error (wrapped with the
	// operation and the source) before the limiter falls back to allowing
	// the call. It must be safe for concurrent use. Set it before use.
	OnStoreError func(error)

	store    Store
	now      func() time.Time
	mu       sync.Mutex // serialises Configure
	settings atomic.Pointer[map[string]Settings]
}

// New returns a Limiter keeping its state in store and reading the time from
// now (time.Now when nil). No source is limited until it is configured.
func New(store Store, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	l := &Limiter{store: store, now: now}
	l.settings.Store(&map[string]Settings{})
	return l
}

// Configure sets the budget and pause bounds of source. Sources never
// configured are not limited at all and their pauses are ignored, so
// configure every source, with RPS 0 when it has no budget; that also keeps
// the store's keys to the configured sources. Configure may be called at any
// time; calls already deciding use the settings they read.
func (l *Limiter) Configure(source string, s Settings) {
	l.mu.Lock()
	defer l.mu.Unlock()
	old := *l.settings.Load()
	next := make(map[string]Settings, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[source] = s.normalized()
	l.settings.Store(&next)
}

func (l *Limiter) settingsFor(source string) (Settings, bool) {
	s, ok := (*l.settings.Load())[source]
	return s, ok
}

// Admit decides whether one call of source may go, for a query with budget
// left, and waits until it may. It returns nil when the call may go now;
// a *LimitedError (errors.Is(err, ErrLimited)) without waiting when the call
// must not go; or the context's error, wrapped, when ctx ends during the
// wait, in which case any token reserved for the call stays spent.
//
// The pause comes first: when source is paused for longer than the smaller
// of MaxWait and budget, the call is refused with Paused set and RetryAfter
// the pause left. Then the budget: the call takes a token due at the end of
// the pause at the latest, and is refused (nothing spent, RetryAfter the time
// until a token) when the whole wait would exceed min(MaxWait, budget).
// The wait runs on a real timer, whatever clock the Limiter was given.
func (l *Limiter) Admit(ctx context.Context, source string, budget time.Duration) error {
	d, err := l.Decide(ctx, source, budget)
	if err != nil || d.Wait <= 0 {
		return err
	}
	t := time.NewTimer(d.Wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ratelimit: source %q: waiting %v to call: %w", source, d.Wait, ctx.Err())
	}
}

// Decide is Admit without the wait: it reserves the call's token and returns
// how long the caller must wait before calling. A caller that does not make
// the call after all just lets the token go.
func (l *Limiter) Decide(ctx context.Context, source string, budget time.Duration) (Decision, error) {
	s, ok := l.settingsFor(source)
	if !ok {
		return Decision{}, nil
	}
	if err := ctx.Err(); err != nil {
		return Decision{}, fmt.Errorf("ratelimit: source %q: %w", source, err)
	}
	now := l.now()
	affordable := min(s.MaxWait, max(budget, 0))

	until, err := l.store.PausedUntil(ctx, source, now)
	if err != nil {
		return Decision{}, l.storeFailed(ctx, "reading the pause of", source, err)
	}
	var d Decision
	if until.After(now) {
		pause := until.Sub(now)
		if pause > affordable {
			return Decision{}, &LimitedError{Source: source, RetryAfter: pause, Paused: true}
		}
		d = Decision{Wait: pause, Paused: true}
	}
	if s.RPS == 0 {
		return d, nil
	}
	// The token is for when the call goes: the end of the pause, if any.
	wait, ok, err := l.store.Reserve(ctx, source, s, affordable-d.Wait, now.Add(d.Wait))
	if err != nil {
		return d, l.storeFailed(ctx, "reserving a token of", source, err)
	}
	if !ok {
		return Decision{}, &LimitedError{Source: source, RetryAfter: d.Wait + wait}
	}
	d.Wait += wait
	return d, nil
}

// storeFailed reports a store error and returns nil (allow the call), unless
// the error is the end of ctx, which it returns.
func (l *Limiter) storeFailed(ctx context.Context, op, source string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("ratelimit: source %q: %w", source, ctx.Err())
	}
	if l.OnStoreError != nil {
		l.OnStoreError(fmt.Errorf("ratelimit: %s source %q: %w", op, source, err))
	}
	return nil
}

// Pause records a portal's request that source back off for d (from a 429 or
// 503 Retry-After, or a RateLimit field with r=0), clamped to MaxPause. A
// pause only ever extends: a longer one already in force stays. d <= 0 and
// unconfigured sources are ignored (0 returned). It returns the pause now in
// force, for the retry_after of the call that got the answer.
//
// The pause is recorded even if ctx has ended: the answer has arrived. On a
// store error the pause is lost (reported to OnStoreError) and the clamped d
// is returned.
func (l *Limiter) Pause(ctx context.Context, source string, d time.Duration) time.Duration {
	return l.PauseBecause(ctx, source, d, "")
}

// PauseBecause is Pause with the reason the portal gave (what its answer
// said, never a query's content): when this pause is the one in force and
// the store is a ReasonStore, the reason is kept for PauseStatus.
func (l *Limiter) PauseBecause(ctx context.Context, source string, d time.Duration, reason string) time.Duration {
	s, ok := l.settingsFor(source)
	if !ok || d <= 0 {
		return 0
	}
	d = min(d, s.MaxPause)
	ctx = context.WithoutCancel(ctx)
	now := l.now()
	if err := l.store.SetPause(ctx, source, now.Add(d)); err != nil {
		_ = l.storeFailed(ctx, "pausing", source, err)
		return d
	}
	until, err := l.store.PausedUntil(ctx, source, now)
	if err != nil {
		_ = l.storeFailed(ctx, "reading the pause of", source, err)
		return d
	}
	if rs, ok := l.store.(ReasonStore); ok && reason != "" && !until.After(now.Add(d)) {
		if err := rs.SetPauseReason(ctx, source, reason, now.Add(d)); err != nil {
			_ = l.storeFailed(ctx, "recording why it paused", source, err)
		}
	}
	return max(d, until.Sub(now))
}

// PauseStatus is a source's pause as operators see it.
type PauseStatus struct {
	// Until is when the pause ends; zero when the source is not paused.
	Until time.Time
	// Reason is why, as the answer that set it said; "" when not known.
	Reason string
}

// PauseStatus reads source's pause and why it was set (the zero
// PauseStatus when it is not paused, not configured, or on a store error).
func (l *Limiter) PauseStatus(ctx context.Context, source string) PauseStatus {
	if _, ok := l.settingsFor(source); !ok {
		return PauseStatus{}
	}
	now := l.now()
	until, err := l.store.PausedUntil(ctx, source, now)
	if err != nil {
		_ = l.storeFailed(ctx, "reading the pause of", source, err)
		return PauseStatus{}
	}
	if !until.After(now) {
		return PauseStatus{}
	}
	ps := PauseStatus{Until: until}
	if rs, ok := l.store.(ReasonStore); ok {
		reason, err := rs.PauseReason(ctx, source, now)
		if err != nil {
			_ = l.storeFailed(ctx, "reading why it paused", source, err)
		}
		ps.Reason = reason
	}
	return ps
}

// PausedFor returns how long source stays paused (0 when it is not, when it
// is not configured, or on a store error): for /v1/sources availability, the
// voucher's 503 and admin views.
func (l *Limiter) PausedFor(ctx context.Context, source string) time.Duration {
	if _, ok := l.settingsFor(source); !ok {
		return 0
	}
	now := l.now()
	until, err := l.store.PausedUntil(ctx, source, now)
	if err != nil {
		_ = l.storeFailed(ctx, "reading the pause of", source, err)
		return 0
	}
	return max(until.Sub(now), 0)
}
