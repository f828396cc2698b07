package server

import (
	"net/http"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// trace opens the request's server span (SPEC 10), child of the caller's
// W3C traceparent when it sent one. The span is named by method and route
// template (never the URL, whose path and query carry plates and ids);
// the handlers, log lines and portal calls see it in the request context.
func (s *Server) trace(c *gin.Context) {
	if s.opts.Tracer == nil {
		c.Next()
		return
	}
	prop := s.opts.Propagator
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	r := c.Request
	if _, off := s.opts.Tracer.(noop.Tracer); off && !carries(r.Header, s.traceFields) {
		// Tracing off and no trace to pass on to the portals: nothing
		// to do.
		c.Next()
		return
	}
	ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	route := c.FullPath()
	name := r.Method
	attrs := []attribute.KeyValue{attribute.String("http.request.method", r.Method)}
	if route != "" {
		name += " " + route
		attrs = append(attrs, attribute.String("http.route", route))
	}
	ctx, span := s.opts.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
	defer span.End()
	c.Request = r.WithContext(ctx)
	c.Next()
	status := c.Writer.Status()
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	if status >= 500 {
		span.SetStatus(codes.Error, "")
	}
}

// carries reports whether h holds any of the propagator's fields.
func carries(h http.Header, fields []string) bool {
	for _, f := range fields {
		if _, ok := h[f]; ok {
			return true
		}
	}
	return false
}
