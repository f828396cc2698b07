package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator/problem"
)

// MaxBodyBytes bounds a request's body, whatever the route (SPEC 9): over
// it the answer is 413 payload-too-large.
const MaxBodyBytes = 64 << 10

// DefaultReadTimeout is Options.ReadTimeout when it is zero (SPEC 9
// `server.read_timeout`).
const DefaultReadTimeout = 5 * time.Second

// readBody reads the request's whole body, at most MaxBodyBytes, before
// the request counts toward max_in_flight (limitInFlight runs next), so
// that a slow client holds a connection and a goroutine, never one of the
// slots of the requests being served (SPEC 9). The handlers read the body
// from memory.
//
// The body must have arrived within Options.ReadTimeout of the request's
// start. HTTPServer sets http.Server.ReadTimeout to it, so net/http's
// read deadline, counted from when it begins reading the request (the
// connection's start, or a kept-alive connection's next request), bounds
// headers and body together; under another server (httptest) the
// deadline is set here, ReadTimeout after the headers. A late body is a
// 408 request-timeout, a larger one a 413 payload-too-large (a
// Content-Length over the bound is refused before a byte is read); both
// close the connection, the rest of the body unread.
func (s *Server) readBody(c *gin.Context) {
	r := c.Request
	if r.Body == nil || r.Body == http.NoBody {
		c.Next()
		return
	}
	start := time.Now()
	rc := http.NewResponseController(c.Writer)
	if r.ContentLength > MaxBodyBytes {
		s.refuseBody(c, rc, start, s.tooLarge())
		return
	}
	if !boundedByServer(r, s.readTimeout) {
		// Recorders do not support deadlines; their bodies are in memory.
		_ = rc.SetReadDeadline(start.Add(s.readTimeout))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		s.refuseBody(c, rc, start, s.opts.Problems.Newf(problem.RequestTimeout,
			"The request's body did not arrive within %v.", s.readTimeout))
	case err != nil:
		// The client went away, or its chunked encoding is broken.
		s.refuseBody(c, rc, start, s.opts.Problems.Invalid(problem.InvalidParam{Name: "body", Reason: "could not be read"}))
	case len(body) > MaxBodyBytes:
		s.refuseBody(c, rc, start, s.tooLarge())
	default:
		c.Request.Body = io.NopCloser(bytes.NewReader(body))
		c.Next()
	}
}

func (s *Server) tooLarge() *problem.Problem {
	return s.opts.Problems.New(problem.PayloadTooLarge, fmt.Sprintf("A request body may hold at most %d KiB.", MaxBodyBytes>>10))
}

// refuseBody answers p and closes the connection without reading what is
// left of the body: the read deadline passes at once, so that net/http
// does not wait for the rest before it hangs up.
func (s *Server) refuseBody(c *gin.Context, rc *http.ResponseController, start time.Time, p *problem.Problem) {
	c.Header("Connection", "close")
	s.fail(c, p, nil)
	_ = rc.SetReadDeadline(time.Now())
	s.record(c, time.Since(start))
}

// boundedByServer reports whether the http.Server serving r bounds its
// headers and body together within d, as HTTPServer's does.
func boundedByServer(r *http.Request, d time.Duration) bool {
	srv, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	return ok && srv.ReadTimeout > 0 && srv.ReadTimeout <= d
}
