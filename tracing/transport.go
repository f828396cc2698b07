package tracing

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/multas/aggregator/internal/h1"
)

// Transport opens one client span per request on next and sends the
// span's traceparent along. The span records only the method, the
// server's address and port, the answer's status and, with
// WithURLTemplate, the request's URL template: never the URL, whose path
// or query may hold a plate, a person id or a token (SPEC 10). It is named
// by the method and the template ("POST /consulta", as the HTTP semantic
// conventions say), or by the method alone when no template is known. A
// span that starts a trace of its own under a context WithLink marked
// links to that context's origin. With a nil provider it adds the header
// only.
func Transport(next http.RoundTripper, tp trace.TracerProvider, prop propagation.TextMapPropagator, opts ...Option) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	t := &transport{next: next, tracer: Tracer(tp), prop: prop, off: isNoop(tp)}
	for _, o := range opts {
		o(t)
	}
	return t
}

// isNoop reports whether tp makes no spans at all.
func isNoop(tp trace.TracerProvider) bool {
	_, ok := tp.(noop.TracerProvider)
	return tp == nil || ok
}

// An Option configures a Transport.
type Option func(*transport)

// URLTemplateFunc reports the URL template of the request made under ctx:
// name, the span's name (the method and the template, "GET
// /actas/{domain}"), and template, the path template alone (url.template,
// "/actas/{domain}"). ok is false when it does not know the request. It
// runs on every request: it must be cheap, and what it returns must come
// from configuration, never from the request's values.
type URLTemplateFunc func(ctx context.Context) (name, template string, ok bool)

// WithURLTemplate names each client span by what f reports for its
// request's context, and records the template as url.template.
func WithURLTemplate(f URLTemplateFunc) Option {
	return func(t *transport) { t.template = f }
}

type transport struct {
	next     http.RoundTripper
	tracer   trace.Tracer
	prop     propagation.TextMapPropagator
	template URLTemplateFunc // nil: spans named by the method alone
	off      bool            // no provider: no spans, only the caller's traceparent
}

// CloseIdleConnections closes the next transport's idle connections.
func (t *transport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// WithTLS traces the calls of a copy of the next transport configured by
// apply (a source with tls settings).
func (t *transport) WithTLS(apply func(*tls.Config)) http.RoundTripper {
	next, ok := h1.WithTLS(t.next, apply)
	if !ok {
		return t
	}
	c := *t
	c.next = next
	return &c
}

// NamesRequests reports whether the transport reads its requests' URL
// templates (WithURLTemplate): not without a provider, where it makes no
// spans.
func (t *transport) NamesRequests() bool { return !t.off && t.template != nil }

// Unwrap returns the transport under the tracing one.
func (t *transport) Unwrap() http.RoundTripper { return t.next }

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	if t.off {
		// Without spans of its own, the transport has nothing to add
		// unless the caller's context carries a trace to pass on.
		if !trace.SpanContextFromContext(ctx).IsValid() {
			return t.next.RoundTrip(r)
		}
		r = r.Clone(ctx)
		t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
		return t.next.RoundTrip(r)
	}
	name := r.Method
	// One allocation for every attribute the span may get at its start.
	attrs := make([]attribute.KeyValue, 1, 4)
	attrs[0] = semconv.HTTPRequestMethodKey.String(r.Method)
	if t.template != nil {
		if n, tmpl, ok := t.template(ctx); ok {
			name = n
			attrs = append(attrs, semconv.URLTemplate(tmpl))
		}
	}
	if r.URL != nil {
		attrs = append(attrs, semconv.ServerAddress(r.URL.Hostname()))
		if p, ok := port(r.URL.Scheme, r.URL.Port()); ok {
			attrs = append(attrs, semconv.ServerPort(p))
		}
	}
	start := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...)}
	if link, ok := LinkOption(ctx); ok {
		start = append(start, link)
	}
	ctx, span := t.tracer.Start(ctx, name, start...)
	defer span.End()
	r = r.Clone(ctx) // a RoundTripper must not change its caller's request
	t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		span.SetAttributes(semconv.ErrorTypeKey.String(errorType(err)))
		span.SetStatus(codes.Error, "")
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "")
	}
	return resp, nil
}

// port is the server port of a URL: its own, else its scheme's.
func port(scheme, p string) (int, bool) {
	switch {
	case p != "":
		n, err := strconv.Atoi(p)
		return n, err == nil
	case scheme == "http":
		return 80, true
	case scheme == "https":
		return 443, true
	}
	return 0, false
}

// errorType names the kind of a transport failure without its text, which
// may quote the URL.
func errorType(err error) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "connection"
}
