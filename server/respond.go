package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator/problem"
)

// writeJSON answers v as application/json, never to be sniffed as
// anything else (SPEC 9).
//
// The document is encoded whole before it is sent, with its
// Content-Length: a query's answer is larger than net/http's 2 KB buffer,
// which would otherwise send it chunked.
func writeJSON(c *gin.Context, status int, v any) {
	buf := jsonBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledJSON {
			buf.Reset()
			jsonBuffers.Put(buf)
		}
	}()
	c.Header("Content-Type", "application/json")
	c.Header("X-Content-Type-Options", "nosniff")
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		// Nothing was sent: the client gets a problem, not half a document.
		problem.Write(c.Writer, &problem.Problem{Type: "about:blank", Status: http.StatusInternalServerError, Title: "Internal Server Error",
			Detail: "The answer could not be encoded."}, nil)
		return
	}
	c.Header("Content-Length", strconv.Itoa(buf.Len()))
	c.Status(status)
	_, _ = c.Writer.Write(buf.Bytes())
}

// jsonBuffers hold documents being encoded; one grown past maxPooledJSON
// (a query with thousands of infractions) is left to the collector.
var jsonBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledJSON = 256 << 10

// noStore marks an answer that carries query data (personal data).
func noStore(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
}

// fail answers with p (or extra, a document embedding p) and stops.
func (s *Server) fail(c *gin.Context, p *problem.Problem, extra any) {
	if p.Instance == "" && c.Request.URL.Path != "" {
		p.Instance = c.Request.URL.Path
	}
	problem.Write(c.Writer, p, extra)
	c.Abort()
}

// failSlug answers with a problem of the catalogue.
func (s *Server) failSlug(c *gin.Context, slug problem.Slug, detail string) {
	s.fail(c, s.opts.Problems.New(slug, detail), nil)
}

func (s *Server) notFound(c *gin.Context) {
	if s.adminRefused(c) {
		return
	}
	s.failSlug(c, problem.NotFound, "No such resource.")
}

func (s *Server) methodNotAllowed(c *gin.Context) {
	if s.adminRefused(c) {
		return
	}
	s.failSlug(c, problem.MethodNotAllowed, fmt.Sprintf("%s is not allowed here.", c.Request.Method))
}

// adminRefused authenticates a request under /v1/admin (or /debug/pprof)
// that no route matched, as the admin routes do: without the admin token it
// gets the 401 (or, with no token configured, the 403) of a known admin
// route, so that an unauthenticated caller cannot tell which admin paths
// exist (SPEC 9). It reports whether it answered.
func (s *Server) adminRefused(c *gin.Context) bool {
	if p := c.Request.URL.Path; !isAdmin(p) && !isPprof(p) {
		return false
	}
	// The router has set Allow on a known path: it would tell the path exists.
	h := c.Writer.Header()
	allow := h.Values("Allow")
	h.Del("Allow")
	s.adminAuth(c) // on success it calls c.Next: nothing is left to run
	if c.IsAborted() {
		return true
	}
	if len(allow) > 0 {
		h["Allow"] = allow
	}
	return false
}

// recoverer turns a panic into a 500 problem that discloses nothing.
func (s *Server) recoverer(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			if err, ok := v.(error); ok && errors.Is(err, http.ErrAbortHandler) {
				panic(v)
			}
			s.opts.Logger.ErrorContext(c.Request.Context(), "panic in handler",
				"route", c.FullPath(), "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
			if !c.Writer.Written() {
				s.failSlug(c, problem.Internal, "")
			}
			c.Abort()
		}
	}()
	c.Next()
}

// accessLog logs each request by route pattern, never by its URL: query
// strings and paths carry plates and ids. Its duration is duration_ms, in
// milliseconds (with microseconds as decimals).
func (s *Server) accessLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	s.record(c, time.Since(start))
}

// record logs and counts an answer that took elapsed: accessLog's, and
// those given before it runs (a refused body, overloaded).
func (s *Server) record(c *gin.Context, elapsed time.Duration) {
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	s.opts.Logger.LogAttrs(c.Request.Context(), slog.LevelDebug, "request",
		slog.String("method", c.Request.Method), slog.String("route", route),
		slog.Int("status", c.Writer.Status()), slog.Float64("duration_ms", durationMS(elapsed)))
	if s.opts.Metrics != nil {
		s.opts.Metrics.HTTPRequest(c.Request.Context(), route, c.Request.Method, c.Writer.Status(), elapsed)
	}
}

// durationMS is d in milliseconds, to the microsecond.
func durationMS(d time.Duration) float64 {
	return float64(d.Microseconds()) / 1000
}
