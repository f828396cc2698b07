package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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
	srv, rec := tracedServer(t, `
defaults: {timeout: 2s, retry: {max_retries: 0}}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: `+portal.URL+`
    operations:
      by_domain: {path: "/actas?dominio={domain}"}
      voucher: {path: "/v/{infraction_id}"}
    response: {items: /actas, fields: {id: /nro}}
`)

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

// An asynchronous query accepted under a caller's traceparent is delivered
// later in a trace of its own: the delivery attempt's client span links to
// the server span of POST /v1/queries, and the receiver gets the attempt's
// traceparent, not the request's.
func TestAsyncDeliveryLinksToItsRequest(t *testing.T) {
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"actas": [{"nro": "Q-1"}]}`)
	}))
	t.Cleanup(portal.Close)
	hooks := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hooks <- r.Header.Get("traceparent"):
		default:
		}
	}))
	t.Cleanup(receiver.Close)
	srv, rec := tracedServer(t, `
defaults: {timeout: 2s, retry: {max_retries: 0}}
webhooks: {allow_private: true}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: `+portal.URL+`
    operations: {by_domain: {path: "/actas?dominio={domain}"}}
    response: {items: /actas, fields: {id: /nro}}
`)

	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/queries",
		strings.NewReader(`{"domain": "AB123CD", "callback_url": "`+receiver.URL+`/hook"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /v1/queries: %d", resp.StatusCode)
	}
	var got string
	select {
	case got = <-hooks:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery")
	}
	var server, attempt sdktrace.ReadOnlySpan
	deadline := time.Now().Add(10 * time.Second)
	for attempt == nil && time.Now().Before(deadline) {
		for _, s := range rec.Ended() {
			switch {
			case s.SpanKind() == trace.SpanKindServer && s.Name() == "POST /v1/queries":
				server = s
			case s.SpanKind() == trace.SpanKindClient && s.Name() == "POST":
				attempt = s
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	if server == nil || attempt == nil {
		t.Fatalf("server span %v, delivery span %v", server, attempt)
	}
	if server.SpanContext().TraceID().String() != traceID {
		t.Errorf("the server span is not in the caller's trace")
	}
	if attempt.Parent().IsValid() || attempt.SpanContext().TraceID() == server.SpanContext().TraceID() {
		t.Errorf("the delivery attempt is in the request's trace, want one of its own")
	}
	sc := server.SpanContext()
	if links := attempt.Links(); len(links) != 1 || links[0].SpanContext.TraceID() != sc.TraceID() || links[0].SpanContext.SpanID() != sc.SpanID() {
		t.Errorf("delivery attempt links %v, want one to the server span %v", links, server.SpanContext())
	}
	if want := "00-" + attempt.SpanContext().TraceID().String() + "-" + attempt.SpanContext().SpanID().String() + "-01"; got != want {
		t.Errorf("the receiver got traceparent %q, want the attempt's %q", got, want)
	}
}

// tracedServer serves an aggregator of the configuration text whose spans
// go to the returned recorder.
func tracedServer(t *testing.T, text string) (*httptest.Server, *tracetest.SpanRecorder) {
	t.Helper()
	cfg, err := config.Parse([]byte(text), "trace.yaml", nil)
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
	return srv, rec
}
