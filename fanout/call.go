package fanout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/mapping"
)

// outcome is what became of one source call, retries included.
type outcome struct {
	outcome    aggregator.Outcome
	status     int
	retryAfter time.Duration
	err        error
	detail     string
	// release frees the call's context; set on success, for a caller that
	// still reads the answer (a voucher streaming through).
	release context.CancelFunc
	// observe reports the call to the Observer; set on a voucher's success,
	// whose outcome is known once its body has been relayed (an oversized
	// body is source-error after all).
	observe func(aggregator.Outcome)
}

// attempt makes one call to the portal under ctx, which carries the
// source's own timeout; pause is the back-off the portal asked for.
type attempt func(ctx context.Context) (status int, pause time.Duration, err error)

// call runs do for member m and operation op: the rate limiter first (so a
// refused call never holds a half-open probe slot), then the breaker, then
// the portal, retried per SPEC 4.3.
func (e *Engine) call(ctx context.Context, m Member, op aggregator.Operation, do attempt) outcome {
	source := m.Source.ID()
	id := m.BreakerID(op)
	var bo retryBackoff // made at the first retry: most calls have none
	var last outcome    // the previous try's, when tried
	tried := false
	for n := 0; ; n++ {
		if e.opts.Limiter != nil {
			if err := e.opts.Limiter.Admit(ctx, source, remaining(ctx)); err != nil {
				if tried {
					skipEvent(ctx, aggregator.SkippedRateLimited) // a retry held back
					return last
				}
				var le *ratelimit.LimitedError
				if !errors.As(err, &le) {
					return e.deadline(source, op)
				}
				// Open and paused at once: circuit-open is what the client sees.
				if st, err := e.opts.Breakers.Status(ctx, id); err == nil && (st.State == breaker.Open || st.State == breaker.ForcedOpen) {
					return e.skippedOpen(source, op, id, st)
				}
				e.observe(source, op, aggregator.SkippedRateLimited, 0)
				return outcome{outcome: aggregator.SkippedRateLimited, retryAfter: le.RetryAfter,
					detail: "The portal's rate limit kept the call from going."}
			}
		}
		c, err := e.opts.Breakers.Allow(ctx, id)
		if err != nil {
			if tried {
				skipEvent(ctx, aggregator.SkippedOpen)
				return last // the breaker opened while we retried
			}
			var oe *breaker.OpenError
			retryAfter := time.Second
			if errors.As(err, &oe) {
				retryAfter = oe.RetryAfter
			}
			e.observe(source, op, aggregator.SkippedOpen, 0)
			return outcome{outcome: aggregator.SkippedOpen, retryAfter: retryAfter, detail: openDetail(oe)}
		}
		callCtx, cancel := context.WithTimeout(ctx, m.Timeout)
		if e.opts.Limiter != nil && paginated(m.Source) {
			// Every page after a lookup's first spends the budget too (SPEC 8).
			gate := m.gate
			if gate == nil { // a member New did not see
				gate = e.pageGate(source)
			}
			callCtx = sources.WithPageGate(callCtx, gate)
		}
		start := e.opts.Now()
		status, pause, err := do(callCtx)
		elapsed := e.opts.Now().Sub(start)
		res := classify(ctx, status, pause, err)
		c.Done(ctx, breaker.Report{Outcome: res.outcome, Status: res.status, Elapsed: elapsed, RetryAfter: res.retryAfter})
		if res.outcome == aggregator.Succeeded && op == aggregator.Voucher {
			res.observe = func(o aggregator.Outcome) { e.observeCall(ctx, source, op, o, elapsed) }
		} else {
			e.observeCall(ctx, source, op, res.outcome, elapsed)
		}
		// Any answer that asked for a pause sets it (SPEC 4.2): a 429, a
		// 503 with Retry-After, or an exhausted RateLimit quota on any
		// status, a 4xx or an unreadable 2xx included.
		if errors.Is(res.err, sources.ErrTokenRefused) {
			res.detail = "The portal's token endpoint refused the configured client credentials."
		}
		if res.outcome == aggregator.SkippedRateLimited {
			// A page kept back by our own limiter: no pause of the portal's.
			var le *ratelimit.LimitedError
			if errors.As(res.err, &le) {
				res.retryAfter = le.RetryAfter
			}
			res.detail = "The portal's rate limit kept a page of the answer from going."
		} else if res.retryAfter > 0 && e.opts.Limiter != nil {
			res.retryAfter = e.opts.Limiter.PauseBecause(context.WithoutCancel(ctx), source, res.retryAfter, pauseReason(res.err, res.status, res.retryAfter))
		}
		if res.outcome == aggregator.Succeeded {
			res.release = cancel
			return res
		}
		cancel()
		if res.outcome == aggregator.Deadline && tried {
			return last // the budget cut a retry: the earlier failure is the cause
		}
		last, tried = res, true
		if !retryable(res) || n >= m.Retry.MaxRetries {
			return res
		}
		if bo.b == nil {
			bo = newBackoff(m.Retry)
		}
		wait := bo.next()
		if res.retryAfter > wait {
			wait = res.retryAfter
		}
		if wait >= remaining(ctx) || e.opts.Sleep(ctx, wait) != nil {
			return res // never beyond the query's budget
		}
	}
}

