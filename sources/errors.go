package sources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/mapping"
)

// ErrNotFound is the portal's 404 to a voucher request. It is wrapped in an
// *Error with Status 404.
var ErrNotFound = errors.New("not found")

// ErrUnsupported is returned, unwrapped, when a source is asked for an
// operation (or a kind of id) it does not support; no call is made.
var ErrUnsupported = errors.New("operation not supported by this source")

// Error is a failed source call, classified. Its text never carries the
// request URL, which holds the plate or the person id.
type Error struct {
	// Outcome is Timeout, Unavailable, Rejected, Unreadable or RateLimited.
	Outcome aggregator.Outcome
	// Status is the HTTP status when the portal answered, else 0: a
	// connection refused, reset or timed out, even after the headers of an
	// answer whose body never arrived whole, has Status 0. A 2xx answer
	// that response.unavailable recognises as a maintenance page has
	// Status 503, the status it stands for, so that the breaker counts it
	// as it counts a 503.
	Status int
	// Pause is how long the portal asked us to wait: its Retry-After, or
	// the reset of an exhausted RateLimit quota; 0 when it said nothing.
	Pause time.Duration
	// Err is the cause.
	Err error
	// Detail, when set, is what the client's problem says of the failure:
	// the text an errors rule's detail selector found in the answer (made
	// plain, at most 200 characters). It is the portal's text: never for
	// logs, events, traces or metrics, and so never part of Error().
	Detail string
	// Health says how the answer mapped until it was refused (SPEC 13):
	// the errors rule that decided it, the items read before the one that
	// did not normalise, the pages read before. Zero when the portal's
	// answer was not read (a timeout, a 5xx that no rule matched).
	Health mapping.Health
}

// Error describes the failure by outcome, status and cause.
func (e *Error) Error() string {
	msg := string(e.Outcome)
	if e.Status != 0 {
		msg += " (HTTP " + strconv.Itoa(e.Status) + ")"
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns the cause, so that errors.Is(err, context.DeadlineExceeded)
// and errors.Is(err, ErrNotFound) work.
func (e *Error) Unwrap() error { return e.Err }

// transportError classifies a failure to obtain or read an answer. The
// caller's context comes first: a call cut short by it is a Timeout that
// wraps context.DeadlineExceeded or context.Canceled, and the context's
// cause when the caller gave one (context.WithTimeoutCause), so that the
// caller can tell its own budget from the source's timeout. A timeout of
// the network or of the http.Client is a Timeout too; anything else
// (refused, reset, DNS, TLS, EOF before the headers) is Unavailable, but a
// redirect that was not followed (ErrRedirect) is Unreadable.
func transportError(ctx context.Context, err error) *Error {
	if cerr := ctx.Err(); cerr != nil {
		if cause := context.Cause(ctx); cause != nil && cause != cerr {
			cerr = fmt.Errorf("%w: %w", cerr, cause)
		}
		return &Error{Outcome: aggregator.Timeout, Err: cerr}
	}
	err = withoutURL(err)
	if re := (*redirectError)(nil); errors.As(err, &re) {
		// The portal answered, with a redirect we do not follow: its
		// content, not its capacity.
		return &Error{Outcome: aggregator.Unreadable, Err: re}
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return &Error{Outcome: aggregator.Timeout, Err: err}
	}
	return &Error{Outcome: aggregator.Unavailable, Err: err}
}

// withoutURL drops the request URL that *url.Error carries (and prints),
// keeping its operation and cause.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &requestError{op: ue.Op, err: ue.Err}
	}
	return err
}

// requestError is a *url.Error without its URL.
type requestError struct {
	op  string
	err error
}

func (e *requestError) Error() string { return e.op + " request: " + e.err.Error() }
func (e *requestError) Unwrap() error { return e.err }

// Timeout reports whether the cause was a timeout, like *url.Error does.
func (e *requestError) Timeout() bool {
	var ne net.Error
	return errors.As(e.err, &ne) && ne.Timeout()
}

// statusError classifies a non-2xx answer (404 excepted, which the caller
// handles) with the pause it asked for.
func statusError(code int, pause time.Duration) *Error {
	e := &Error{Status: code, Pause: pause, Err: statusCause(code)}
	switch {
	case code == http.StatusTooManyRequests:
		e.Outcome = aggregator.RateLimited
	case code >= 500:
		e.Outcome = aggregator.Unavailable
	case code >= 400:
		e.Outcome = aggregator.Rejected
	default:
		// 1xx and unfollowed 3xx: not an answer this adapter can read.
		e.Outcome = aggregator.Unreadable
	}
	return e
}

// statusCause describes a status code as the cause of an Error.
func statusCause(code int) error {
	if text := http.StatusText(code); text != "" {
		return fmt.Errorf("portal answered %d %s", code, text)
	}
	return fmt.Errorf("portal answered %d", code)
}

// unreadable reports a 2xx answer whose body cannot be used.
func unreadable(status int, pause time.Duration, err error) *Error {
	return &Error{Outcome: aggregator.Unreadable, Status: status, Pause: pause, Err: err}
}
