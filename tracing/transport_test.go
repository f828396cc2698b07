package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

type templateKey struct{}

// byContext is a URLTemplateFunc that reads the template a test put in the
// context.
func byContext(ctx context.Context) (string, string, bool) {
	t, ok := ctx.Value(templateKey{}).(string)
	if !ok {
		return "", "", false
	}
	return "GET " + t, t, true
}

// With WithURLTemplate a client span is named "{method} {url.template}"
// and records url.template; a request whose template is not known is
// named by its method alone, without url.template.
func TestTransportURLTemplate(t *testing.T) {
	t.Parallel()
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer portal.Close()
	client, _, rec := tracedClient(t, WithURLTemplate(byContext))
	tests := []struct {
		ctx                context.Context
		wantName, wantTmpl string
	}{
		{context.WithValue(context.Background(), templateKey{}, "/actas/{domain}"), "GET /actas/{domain}", "/actas/{domain}"},
		{context.Background(), "GET", ""},
	}
	for _, tt := range tests {
		rec.Reset()
		req, _ := http.NewRequestWithContext(tt.ctx, http.MethodGet, portal.URL+"/actas/AB123CD?dominio=AB123CD", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		spans := rec.Ended()
		if len(spans) != 1 {
			t.Fatalf("%d spans, want 1", len(spans))
		}
		if got := spans[0].Name(); got != tt.wantName {
			t.Errorf("span named %q, want %q", got, tt.wantName)
		}
		var tmpl string
		for _, kv := range spans[0].Attributes() {
			if kv.Key == "url.template" {
				tmpl = kv.Value.AsString()
			}
		}
		if tmpl != tt.wantTmpl {
			t.Errorf("url.template %q, want %q", tmpl, tt.wantTmpl)
		}
	}
}

// A client span that starts a trace of its own under a context WithLink
// marked links to the origin; one under a span is its child, and has no
// link; an invalid origin marks nothing.
func TestTransportLink(t *testing.T) {
	t.Parallel()
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer portal.Close()
	client, tp, rec := tracedClient(t)

	origin := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x4b, 0xf9, 1}, SpanID: trace.SpanID{0x00, 0xf0, 2}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	linked := WithLink(context.Background(), origin)
	parentCtx, parent := tp.Tracer("test").Start(linked, "retained lookup")
	tests := []struct {
		name      string
		ctx       context.Context
		wantLinks int
	}{
		{"root under a link", linked, 1},
		{"child of a span", parentCtx, 0},
		{"no link", context.Background(), 0},
		{"an invalid origin", WithLink(context.Background(), trace.SpanContext{}), 0},
	}
	for _, tt := range tests {
		rec.Reset()
		req, _ := http.NewRequestWithContext(tt.ctx, http.MethodPost, portal.URL+"/hook", nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		spans := rec.Ended()
		if len(spans) != 1 {
			t.Fatalf("%s: %d spans, want 1", tt.name, len(spans))
		}
		s := spans[0]
		if got := len(s.Links()); got != tt.wantLinks {
			t.Fatalf("%s: %d links, want %d", tt.name, got, tt.wantLinks)
		}
		if tt.wantLinks == 0 {
			continue
		}
		if got := s.Links()[0].SpanContext; !got.Equal(origin) {
			t.Errorf("%s: linked to %v, want %v", tt.name, got, origin)
		}
		if s.Parent().IsValid() || s.SpanContext().TraceID() == origin.TraceID() {
			t.Errorf("%s: the span is in the origin's trace, want a trace of its own", tt.name)
		}
	}
	parent.End()
}

// TestTransportSaysWhetherItNamesRequests: without a provider the
// transport makes no spans, so callers need not name their requests.
func TestTransportSaysWhetherItNamesRequests(t *testing.T) {
	t.Parallel()
	template := WithURLTemplate(func(context.Context) (string, string, bool) { return "", "", false })
	for _, tt := range []struct {
		name string
		rt   http.RoundTripper
		want bool
	}{
		{"no provider", Transport(http.DefaultTransport, nil, nil, template), false},
		{"a provider", Transport(http.DefaultTransport, sdktrace.NewTracerProvider(), nil, template), true},
		{"a provider, no template", Transport(http.DefaultTransport, sdktrace.NewTracerProvider(), nil), false},
	} {
		n, ok := tt.rt.(interface{ NamesRequests() bool })
		if !ok || n.NamesRequests() != tt.want {
			t.Errorf("%s: NamesRequests = %v (implemented: %v), want %v", tt.name, ok && n.NamesRequests(), ok, tt.want)
		}
	}
}
