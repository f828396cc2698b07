package sources_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/mapping"
	"github.com/multas/aggregator/tracing"
)

// What the traced requests carry and no span may: the looked-up values,
// an infraction id holding a plate, the credentials and what the portal
// sent back (a next-page URL, a cursor, a token, a session value).
const (
	tracePlate      = "AB123CD"
	traceCUIT       = "20314159269"
	traceDNI        = "31415926"
	traceInfraction = "ACTA-AB123CD-77"
	traceSecret     = "s3cr3t-client"
	traceToken      = "t0k3n-issued"
	traceSession    = "sess-v4lue"
)

// tracePortal is one fake portal serving every kind of request a Source
// makes, each in its own dialect, and keeping the traceparent of each.
type tracePortal struct {
	srv *httptest.Server

	mu           sync.Mutex
	traceparents []string
}

func newTracePortal(t *testing.T) *tracePortal {
	p := &tracePortal{}
	item := func(w http.ResponseWriter, next string) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"actas": [{"nro": "Q-1"}], "next": %q}`, next)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/v2/consulta/{domain}", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("domain") != tracePlate || r.FormValue("dominio") != tracePlate {
			http.Error(w, "bad lookup", http.StatusBadRequest)
			return
		}
		item(w, "")
	})
	// A lookup by person id is redirected within the origin: the second
	// hop's URL comes from the portal.
	mux.HandleFunc("GET /personas/{id}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/personas-v2/"+r.PathValue("id")+"?tipo="+r.URL.Query().Get("tipo"), http.StatusFound)
	})
	mux.HandleFunc("GET /personas-v2/{id}", func(w http.ResponseWriter, r *http.Request) { item(w, "") })
	// Pages linked by RFC 8288 Link headers whose URLs hold the plate.
	mux.HandleFunc("GET /actas/{domain}", func(w http.ResponseWriter, r *http.Request) {
		page, _ := strconv.Atoi(r.URL.Query().Get("page"))
		if page < 2 {
			page = 1
		}
		if page < 3 {
			w.Header().Set("Link", fmt.Sprintf(`</actas/%s?page=%d&dominio=%s>; rel="next"`, r.PathValue("domain"), page+1, tracePlate))
		}
		item(w, "")
	})
	// Pages chained by cursors that hold the plate, sent in the query.
	mux.HandleFunc("GET /cursor", func(w http.ResponseWriter, r *http.Request) {
		next := ""
		if r.URL.Query().Get("c") == "" {
			next = "c-" + tracePlate + "-2"
		}
		item(w, next)
	})
	mux.HandleFunc("GET /api/v2/actas/{id}/boleta", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		io.WriteString(w, "%PDF-1.4 "+r.PathValue("id"))
	})
	mux.HandleFunc("POST /oauth/token", func(w http.ResponseWriter, r *http.Request) {
		if _, secret, _ := r.BasicAuth(); secret != traceSecret {
			http.Error(w, "who?", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token": %q, "token_type": "bearer", "expires_in": 3600}`, traceToken)
	})
	mux.HandleFunc("GET /protegido/{domain}", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+traceToken {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		item(w, "")
	})
	mux.HandleFunc("GET /sesion/inicio", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: traceSession, Path: "/"})
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<html><body><form><input name="tok" value=%q></form></body></html>`, traceSession)
	})
	mux.HandleFunc("POST /sesion/consulta", func(w http.ResponseWriter, r *http.Request) {
		if r.FormValue("tok") != traceSession {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		item(w, "")
	})
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.traceparents = append(p.traceparents, r.Header.Get("traceparent"))
		p.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *tracePortal) received() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.traceparents)
}

// Every portal request a Source makes is a client span named by its method
// and configured path template, with url.template set to the template
// (SPEC 10): lookups by plate and by person id (and a redirect they
// follow), every page of a paginated lookup whatever the portal's next
// link or cursor, a voucher, an OAuth2 token request and a session page.
// No span's name, attribute or event holds the plate, the CUIT or DNI, the
// infraction id, a credential, a token, a session value or any part of a
// query string; each portal request got its own span's traceparent.
func TestClientSpansNamedByTemplate(t *testing.T) {
	t.Parallel()
	p := newTracePortal(t)
	byDomain := aggregator.Query{Domain: tracePlate}
	actas := func(op sources.OperationSpec) map[aggregator.Operation]sources.OperationSpec {
		return map[aggregator.Operation]sources.OperationSpec{aggregator.ByDomain: op}
	}
	tests := []struct {
		name string
		spec sources.Spec
		call func(context.Context, *sources.Source) error
		want []string // span names, in order
	}{
		{
			name: "lookup by plate, POST under a base path",
			spec: sources.Spec{BaseURL: p.srv.URL + "/api/v2/", Operations: actas(sources.OperationSpec{
				Method: http.MethodPost, Path: "/consulta/{domain}?dominio={domain}",
				Query: map[string]string{"formato": "json", "d": "{domain}"},
				Body:  sources.Body{Form: map[string]string{"dominio": "{domain}"}},
			})},
			want: []string{"POST /api/v2/consulta/{domain}"},
		},
		{
			name: "lookup by CUIT, redirected",
			spec: sources.Spec{BaseURL: p.srv.URL, Operations: map[aggregator.Operation]sources.OperationSpec{
				aggregator.ByID: {Path: "/personas/{id}?tipo={id_kind}"},
			}},
			call: func(ctx context.Context, s *sources.Source) error {
				_, err := s.Lookup(ctx, aggregator.Query{ID: traceCUIT, IDKind: aggregator.CUIT})
				return err
			},
			want: []string{"GET /personas/{id}", "GET /personas/{id}"},
		},
		{
			name: "lookup by DNI",
			spec: sources.Spec{BaseURL: p.srv.URL, Operations: map[aggregator.Operation]sources.OperationSpec{
				aggregator.ByID: {Path: "/personas-v2/{id}", Query: map[string]string{"dni": "{id}"}},
			}},
			call: func(ctx context.Context, s *sources.Source) error {
				_, err := s.Lookup(ctx, aggregator.Query{ID: traceDNI, IDKind: aggregator.DNI})
				return err
			},
			want: []string{"GET /personas-v2/{id}"},
		},
		{
			name: "pages by Link header",
			spec: sources.Spec{BaseURL: p.srv.URL, Operations: actas(sources.OperationSpec{Path: "/actas/{domain}"}),
				Pagination: sources.Pagination{Style: sources.LinkStyle, MaxPages: 5}},
			want: []string{"GET /actas/{domain}", "GET /actas/{domain}", "GET /actas/{domain}"},
		},
		{
			name: "pages by cursor",
			spec: sources.Spec{BaseURL: p.srv.URL, Operations: actas(sources.OperationSpec{Path: "/cursor?dominio={domain}&c={cursor}"}),
				Pagination: sources.Pagination{Style: sources.CursorStyle, Next: "/next", MaxPages: 5}},
			want: []string{"GET /cursor", "GET /cursor"},
		},
		{
			name: "voucher",
			spec: sources.Spec{BaseURL: p.srv.URL + "/api/v2", Operations: map[aggregator.Operation]sources.OperationSpec{
				aggregator.Voucher: {Path: "/actas/{infraction_id}/boleta"},
			}},
			call: func(ctx context.Context, s *sources.Source) error {
				v, err := s.Voucher(ctx, traceInfraction)
				if err != nil {
					return err
				}
				_, err = io.Copy(io.Discard, v.Body)
				v.Body.Close()
				return err
			},
			want: []string{"GET /api/v2/actas/{infraction_id}/boleta"},
		},
		{
			name: "OAuth2 token request, then the lookup",
			spec: sources.Spec{BaseURL: p.srv.URL, Operations: actas(sources.OperationSpec{Path: "/protegido/{domain}"}),
				Auth: sources.Auth{OAuth2: &sources.OAuth2{TokenURL: p.srv.URL + "/oauth/token?tenant=" + tracePlate,
					ClientID: "cliente", ClientSecret: traceSecret, Scopes: []string{"actas.read"}}}},
			want: []string{"POST /oauth/token", "GET /protegido/{domain}"},
		},
		{
			name: "session page, then the lookup",
			spec: sources.Spec{BaseURL: p.srv.URL + "/", Operations: actas(sources.OperationSpec{
				Method: http.MethodPost, Path: "/sesion/consulta",
				Body: sources.Body{Form: map[string]string{"dominio": "{domain}", "tok": "{session.tok}"}},
			}), Auth: sources.Auth{Session: &sources.Session{Path: "/sesion/inicio?lang=es&ref=" + tracePlate, Format: "html",
				Extract: map[string]string{"tok": "input[name=tok]@value"}}}},
			want: []string{"GET /sesion/inicio", "POST /sesion/consulta"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			tr := &http.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tracing.Transport(tr, tp, nil, tracing.WithURLTemplate(sources.URLTemplate))}
			spec := tt.spec
			spec.ID, spec.Jurisdiction = "caba", "CABA"
			spec.Response = mapping.Response{Items: mapping.Items{{Select: "/actas"}}, Fields: map[string]mapping.Field{"id": {Select: mapping.List{"/nro"}}}}
			src, err := sources.New(spec, client, nil)
			if err != nil {
				t.Fatal(err)
			}
			ctx, parent := tp.Tracer("test").Start(context.Background(), "lookup")
			call := tt.call
			if call == nil {
				call = func(ctx context.Context, s *sources.Source) error {
					_, err := s.Lookup(ctx, byDomain)
					return err
				}
			}
			if err := call(ctx, src); err != nil {
				t.Fatalf("call: %v", err)
			}
			parent.End()

			var names []string
			spanIDs := map[string]bool{}
			for _, s := range rec.Ended() {
				checkNothingExpanded(t, s)
				if s.SpanKind() != trace.SpanKindClient {
					continue
				}
				names = append(names, s.Name())
				spanIDs[s.SpanContext().SpanID().String()] = true
				method, tmpl, _ := strings.Cut(s.Name(), " ")
				got := map[string]string{}
				for _, kv := range s.Attributes() {
					got[string(kv.Key)] = kv.Value.String()
				}
				if got["url.template"] != tmpl || got["http.request.method"] != method {
					t.Errorf("span %q: url.template %q, http.request.method %q; want %q and %q",
						s.Name(), got["url.template"], got["http.request.method"], tmpl, method)
				}
				if s.Parent().SpanID() != parent.SpanContext().SpanID() {
					t.Errorf("span %q is not the child of the call's span", s.Name())
				}
			}
			if !slices.Equal(names, tt.want) {
				t.Errorf("client spans %q, want %q", names, tt.want)
			}
			// Each request of this call that reached the portal carried its
			// own span.
			var got []string
			for _, tp := range p.received() {
				if parts := strings.Split(tp, "-"); len(parts) == 4 && parts[1] == parent.SpanContext().TraceID().String() {
					got = append(got, parts[2])
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("the portal got %d requests of this trace, want %d", len(got), len(tt.want))
			}
			for _, id := range got {
				if !spanIDs[id] {
					t.Errorf("the portal got parent span %s, not one of the client spans %v", id, spanIDs)
				}
			}
		})
	}
}

// checkNothingExpanded fails when anything recorded of s holds a value of
// a request or of an answer, or a part of a query string.
func checkNothingExpanded(t *testing.T, s sdktrace.ReadOnlySpan) {
	t.Helper()
	secret := []string{tracePlate, strings.ToLower(tracePlate), traceCUIT, traceDNI, traceInfraction,
		traceSecret, traceToken, traceSession, "?", "dominio", "tenant", "lang=", "page=", "Q-1"}
	texts := []string{s.Name()}
	for _, kv := range s.Attributes() {
		texts = append(texts, string(kv.Key), kv.Value.String())
	}
	for _, e := range s.Events() {
		texts = append(texts, e.Name)
		for _, kv := range e.Attributes {
			texts = append(texts, string(kv.Key), kv.Value.String())
		}
	}
	for _, text := range texts {
		for _, bad := range secret {
			if strings.Contains(text, bad) {
				t.Errorf("span %q records %q, which holds %q", s.Name(), text, bad)
			}
		}
	}
}
