package app

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync/atomic"

	"github.com/multas/aggregator/internal/h1"
)

// ErrNotReplayed is the error of a portal call whose connection was lost
// after the whole request was sent, before any answer: the portal may have
// received it, so it is not sent again behind the breaker's back.
var ErrNotReplayed = h1.ErrNotReplayed

// NoReplay wraps a net/http transport so that every request that reaches a
// portal is a call the breaker and the metrics see (SPEC 11). The portal
// transport (NewTransport) never replays; NoReplay guards its fallback,
// which carries the requests that go through a proxy, and transports given
// in Options.
//
// http.Transport retries an idempotent request (GET, or any carrying an
// Idempotency-Key) on another connection when a reused one fails after the
// request was written and before the answer began (net/http
// persistConn.shouldRetryRequest): the portal received it, and the caller
// never knows. A portal that accepts requests and hangs up gets one per
// idle connection of the pool for every call.
//
// NoReplay watches each round trip with an httptrace.ClientTrace: once
// the request has been written whole (WroteRequest without error), any
// further connection the transport obtains for the same round trip
// (GotConn) is a replay. It is refused: that connection is closed before
// anything is written on it, and the round trip ends with ErrNotReplayed,
// which the call reports as a connection failure. A retry after a write
// that put nothing on the wire (the server had closed an idle connection)
// is not a replay and goes ahead, as the transport intends. A pooled
// connection the server closed while idle, and the transport has not
// noticed yet (on a busy machine its read loop may not have run), is closed
// before anything is written on it (h1.Stale), so that its retry is
// one of those. HTTP/2
// connections are left alone: an HTTP/2 transport retries only requests
// the server reports it did not process (GOAWAY, REFUSED_STREAM), and the
// connection is shared with other calls.
func NoReplay(next http.RoundTripper) http.RoundTripper {
	return noReplay{next: next}
}

type noReplay struct{ next http.RoundTripper }

// WithTLS guards a copy of the next transport configured by apply.
func (t noReplay) WithTLS(apply func(*tls.Config)) http.RoundTripper {
	if next, ok := h1.WithTLS(t.next, apply); ok {
		return noReplay{next: next}
	}
	return t
}

// CloseIdleConnections closes the next transport's idle connections.
func (t noReplay) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t noReplay) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	var written atomic.Bool
	trace := &httptrace.ClientTrace{
		WroteRequest: func(w httptrace.WroteRequestInfo) {
			if w.Err == nil {
				written.Store(true)
			}
		},
		GotConn: func(info httptrace.GotConnInfo) {
			if h2(info) {
				return
			}
			if !written.Load() {
				if info.Reused && h1.Stale(info.Conn) {
					// The portal closed it while idle, and the transport
					// has not noticed yet (its read loop waits for a CPU):
					// a request written there is lost unread, and its
					// retry would look like a replay. Closed here, the
					// write fails with nothing sent, and the transport
					// takes another connection.
					_ = info.Conn.Close()
				}
				return
			}
			// The transport loops back to its context check once the
			// write on the closed connection fails, and returns our cause.
			cancel(ErrNotReplayed)
			_ = info.Conn.Close()
		},
	}
	resp, err := t.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(ctx, trace)))
	if err != nil {
		cancel(nil)
		if errors.Is(context.Cause(ctx), ErrNotReplayed) && req.Context().Err() == nil {
			return nil, ErrNotReplayed
		}
		return nil, err
	}
	// The context must live as long as the body is read.
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// h2 reports whether the connection speaks HTTP/2.
func h2(info httptrace.GotConnInfo) bool {
	c, ok := info.Conn.(*tls.Conn)
	return ok && c.ConnectionState().NegotiatedProtocol == "h2"
}

// cancelOnClose releases the round trip's context with its body.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel(nil)
	return err
}
