package async

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/multas/aggregator/tracing"
)

// TraceContext is the W3C trace context of the request that created an
// asynchronous query, kept with the query, its delivery and its DLQ entry:
// the work done for it later, maybe after restarts and on another replica,
// starts traces of its own that link to that request's span (SPEC 10;
// OpenTelemetry's way for work that outlives its request). The zero value
// is "not traced".
type TraceContext struct {
	Parent string `json:"traceparent"`
	State  string `json:"tracestate,omitempty"`
}

// traceContextOf is the trace context of ctx's span, zero when there is
// none. It is kept in the W3C form whatever propagator the deployment
// sends to portals and receivers.
func traceContextOf(ctx context.Context) TraceContext {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	return TraceContext{Parent: c["traceparent"], State: c["tracestate"]}
}

// spanContext is the span tc names; not valid when tc is zero or unsound.
func (tc TraceContext) spanContext() trace.SpanContext {
	if tc.Parent == "" {
		return trace.SpanContext{}
	}
	c := propagation.MapCarrier{"traceparent": tc.Parent}
	if tc.State != "" {
		c["tracestate"] = tc.State
	}
	return trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), c))
}

// sound reports whether tc is zero or exactly what traceContextOf writes
// for the span it names: a value read back from Redis is untrusted (SPEC
// 9), and anything else (another version or flags, a tracestate that does
// not parse, or one too long) is treated as absent.
func (tc TraceContext) sound() bool {
	if tc == (TraceContext{}) {
		return true
	}
	if len(tc.State) > maxText {
		return false
	}
	sc := tc.spanContext()
	return sc.IsValid() && traceContextOf(trace.ContextWithRemoteSpanContext(context.Background(), sc)) == tc
}

// link returns ctx marked so that the spans that start traces of their own
// under it link to the span tc names (tracing.WithLink); ctx itself when
// tc names none.
func (tc TraceContext) link(ctx context.Context) context.Context {
	return tracing.WithLink(ctx, tc.spanContext())
}
