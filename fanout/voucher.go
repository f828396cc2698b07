package fanout

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/sources"
)

// Voucher fetches a payment voucher from source under the breaker of
// (breaker_key, voucher). On success the caller streams and closes the body
// before the call's own timeout; otherwise the problem says why (SPEC 3.2).
// A voucher the source refuses to relay (a media type outside its
// voucher_types, a Content-Length over voucher_max_bytes) is a 502
// source-error, which the breaker does not count (SPEC 9).
//
// The breaker hears of a voucher call when its head arrives; the Observer
// (metrics) once its body is closed, with the outcome of the whole
// transfer: a body that turned out longer than voucher_max_bytes is
// source-error (outcome "error"), one the portal broke off is unavailable
// or timeout.
func (e *Engine) Voucher(ctx context.Context, source, infractionID string, budget time.Duration) (*sources.Voucher, *problem.Problem) {
	m, ok := e.Member(source)
	if !ok || !m.Source.Supports(aggregator.Voucher, "") {
		return nil, e.opts.Problems.New(problem.NotFound, "This source has no vouchers.")
	}
	if reason := checkInfractionID(infractionID); reason != "" {
		return nil, e.opts.Problems.Invalid(problem.InvalidParam{Name: "infraction_id", Reason: reason})
	}
	ctx, cancel := context.WithTimeout(ctx, budget)
	// The span ends with the relay of the body, whose outcome is the call's.
	ctx, span := e.startLookup(ctx, m, aggregator.Voucher)
	var v *sources.Voucher
	res := e.call(ctx, m, aggregator.Voucher, span.counted(func(ctx context.Context) (int, time.Duration, error) {
		var err error
		if v, err = m.Source.Voucher(ctx, infractionID); err != nil {
			return 0, 0, err
		}
		return 0, v.Pause, nil
	}))
	if res.outcome == aggregator.Succeeded {
		release, observe := res.release, res.observe
		v.Body = &releasingBody{ReadCloser: v.Body, release: func(err error) {
			o := streamOutcome(ctx, err)
			if observe != nil {
				observe(o)
			}
			pt := ""
			if o != aggregator.Succeeded {
				pt = e.opts.Problems.New(o.Slug(), "").Type
			}
			span.end(o, pt)
			release()
			cancel()
		}}
		return v, nil
	}
	cancel()
	if errors.Is(res.err, sources.ErrNotFound) {
		p := e.opts.Problems.New(problem.NotFound, "The portal has no voucher for this infraction.")
		span.end(res.outcome, p.Type)
		return nil, p
	}
	outcome := res.outcome
	if outcome == aggregator.SkippedRateLimited {
		outcome = aggregator.RateLimited
	}
	detail := res.detail
	if detail == "" {
		detail = describe(res.outcome, res.status, res.err)
	}
	p := e.opts.Problems.New(outcome.Slug(), detail)
	if res.retryAfter > 0 || outcome == aggregator.RateLimited || outcome == aggregator.SkippedOpen {
		p.SetRetryAfter(res.retryAfter)
	}
	span.end(res.outcome, p.Type)
	return nil, p
}

// streamOutcome classifies how the relay of a voucher's body ended: err is
// the first error its reads met (nil when none did, or the body was closed
// before its end). ctx is the request's: when it ended, the caller cut the
// transfer short.
func streamOutcome(ctx context.Context, err error) aggregator.Outcome {
	switch {
	case err == nil:
		return aggregator.Succeeded
	case errors.Is(err, sources.ErrVoucherTooLarge):
		return aggregator.Unreadable
	case ctx.Err() != nil:
		return aggregator.Deadline
	case errors.Is(err, context.DeadlineExceeded):
		return aggregator.Timeout
	}
	return aggregator.Unavailable
}

// releasingBody frees the call's context when the body is closed, and
// reports the first read error it saw.
type releasingBody struct {
	io.ReadCloser
	release func(err error)
	err     error
	closed  bool
}

func (b *releasingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && b.err == nil {
		b.err = err
	}
	return n, err
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	if !b.closed {
		b.closed = true
		b.release(b.err)
	}
	return err
}

// maxInfractionID bounds the length of an infraction id in a voucher path.
const maxInfractionID = 256

// checkInfractionID says what is wrong with an infraction id that no portal
// should be asked about: a dot segment, which would reach the portal's path
// as one (SPEC 8), control characters, or an absurd length.
func checkInfractionID(id string) string {
	switch {
	case id == "" || id == "." || id == "..":
		return "must be an infraction id, not empty or a dot segment"
	case len(id) > maxInfractionID:
		return "longer than 256 bytes"
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x20 || id[i] == 0x7f {
			return "holds a control character"
		}
	}
	return ""
}
