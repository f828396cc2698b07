// Package server is the HTTP face of the aggregator and the only package
// that knows gin: routes, handlers, middleware, and the one place where
// errors become RFC 9457 problems.
package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/textproto"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/correlation"
	"github.com/multas/aggregator/drift"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/metrics"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/ratelimit"
)

// Options are the server's dependencies. Nil optional members disable
// what they serve.
type Options struct {
	Engine   *fanout.Engine
	Breakers *breaker.Set
	Limiter  *ratelimit.Limiter
	Metrics  *metrics.Metrics
	Problems problem.Catalog
	Logger   *slog.Logger

	// Deadline and MaxDeadline bound a synchronous query (SPEC 3.1).
	Deadline, MaxDeadline time.Duration
	// AdminToken guards /v1/admin; empty means the admin surface answers
	// 403 to everyone.
	AdminToken string
	// Keys, when set, makes X-API-Key mandatory on the client endpoints.
	Keys *ratelimit.Keys
	// Ready lists the readiness checks of /readyz by name.
	Ready map[string]func(context.Context) error
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// ShareSettings, when set, hands breaker settings changed through the
	// admin API to the other replicas.
	ShareSettings func(context.Context, breaker.ID, breaker.Settings) error
	// Async serves the asynchronous queries and the DLQ; nil answers 404.
	Async AsyncQueries
	// Memory holds the remembered answers that DELETE /v1/admin/memory
	// forgets (SPEC 14); nil when nothing is remembered.
	Memory *memory.Memory
	// Watches serves /v1/watches (SPEC 15); nil (watches off) answers 404.
	// A watch belongs to the API key that made it (Keys).
	Watches Watches
	// MaxInFlight bounds the requests served at once, health, readiness
	// and metrics excepted; DefaultMaxInFlight when zero (SPEC 9). A
	// request counts once its body has arrived (readBody).
	MaxInFlight int
	// ReadTimeout bounds the time a request's body takes to arrive
	// (readBody); DefaultReadTimeout when zero. HTTPServer takes the same
	// value for the headers.
	ReadTimeout time.Duration
	// Drift is every source's mapping health, for GET /v1/admin/sources;
	// its section is empty when nil.
	Drift *drift.Tracker
	// Tracer opens a server span per request, child of the caller's
	// traceparent as Propagator (W3C Trace Context when nil) reads it; no
	// spans when nil.
	Tracer     trace.Tracer
	Propagator propagation.TextMapPropagator
}

// Server serves the API.
type Server struct {
	opts   Options
	router *gin.Engine

	inFlight    atomic.Int64 // requests being served (limitInFlight)
	maxInFlight int64
	readTimeout time.Duration
	// draining is set once shutdown began (drain.go).
	draining atomic.Bool
	// traceFields are the header fields the propagator reads (trace.go).
	traceFields []string
}

// New builds the server and its routes.
func New(opts Options) *Server {
	// Log lines about a request carry its request_id (requestid.go).
	opts.Logger = correlation.Logger(opts.Logger)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	gin.SetMode(gin.ReleaseMode)
	s := &Server{opts: opts, router: gin.New(), maxInFlight: int64(opts.MaxInFlight), readTimeout: opts.ReadTimeout}
	if s.maxInFlight <= 0 {
		s.maxInFlight = DefaultMaxInFlight
	}
	if s.readTimeout <= 0 {
		s.readTimeout = DefaultReadTimeout
	}
	prop := opts.Propagator
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	for _, f := range prop.Fields() {
		s.traceFields = append(s.traceFields, textproto.CanonicalMIMEHeaderKey(f))
	}
	s.router.RedirectTrailingSlash = false
	s.router.RedirectFixedPath = false
	// Route on the escaped path, so that a parameter may hold an escaped
	// '/' (an infraction id such as "A-10442/2026" in a voucher link);
	// parameters are unescaped for the handlers.
	s.router.UseRawPath = true
	s.router.UnescapePathValues = true
	s.router.HandleMethodNotAllowed = true
	s.router.ContextWithFallback = true
	s.routes()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.router.ServeHTTP(w, withRequestID(w, r))
}

// HTTPServer returns an http.Server for the handler with timeouts set
// against slow clients (SPEC 9): a request's headers and body must arrive
// within readTimeout (DefaultReadTimeout when zero) of its start:
// late headers close the connection, a late body is answered 408 by the
// Server's readBody, which reads it under this deadline. Writes may take
// as long as the body and the longest query; a streamed answer sets its
// own write deadline, its query's budget (stream.go).
func HTTPServer(addr string, h http.Handler, readTimeout, maxDeadline time.Duration) *http.Server {
	if readTimeout <= 0 {
		readTimeout = DefaultReadTimeout
	}
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: readTimeout,
		// net/http lifts this deadline once the body is read, so it does
		// not bound the handler.
		ReadTimeout:    readTimeout,
		WriteTimeout:   readTimeout + maxDeadline + 10*time.Second,
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
	}
}
