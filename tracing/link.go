package tracing

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

type linkKey struct{}

// WithLink returns ctx carrying origin: the span context of the request
// that started the work done under ctx, work that outlives it (the webhook
// deliveries and the retained source calls of an asynchronous query, SPEC
// 3.4, maybe much later and on another replica). Each span started under
// ctx without a parent span, and so at the root of a trace of its own,
// gets a link to origin: OpenTelemetry's way to relate deferred work to
// its cause. Spans under such a span are in its trace already, and get no
// link of their own. An invalid origin leaves ctx as it is.
func WithLink(ctx context.Context, origin trace.SpanContext) context.Context {
	if !origin.IsValid() {
		return ctx
	}
	return context.WithValue(ctx, linkKey{}, origin)
}

// LinkOption is the start option of a span started under ctx that links it
// to the origin WithLink put in ctx; ok is false when there is none, or
// when ctx holds a span, whose child the new span is.
func LinkOption(ctx context.Context) (_ trace.SpanStartOption, ok bool) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		return nil, false
	}
	origin, ok := ctx.Value(linkKey{}).(trace.SpanContext)
	if !ok {
		return nil, false
	}
	return trace.WithLinks(trace.Link{SpanContext: origin}), true
}
