package tracing

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func env(kv map[string]string) func(string) string {
	return func(k string) string { return kv[k] }
}

func TestEnabled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"nothing set", nil, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, true},
		{"sdk disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{"sdk disabled, any case", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, false},
		{"sdk not disabled", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "false"}, true},
		{"exporter none", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "none"}, false},
		{"exporter otlp", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_TRACES_EXPORTER": "otlp"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := Enabled(env(tt.env)); got != tt.want {
				t.Errorf("Enabled = %v, want %v", got, tt.want)
			}
		})
	}
}

// Setup, off or on: off is a no-op provider whose Shutdown does nothing;
// on builds the exporter of the protocol asked for; bad values are errors.
func TestSetup(t *testing.T) {
	const ep = "http://127.0.0.1:1"
	tests := []struct {
		name        string
		env         map[string]string
		wantEnabled bool
		wantErr     string
	}{
		{"off", nil, false, ""},
		{"http/protobuf by default", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep}, true, ""},
		{"grpc", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, true, ""},
		{"traces protocol wins", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "bogus",
			"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, true, ""},
		{"unknown protocol", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"}, false, "OTEL_EXPORTER_OTLP_PROTOCOL"},
		{"unknown exporter", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_EXPORTER": "zipkin"}, false, "OTEL_TRACES_EXPORTER"},
		{"endpoint not a URL", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, false, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"traces endpoint not a URL", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "::"}, false, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"},
		{"grpc endpoint not a URL", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "ftp://c", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false, "OTEL_EXPORTER_OTLP_ENDPOINT"},
		{"bad sampler", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": ep, "OTEL_TRACES_SAMPLER": "sometimes"}, false, "OTEL_TRACES_SAMPLER"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := Setup(context.Background(), env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Setup error %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tr.Enabled != tt.wantEnabled {
				t.Errorf("Enabled = %v, want %v", tr.Enabled, tt.wantEnabled)
			}
			_, isSDK := tr.Provider.(*sdktrace.TracerProvider)
			if isSDK != tt.wantEnabled {
				t.Errorf("provider %T, enabled %v", tr.Provider, tt.wantEnabled)
			}
			if _, ok := tr.Propagator.(propagation.TraceContext); !ok {
				t.Errorf("propagator %T, want W3C TraceContext", tr.Propagator)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := tr.Shutdown(ctx); err != nil { // nothing queued: nothing to send
				t.Errorf("Shutdown: %v", err)
			}
		})
	}
}

// OTEL_TRACES_SAMPLER and its argument pick the sampler.
func TestSampler(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sampler, arg string
		want         string // the sampler's Description
		wantErr      bool
	}{
		{"", "", "ParentBased{root:AlwaysOnSampler,", false},
		{"parentbased_always_on", "", "ParentBased{root:AlwaysOnSampler,", false},
		{"always_on", "", "AlwaysOnSampler", false},
		{"always_off", "", "AlwaysOffSampler", false},
		{"parentbased_always_off", "", "ParentBased{root:AlwaysOffSampler,", false},
		{"traceidratio", "0.25", "TraceIDRatioBased{0.25}", false},
		{"traceidratio", "", "TraceIDRatioBased{1}", false},
		{"parentbased_traceidratio", "0.5", "ParentBased{root:TraceIDRatioBased{0.5},", false},
		{"traceidratio", "2", "", true},
		{"traceidratio", "half", "", true},
		{"jaeger_remote", "", "", true},
	}
	for _, tt := range tests {
		s, err := Sampler(env(map[string]string{"OTEL_TRACES_SAMPLER": tt.sampler, "OTEL_TRACES_SAMPLER_ARG": tt.arg}))
		if tt.wantErr {
			if err == nil {
				t.Errorf("%s %s: no error", tt.sampler, tt.arg)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s %s: %v", tt.sampler, tt.arg, err)
			continue
		}
		if got := s.Description(); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%s %s: %s, want %s…", tt.sampler, tt.arg, got, tt.want)
		}
	}
}

// The client transport opens one client span per request, sends its
// traceparent, and records no part of the URL.
func TestTransport(t *testing.T) {
	t.Parallel()
	var got string
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("traceparent")
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer portal.Close()
	client, tp, rec := tracedClient(t)

	ctx, parent := tp.Tracer("test").Start(context.Background(), "parent")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, portal.URL+"/actas/AB123CD?dni=20123456&token=s3cret", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	parent.End()
	if req.Header.Get("traceparent") != "" {
		t.Errorf("the caller's request was changed")
	}

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans, want 2", len(spans))
	}
	s := spans[0]
	if s.Name() != "GET" || s.SpanKind() != trace.SpanKindClient {
		t.Errorf("span %q kind %v, want GET client", s.Name(), s.SpanKind())
	}
	if s.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("client span is not the child of the caller's span")
	}
	if want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; got != want {
		t.Errorf("portal got traceparent %q, want %q", got, want)
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes() {
		attrs[string(kv.Key)] = kv.Value.String()
		for _, bad := range []string{"AB123CD", "20123456", "s3cret", "/actas"} {
			if strings.Contains(kv.Value.String(), bad) || strings.Contains(string(kv.Key), bad) {
				t.Errorf("attribute %s = %s holds %q", kv.Key, kv.Value.String(), bad)
			}
		}
	}
	for k, want := range map[string]string{"http.request.method": "GET", "server.address": "127.0.0.1", "http.response.status_code": "503"} {
		if attrs[k] != want {
			t.Errorf("%s = %q, want %q", k, attrs[k], want)
		}
	}
	if len(attrs) != 5 { // those, server.port and error.type
		t.Errorf("attributes %v, want method, address, port, status and error.type only", attrs)
	}
}

// LogAttrs adds trace_id only when the context holds a span.
func TestLogAttrs(t *testing.T) {
	t.Parallel()
	if got := LogAttrs(context.Background()); got != nil {
		t.Errorf("LogAttrs without a span = %v", got)
	}
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "x")
	defer span.End()
	got := LogAttrs(ctx)
	if want := slog.String("trace_id", span.SpanContext().TraceID().String()); len(got) != 1 || !got[0].Equal(want) {
		t.Errorf("LogAttrs = %v, want %v", got, want)
	}
}

// The collector's URL: the traces variable as is, the generic one with
// /v1/traces appended for OTLP/HTTP and nothing for gRPC.
func TestEndpoint(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env        map[string]string
		signalPath string
		want       string
	}{
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, "/v1/traces", "http://c:4318/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "https://c/otlp/"}, "/v1/traces", "https://c/otlp/v1/traces"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317"}, "", "http://c:4317"},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:9/x"}, "/v1/traces", "http://t:9/x"},
	}
	for _, tt := range tests {
		got, err := endpoint(env(tt.env), tt.signalPath)
		if err != nil || got != tt.want {
			t.Errorf("endpoint(%v) = %q, %v; want %q", tt.env, got, err, tt.want)
		}
	}
}

// tracedClient is a client whose requests go through Transport with opts,
// their spans to the returned recorder.
func tracedClient(t *testing.T, opts ...Option) (*http.Client, *sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: Transport(tr, tp, nil, opts...)}, tp, rec
}