// paginated reports whether src may make more than one request a lookup
// (a source that does not say may).
func paginated(src Source) bool {
	p, ok := src.(interface{ Paginated() bool })
	return !ok || p.Paginated()
}

// pageGate admits the pages of source's lookups after the first.
func (e *Engine) pageGate(source string) func(context.Context) error {
	return func(ctx context.Context) error {
		return e.opts.Limiter.Admit(ctx, source, remaining(ctx))
	}
}

func (e *Engine) deadline(source string, op aggregator.Operation) outcome {
	e.observe(source, op, aggregator.Deadline, 0)
	return outcome{outcome: aggregator.Deadline}
}

func (e *Engine) skippedOpen(source string, op aggregator.Operation, id breaker.ID, st breaker.Status) outcome {
	e.observe(source, op, aggregator.SkippedOpen, 0)
	retryAfter := st.OpenUntil.Sub(e.opts.Now())
	if st.State == breaker.ForcedOpen {
		s, _ := e.opts.Breakers.Settings(id)
		retryAfter = s.OpenFor
	}
	return outcome{outcome: aggregator.SkippedOpen, retryAfter: retryAfter, detail: "The source's circuit breaker is open."}
}

// pauseReason says, for operators, which answer paused a source for d.
func pauseReason(err error, status int, d time.Duration) string {
	var asked string
	var re *mapping.RuleError
	switch {
	case errors.As(err, &re):
		return fmt.Sprintf("The portal's answer matched response.errors[%d] (%s), which pauses it for %s.", re.Rule, re.Outcome, d.Round(time.Second))
	case status == http.StatusTooManyRequests:
		asked = "429 Too Many Requests"
	case status >= 500:
		asked = strconv.Itoa(status) + " with Retry-After"
	case status > 0:
		asked = strconv.Itoa(status) + " with its rate-limit quota exhausted"
	default:
		asked = "an answer"
	}
	return "The portal answered " + asked + ", asking to wait " + d.Round(time.Second).String() + "."
}

func openDetail(oe *breaker.OpenError) string {
	switch {
	case oe == nil:
		return "The source's circuit breaker is open."
	case oe.Probing:
		return "The source is recovering: its single probe call is in flight."
	case oe.State == breaker.ForcedOpen:
		return "The source's circuit breaker was opened by an operator."
	}
	return "The source's circuit breaker is open after recent failures."
}

// classify turns one call's error into an outcome. A timeout while the
// query's own context has ended is the query's budget, not the source's.
func classify(ctx context.Context, status int, pause time.Duration, err error) outcome {
	if err == nil {
		return outcome{outcome: aggregator.Succeeded, status: status, retryAfter: pause}
	}
	if ctx.Err() != nil {
		return outcome{outcome: aggregator.Deadline, err: err}
	}
	var se *sources.Error
	if errors.As(err, &se) {
		return outcome{outcome: se.Outcome, status: se.Status, retryAfter: se.Pause, err: err}
	}
	return outcome{outcome: aggregator.Unavailable, err: err}
}

// retryable: connection errors, the source's own timeout, 502, 503, 504.
func retryable(o outcome) bool {
	switch o.outcome {
	case aggregator.Timeout:
		return true
	case aggregator.Unavailable:
		return o.status == 0 || o.status == 502 || o.status == 503 || o.status == 504
	}
	return false
}

func remaining(ctx context.Context) time.Duration {
	d, ok := ctx.Deadline()
	if !ok {
		return time.Hour
	}
	return time.Until(d)
}

// retryBackoff yields min(initial·2^(n-1), max) with ±50% jitter, capped.
type retryBackoff struct {
	b   *backoff.ExponentialBackOff
	max time.Duration
}

func newBackoff(r Retry) retryBackoff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     r.InitialBackoff,
		RandomizationFactor: 0.5,
		Multiplier:          2,
		MaxInterval:         r.MaxBackoff,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	if b.InitialInterval <= 0 {
		b.InitialInterval = 100 * time.Millisecond
	}
	if b.MaxInterval <= 0 {
		b.MaxInterval = time.Minute
	}
	b.Reset()
	return retryBackoff{b: b, max: b.MaxInterval}
}

func (r retryBackoff) next() time.Duration {
	d := r.b.NextBackOff()
	if d < 0 || d > r.max {
		d = r.max
	}
	return d
}
