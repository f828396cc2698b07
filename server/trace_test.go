package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
)

// The server span is named by method and route template, never by the
// URL: a voucher request's span names the template, and nothing in its
// spans holds the infraction id. The voucher lookup is one span under it.
func TestServerSpanRouteTemplate(t *testing.T) {
	const infraction = "A-10442"
	var gotTraceparent string
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotTraceparent = r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/pdf")
		io.WriteString(w, "%PDF-1.4 voucher")
	}))
	t.Cleanup(portal.Close)
	cfg, err := config.Parse([]byte(`
defaults: {timeout: 2s, retry: {max_retries: 0}}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: `+portal.URL+`
    operations:
      by_domain: {path: "/actas?dominio={domain}"}
      voucher: {path: "/v/{infraction_id}"}
    response: {items: /actas, fields: {id: /nro}}
`), "trace.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	a, err := app.New(cfg, app.Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	srv := httptest.NewServer(a.Server)
	t.Cleanup(srv.Close)

	tests := []struct {
		path, wantName string
		wantLookup     bool
	}{
		{"/v1/sources/caba/infractions/" + infraction + "/voucher", "GET /v1/sources/:source/infractions/:infraction_id/voucher", true},
		{"/nowhere/" + infraction, "GET", false},
	}
	for _, tt := range tests {
		rec.Reset()
		resp, err := srv.Client().Get(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		var server, lookup, client sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			switch {
			case s.SpanKind() == trace.SpanKindServer:
				server = s
			case s.SpanKind() == trace.SpanKindClient:
				client = s
			case strings.HasPrefix(s.Name(), "lookup "):
				lookup = s
			}
			if strings.Contains(s.Name(), infraction) {
				t.Errorf("span name %q holds the infraction id", s.Name())
			}
			for _, kv := range s.Attributes() {
				if strings.Contains(kv.Value.String(), infraction) {
					t.Errorf("span %q: attribute %s holds the infraction id", s.Name(), kv.Key)
				}
			}
		}
		if server == nil {
			t.Fatalf("%s: no server span", tt.path)
		}
		if server.Name() != tt.wantName {
			t.Errorf("%s: server span %q, want %q", tt.path, server.Name(), tt.wantName)
		}
		if !tt.wantLookup {
			continue
		}
		if lookup == nil || client == nil {
			t.Fatalf("%s: lookup span %v, client span %v", tt.path, lookup, client)
		}
		if lookup.Parent().SpanID() != server.SpanContext().SpanID() || client.Parent().SpanID() != lookup.SpanContext().SpanID() {
			t.Errorf("spans not nested server > lookup > client")
		}
		if want := "00-" + client.SpanContext().TraceID().String() + "-" + client.SpanContext().SpanID().String() + "-01"; gotTraceparent != want {
			t.Errorf("portal got traceparent %q, want %q", gotTraceparent, want)
		}
		got := map[string]string{}
		for _, kv := range lookup.Attributes() {
			got[string(kv.Key)] = kv.Value.String()
		}
		if got["aggregator.operation"] != "voucher" || got["aggregator.outcome"] != "succeeded" || got["aggregator.attempts"] != "1" {
			t.Errorf("lookup attributes %v, want a voucher that succeeded in 1 attempt", got)
		}
	}
}
