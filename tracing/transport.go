package tracing

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Transport opens one client span per request on next and sends the
// span's traceparent along. The span is named by the method alone and
// records only the method, the server's address and port and the answer's
// status: never the URL, whose path or query may hold a plate, a person
// id or a token (SPEC 10). With a nil provider it adds the header only.
func Transport(next http.RoundTripper, tp trace.TracerProvider, prop propagation.TextMapPropagator) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	if prop == nil {
		prop = propagation.TraceContext{}
	}
	return &transport{next: next, tracer: Tracer(tp), prop: prop}
}

type transport struct {
	next   http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// Unwrap returns the transport under the tracing one.
func (t *transport) Unwrap() http.RoundTripper { return t.next }

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	attrs := []attribute.KeyValue{attribute.String("http.request.method", r.Method)}
	if r.URL != nil {
		host, port := r.URL.Hostname(), r.URL.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[r.URL.Scheme]
		}
		attrs = append(attrs, attribute.String("server.address", host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attribute.Int("server.port", p))
		}
	}
	ctx, span := t.tracer.Start(r.Context(), r.Method, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	defer span.End()
	r = r.Clone(ctx) // a RoundTripper must not change its caller's request
	t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		span.SetAttributes(attribute.String("error.type", errorType(err)))
		span.SetStatus(codes.Error, "")
		return resp, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetAttributes(attribute.String("error.type", strconv.Itoa(resp.StatusCode)))
		span.SetStatus(codes.Error, "")
	}
	return resp, nil
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
