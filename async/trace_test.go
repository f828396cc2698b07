package async

import (
	"net/url"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Each webhook delivery attempt is a client span (SPEC 10) whose
// traceparent reaches the receiver; the span names no part of the
// callback URL (its path or query may hold a token).
func TestDeliverySpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r := newRig(t, Options{MaxAttempts: 1, AllowPrivate: true, TracerProvider: tp})
	recv := newReceiver(t, r.clock, 0)
	r.submit(t, recv.srv.URL+"/hook/s3cr3t-token?k=AB123CD")
	eventually(t, "delivery", func() bool { return len(recv.hooks()) == 1 })
	var client []sdktrace.ReadOnlySpan
	eventually(t, "span ended", func() bool {
		client = client[:0]
		for _, s := range rec.Ended() {
			if s.SpanKind() == trace.SpanKindClient {
				client = append(client, s)
			}
		}
		return len(client) == 1
	})
	s := client[0]
	got := recv.hooks()[0].header.Get("traceparent")
	if want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; got != want {
		t.Errorf("receiver got traceparent %q, want %q", got, want)
	}
	if s.Name() != "POST" {
		t.Errorf("span named %q, want POST", s.Name())
	}
	u, _ := url.Parse(recv.srv.URL)
	for _, kv := range s.Attributes() {
		v := kv.Value.String()
		if strings.Contains(v, "s3cr3t") || strings.Contains(v, "AB123CD") || strings.Contains(v, "/hook") {
			t.Errorf("attribute %s = %s holds the callback URL", kv.Key, v)
		}
		if kv.Key == "server.address" && v != u.Hostname() {
			t.Errorf("server.address %s, want %s", v, u.Hostname())
		}
	}
}
