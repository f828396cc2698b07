// Package tracing sets up OpenTelemetry tracing from the standard
// environment variables (SPEC 10, Tracing) and carries the small pieces
// the rest of the aggregator shares: a client transport that opens one
// span per request without ever recording its URL, the trace id for log
// lines, and the attribute names of a source lookup.
//
// Nothing here is global: the TracerProvider and the propagator are
// handed to whoever needs them (app.Options).
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of the aggregator's spans.
const Name = "github.com/multas/aggregator"

// DefaultServiceName is service.name when OTEL_SERVICE_NAME is unset.
const DefaultServiceName = "aggregator"

// Tracing is what Setup built: a provider (a no-op one when tracing is
// off), the W3C propagator, and Shutdown, which flushes the spans still
// queued. Enabled says whether spans are exported at all.
type Tracing struct {
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
	Enabled    bool
	Shutdown   func(context.Context) error
}

// Enabled reports whether the environment turns tracing on: an OTLP
// endpoint is set, and neither OTEL_SDK_DISABLED=true nor
// OTEL_TRACES_EXPORTER=none turns it off.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup builds tracing from the environment read through getenv. When it
// is off, the provider is a no-op and Shutdown does nothing; the
// propagator is always W3C Trace Context, so that a caller's traceparent
// still reaches the portals. The OTLP exporters read their own standard
// variables (headers, timeout, TLS, compression) from the process
// environment; OTEL_BSP_* tune the batch processor.
func Setup(ctx context.Context, getenv func(string) string) (*Tracing, error) {
	t := &Tracing{
		Provider:   noop.NewTracerProvider(),
		Propagator: propagation.TraceContext{},
		Shutdown:   func(context.Context) error { return nil },
	}
	if !Enabled(getenv) {
		return t, nil
	}
	if e := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER")); e != "" && e != "otlp" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER %q: only otlp and none are supported", e)
	}
	sampler, err := Sampler(getenv)
	if err != nil {
		return nil, err
	}
	exp, err := exporter(ctx, getenv)
	if err != nil {
		return nil, err
	}
	name := getenv("OTEL_SERVICE_NAME")
	if name == "" {
		name = DefaultServiceName
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithSampler(sampler),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
	)
	t.Provider, t.Enabled, t.Shutdown = tp, true, tp.Shutdown
	return t, nil
}

func exporter(ctx context.Context, getenv func(string) string) (sdktrace.SpanExporter, error) {
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	switch protocol {
	case "", "http/protobuf":
		u, err := endpoint(getenv, "/v1/traces")
		if err != nil {
			return nil, err
		}
		return otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u))
	case "grpc":
		u, err := endpoint(getenv, "")
		if err != nil {
			return nil, err
		}
		return otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(u))
	}
	return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL %q: want http/protobuf or grpc", protocol)
}

// endpoint is the collector's URL as getenv tells it (the exporters would
// otherwise read the process environment, and fall back to localhost on
// a URL they cannot read): OTEL_EXPORTER_OTLP_TRACES_ENDPOINT as is, else
// OTEL_EXPORTER_OTLP_ENDPOINT with signalPath appended, as the OTLP
// specification says.
func endpoint(getenv func(string) string, signalPath string) (string, error) {
	name := "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	v := getenv(name)
	if v == "" {
		name = "OTEL_EXPORTER_OTLP_ENDPOINT"
		v = getenv(name)
	} else {
		signalPath = ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%s: want an http:// or https:// URL", name)
	}
	if signalPath != "" {
		u.Path = strings.TrimSuffix(u.Path, "/") + signalPath
	}
	return u.String(), nil
}

// Sampler is the sampler OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG
// name; parentbased_always_on when unset, as the specification says.
func Sampler(getenv func(string) string) (sdktrace.Sampler, error) {
	name := strings.ToLower(strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER")))
	arg := strings.TrimSpace(getenv("OTEL_TRACES_SAMPLER_ARG"))
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		r, err := strconv.ParseFloat(arg, 64)
		if err != nil || r < 0 || r > 1 {
			return 0, errors.New("OTEL_TRACES_SAMPLER_ARG: want a ratio between 0 and 1")
		}
		return r, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		r, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(r), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(r)), nil
	}
	return nil, fmt.Errorf("OTEL_TRACES_SAMPLER %q is not supported", name)
}

// Tracer is the aggregator's tracer from tp, or a no-op one when tp is nil.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(Name)
}

// LogAttrs adds trace_id to a log record whose context holds a valid span
// (a correlation.AttrsFunc).
func LogAttrs(ctx context.Context) []slog.Attr {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return nil
	}
	return []slog.Attr{slog.String("trace_id", sc.TraceID().String())}
}

// The attributes of a source lookup span (SPEC 10).
const (
	AttrSource      = attribute.Key("aggregator.source")
	AttrOperation   = attribute.Key("aggregator.operation")
	AttrBreakerKey  = attribute.Key("aggregator.breaker_key")
	AttrOutcome     = attribute.Key("aggregator.outcome")
	AttrProblemType = attribute.Key("aggregator.problem_type")
	AttrAttempts    = attribute.Key("aggregator.attempts")
)
