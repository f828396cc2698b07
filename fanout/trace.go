package fanout

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/tracing"
)

// lookupSpan is the span of one source's part of a query or voucher
// (SPEC 10). It names the source, the operation and the breaker key, and,
// once the part ended, its outcome, the problem type when it did not
// succeed and how many calls went to the portal. Nothing in it comes from
// the query: no plate, person id or URL. Under a context tracing.WithLink
// marked, and without a parent span, it links to the origin.
type lookupSpan struct {
	span     trace.Span
	attempts *int // counted when the span records
}

// startLookup opens the span of m's part of op under ctx.
func (e *Engine) startLookup(ctx context.Context, m Member, op aggregator.Operation) (context.Context, lookupSpan) {
	tracer := e.opts.Tracer
	if _, off := tracer.(noop.Tracer); off || tracer == nil {
		// Tracing off: the part has the caller's (non-recording) span,
		// and nothing is built for it.
		return ctx, lookupSpan{span: trace.SpanFromContext(ctx)}
	}
	start := []trace.SpanStartOption{trace.WithAttributes(
		tracing.AttrSource.String(m.Source.ID()),
		tracing.AttrOperation.String(string(op)),
		tracing.AttrBreakerKey.String(m.BreakerKey),
	)}
	// A lookup run later for work a request left (a retained source of an
	// asynchronous query) starts a trace of its own, linked to that request.
	if link, ok := tracing.LinkOption(ctx); ok {
		start = append(start, link)
	}
	ctx, span := tracer.Start(ctx, "lookup "+m.Source.ID(), start...)
	return ctx, lookupSpan{span: span, attempts: new(int)}
}

// counted wraps do so that the span counts the calls that went; a span
// that records nothing counts nothing.
func (l lookupSpan) counted(do attempt) attempt {
	if l.attempts == nil {
		return do
	}
	return func(ctx context.Context) (int, time.Duration, error) {
		*l.attempts++
		return do(ctx)
	}
}

// end records the outcome of the part and ends the span. problemType is
// the type of its problem, "" when it succeeded.
func (l lookupSpan) end(o aggregator.Outcome, problemType string) {
	if !l.span.IsRecording() {
		return
	}
	attempts := 0
	if l.attempts != nil {
		attempts = *l.attempts
	}
	attrs := []attribute.KeyValue{
		tracing.AttrOutcome.String(string(o)),
		tracing.AttrAttempts.Int(attempts),
	}
	if o.Skipped() {
		addSkipEvent(l.span, o)
	}
	if problemType != "" {
		attrs = append(attrs, tracing.AttrProblemType.String(problemType))
	}
	if o != aggregator.Succeeded && !o.Skipped() {
		l.span.SetStatus(codes.Error, string(o))
	}
	l.span.SetAttributes(attrs...)
	l.span.End()
}

// problemType is the type of p, or "" when there is none.
func problemType(p *problem.Problem) string {
	if p == nil {
		return ""
	}
	return p.Type
}

// skipEvent records on ctx's span that the breaker or the limiter kept a
// call (a retry, here) from going: outcome is SkippedOpen or
// SkippedRateLimited.
func skipEvent(ctx context.Context, o aggregator.Outcome) {
	addSkipEvent(trace.SpanFromContext(ctx), o)
}

func addSkipEvent(span trace.Span, o aggregator.Outcome) {
	reason := "circuit breaker open"
	if o == aggregator.SkippedRateLimited {
		reason = "rate limited"
	}
	span.AddEvent("aggregator.skipped", trace.WithAttributes(attribute.String("aggregator.reason", reason)))
}
