package ratelimit

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// bucket is one token bucket on a rate.Limiter. Its lock makes "look, then
// take" a single step, so a refusal spends nothing, and floor keeps the time
// shown to the limiter from going backwards: rate.Limiter, shown an earlier
// time than its last, refills the same interval twice.
type bucket struct {
	mu    sync.Mutex
	lim   *rate.Limiter // nil until the first take
	rps   float64
	burst int
	floor time.Time
}

// take spends one token for an event at at if the token is due within
// maxWait of at. Granted: the wait from at, true, and the tokens left
// (negative when tokens are owed). Refused, nothing spent: the wait from at
// until a token would be due, false, and the tokens there are.
// rps must be positive and burst at least 1.
func (b *bucket) take(at time.Time, rps float64, burst int, maxWait time.Duration) (wait time.Duration, ok bool, tokens float64) {
	b.mu.Lock()
	defer b.mu.Unlock()

	t := at
	if t.Before(b.floor) {
		t = b.floor
	} else {
		b.floor = t
	}
	switch {
	case b.lim == nil:
		b.lim = rate.NewLimiter(rate.Limit(rps), burst)
	case rps != b.rps || burst != b.burst:
		b.lim.SetLimitAt(t, rate.Limit(rps))
		b.lim.SetBurstAt(t, burst)
	}
	b.rps, b.burst = rps, burst

	lag := t.Sub(at) // > 0 only when at is behind an earlier reservation's time
	tokens = b.lim.TokensAt(t)
	if tokens >= 1 {
		if lag > maxWait {
			return lag, false, tokens
		}
		b.lim.AllowN(t, 1) // cannot fail: the token is there, under our lock
		return lag, true, tokens - 1
	}
	need := lag + tokensDuration(1-tokens, rps)
	if need > maxWait {
		return need, false, tokens
	}
	r := b.lim.ReserveN(t, 1)
	return lag + r.DelayFrom(t), true, tokens - 1
}

// tokensDuration is how long rps takes to accrue n tokens, computed the way
// rate.Limiter computes its delays.
func tokensDuration(n, rps float64) time.Duration {
	d := (n / rps) * float64(time.Second)
	if d >= math.MaxInt64 {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(d)
}
