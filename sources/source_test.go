package sources

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // America/Argentina/Buenos_Aires on every machine

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/mapping"
)

// plate is the query value of these tests; it must never appear in an
// error's text.
const plate = "AB123CD"

var domainQuery = aggregator.Query{Domain: plate}

// portal starts a fake portal serving h.
func portal(t testing.TB, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// testSpec is a CABA-like source at base.
func testSpec(base string) Spec {
	return Spec{
		ID:           "caba",
		Jurisdiction: "Ciudad de Buenos Aires",
		BaseURL:      base,
		Operations: map[aggregator.Operation]OperationSpec{
			aggregator.ByDomain: {Method: "GET", Path: "/api/v2/actas?dominio={domain}"},
			aggregator.ByID:     {Method: "GET", Path: "/api/v2/actas?cuit={id}", Accepts: []aggregator.IDKind{aggregator.CUIT}},
			aggregator.Voucher:  {Method: "GET", Path: "/api/v2/actas/{infraction_id}/boleta"},
		},
		Response: mapping.Response{
			Items: items("/resultado/actas"),
			Fields: fields(map[string]string{
				"id": "/nro", "date": "/fecha", "description": "/detalle", "place": "/lugar",
				"amount": "/monto", "currency": "/moneda", "status": "/estado",
			}),
			StatusMap: map[string]string{"IMPAGA": "unpaid", "PAGADA": "paid", "EN GESTION": "in_process"},
		},
		Location: mustLocation("America/Argentina/Buenos_Aires"),
		Currency: "ARS",
	}
}

func mustLocation(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

// newSource builds a Source from spec, failing the test on error.
func newSource(t testing.TB, spec Spec, client *http.Client) *Source {
	t.Helper()
	s, err := New(spec, client, func() time.Time { return time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC) })
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

const oneItem = `{"resultado": {"actas": [{"nro": "Q-10442", "fecha": "2026-03-14T09:12:00",
	"detalle": "Exceso de velocidad", "lugar": "Av. Lugones km 4", "monto": "185000",
	"estado": "IMPAGA"}]}}`

func TestLookupSuccess(t *testing.T) {
	t.Parallel()
	srv := portal(t, func(w http.ResponseWriter, r *http.Request) {
		if got := r.URL.Query().Get("dominio"); got != plate {
			t.Errorf("dominio = %q, want %q", got, plate)
		}
		if got := r.Header.Get("Accept"); got != "application/json" {
			t.Errorf("Accept = %q, want application/json", got)
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, oneItem)
	})
	s := newSource(t, testSpec(srv.URL), srv.Client())
	ans, err := s.Lookup(context.Background(), domainQuery)
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	want := []aggregator.Infraction{{
		Source: "caba", Jurisdiction: "Ciudad de Buenos Aires", ID: "Q-10442",
		Date: "2026-03-14T09:12:00-03:00", Description: "Exceso de velocidad",
		Place: "Av. Lugones km 4", Amount: "185000.00", Currency: "ARS",
		Status: aggregator.Unpaid, StatusRaw: "IMPAGA",
		Voucher: "/v1/sources/caba/infractions/Q-10442/voucher",
	}}
	if !reflect.DeepEqual(ans.Infractions, want) {
		t.Errorf("Infractions =\n%+v\nwant\n%+v", ans.Infractions, want)
	}
	if ans.Pause != 0 {
		t.Errorf("Pause = %v, want 0", ans.Pause)
	}
}

// TestLookupClassification covers every way a portal can answer.
func TestLookupClassification(t *testing.T) {
	t.Parallel()
	big := `{"resultado": {"actas": [], "pad": "` + strings.Repeat("x", 300) + `"}}`
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		wantErr   bool
		outcome   aggregator.Outcome
		status    int
		pause     time.Duration
		wantCount int
	}{
		{name: "200", handler: body(200, oneItem), wantCount: 1},
		{name: "404 is no infractions", handler: body(404, `{"error": "no encontrado"}`)},
		{name: "204 is no infractions", handler: body(204, "")},
		{name: "null items", handler: body(200, `{"resultado": {"actas": null}}`)},
		{name: "byte order mark", handler: body(200, "\uFEFF"+oneItem), wantCount: 1},
		{name: "null parent", handler: body(200, `{"resultado": null}`)},
		{name: "empty items", handler: body(200, `{"resultado": {"actas": []}}`)},
		{
			name:    "200 with exhausted quota",
			handler: withHeader(body(200, oneItem), "RateLimit", `"default";r=0;t=7`),
			pause:   7 * time.Second, wantCount: 1,
		},
		{
			name: "200 with quota left",
			handler: withHeader(withHeader(body(200, oneItem), "RateLimit", `"default";r=3;t=7`),
				"Retry-After", "99"),
			wantCount: 1,
		},
		{
			name: "404 with exhausted quota and Retry-After",
			handler: withHeader(withHeader(body(404, ""), "RateLimit", `"default";r=0;t=7`),
				"Retry-After", "11"),
			pause: 11 * time.Second,
		},
		{
			name:    "429 with Retry-After",
			handler: withHeader(body(429, "slow down"), "Retry-After", "30"),
			wantErr: true, outcome: aggregator.RateLimited, status: 429, pause: 30 * time.Second,
		},
		{
			name:    "429 with HTTP-date Retry-After",
			handler: withHeader(body(429, ""), "Retry-After", "Sat, 14 Mar 2026 12:00:45 GMT"),
			wantErr: true, outcome: aggregator.RateLimited, status: 429, pause: 45 * time.Second,
		},
		{
			name:    "429 with RateLimit",
			handler: withHeader(body(429, ""), "RateLimit", `"default";r=0;t=12`),
			wantErr: true, outcome: aggregator.RateLimited, status: 429, pause: 12 * time.Second,
		},
		{
			name:    "429 Retry-After takes precedence",
			handler: withHeader(withHeader(body(429, ""), "RateLimit", `"default";r=0;t=12`), "Retry-After", "3"),
			wantErr: true, outcome: aggregator.RateLimited, status: 429, pause: 3 * time.Second,
		},
		{
			name:    "429 bare",
			handler: body(429, ""),
			wantErr: true, outcome: aggregator.RateLimited, status: 429,
		},
		{
			name:    "503 with Retry-After",
			handler: withHeader(body(503, "maintenance"), "Retry-After", "17"),
			wantErr: true, outcome: aggregator.Unavailable, status: 503, pause: 17 * time.Second,
		},
		{name: "500", handler: body(500, "oops"), wantErr: true, outcome: aggregator.Unavailable, status: 500},
		{name: "502", handler: body(502, ""), wantErr: true, outcome: aggregator.Unavailable, status: 502},
		{name: "504", handler: body(504, ""), wantErr: true, outcome: aggregator.Unavailable, status: 504},
		{name: "501", handler: body(501, ""), wantErr: true, outcome: aggregator.Unavailable, status: 501},
		{name: "400", handler: body(400, "bad plate"), wantErr: true, outcome: aggregator.Rejected, status: 400},
		{name: "401", handler: body(401, ""), wantErr: true, outcome: aggregator.Rejected, status: 401},
		{name: "403", handler: body(403, ""), wantErr: true, outcome: aggregator.Rejected, status: 403},
		{
			name:    "400 ignores Retry-After",
			handler: withHeader(body(400, ""), "Retry-After", "5"),
			wantErr: true, outcome: aggregator.Rejected, status: 400,
		},
		{name: "304", handler: body(304, ""), wantErr: true, outcome: aggregator.Unreadable, status: 304},
		{name: "invalid JSON", handler: body(200, `{"resultado": `), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "empty body", handler: body(200, ""), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "HTML", handler: body(200, "<html>mantenimiento</html>"), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "trailing data", handler: body(200, `{"resultado": {"actas": []}} {}`), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "items missing", handler: body(200, `{"resultado": {}}`), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "items not an array", handler: body(200, `{"resultado": {"actas": {"nro": "1"}}}`), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "item without id", handler: body(200, `{"resultado": {"actas": [{"monto": 1}]}}`), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "item with empty id", handler: body(200, `{"resultado": {"actas": [{"nro": " "}]}}`), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "item with object id", handler: body(200, `{"resultado": {"actas": [{"nro": {}}]}}`), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "item not an object", handler: body(200, `{"resultado": {"actas": ["Q-1"]}}`), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "bad amount", handler: body(200, `{"resultado": {"actas": [{"nro": "1", "monto": "mucho"}]}}`), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "bool amount", handler: body(200, `{"resultado": {"actas": [{"nro": "1", "monto": true}]}}`), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "bad date", handler: body(200, `{"resultado": {"actas": [{"nro": "1", "fecha": "ayer"}]}}`), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "object description", handler: body(200, `{"resultado": {"actas": [{"nro": "1", "detalle": {"a": 1}}]}}`), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "oversized with length", handler: body(200, big), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{name: "oversized chunked", handler: chunked(200, big), wantErr: true, outcome: aggregator.Unreadable, status: 200},
		{
			name:    "unreadable keeps the pause",
			handler: withHeader(body(200, `nope`), "RateLimit", `"default";r=0;t=4`),
			wantErr: true, outcome: aggregator.Unreadable, status: 200, pause: 4 * time.Second,
		},
		{name: "reset mid-body", handler: resetMidBody, wantErr: true, outcome: aggregator.Unavailable},
		{name: "closed before headers", handler: closeBeforeHeaders, wantErr: true, outcome: aggregator.Unavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := portal(t, tt.handler)
			spec := testSpec(srv.URL)
			spec.MaxResponseBytes = 256
			s := newSource(t, spec, srv.Client())
			ans, err := s.Lookup(context.Background(), domainQuery)
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Lookup: %v", err)
				}
				if len(ans.Infractions) != tt.wantCount || ans.Pause != tt.pause {
					t.Errorf("Lookup = %d infractions, pause %v; want %d, %v", len(ans.Infractions), ans.Pause, tt.wantCount, tt.pause)
				}
				return
			}
			checkError(t, err, tt.outcome, tt.status, tt.pause)
		})
	}
}

// checkError checks that err is an *Error as described, and that its text
// does not reveal the plate.
func checkError(t *testing.T, err error, outcome aggregator.Outcome, status int, pause time.Duration) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v (%T), want *Error", err, err)
	}
	if e.Outcome != outcome || e.Status != status || e.Pause != pause {
		t.Errorf("error = {%s %d %v}, want {%s %d %v} (%v)", e.Outcome, e.Status, e.Pause, outcome, status, pause, err)
	}
	if strings.Contains(err.Error(), plate) {
		t.Errorf("error text %q reveals the plate", err)
	}
	return e
}

// body answers status with text.
func body(status int, text string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, text)
	}
}

// chunked answers without Content-Length.
func chunked(status int, text string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		for len(text) > 0 {
			n := min(len(text), 50)
			io.WriteString(w, text[:n])
			w.(http.Flusher).Flush()
			text = text[n:]
		}
	}
}

// withHeader adds a response header to h.
func withHeader(h http.HandlerFunc, name, value string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add(name, value)
		h(w, r)
	}
}

// resetMidBody promises 200 bytes, sends a few, and drops the connection.
func resetMidBody(w http.ResponseWriter, r *http.Request) {
	conn, buf := hijack(w)
	defer conn.Close()
	buf.WriteString("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n")
	buf.WriteString(`{"resultado": {"actas": [`)
	buf.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0) // a reset, not a clean close
	}
}

// closeBeforeHeaders drops the connection without answering.
func closeBeforeHeaders(w http.ResponseWriter, r *http.Request) {
	conn, _ := hijack(w)
	conn.Close()
}

func hijack(w http.ResponseWriter) (net.Conn, *bufio.ReadWriter) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(err)
	}
	return conn, buf
}

// errSourceTimeout is a context cause, as a caller would set one.
var errSourceTimeout = errors.New("source timeout")

func TestLookupTransportFailures(t *testing.T) {
	t.Parallel()

	// A portal that hangs until the caller gives up.
	hang := portal(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	// A portal that sends its headers, then hangs in the body.
	slowBody := portal(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		io.WriteString(w, `{"resultado": `)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	// A closed port.
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := closed.URL
	closed.Close()

	dnsFailure := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: "portal.invalid", IsNotFound: true}}
		},
	}}

	tests := []struct {
		name    string
		base    string
		client  *http.Client
		ctx     func() (context.Context, context.CancelFunc)
		outcome aggregator.Outcome
		status  int
		is      error
	}{
		{
			name: "deadline before headers", base: hang.URL, client: hang.Client(),
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 50*time.Millisecond)
			},
			outcome: aggregator.Timeout, is: context.DeadlineExceeded,
		},
		{
			name: "deadline in the body", base: slowBody.URL, client: slowBody.Client(),
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 50*time.Millisecond)
			},
			outcome: aggregator.Timeout, is: context.DeadlineExceeded,
		},
		{
			name: "cancelled", base: hang.URL, client: hang.Client(),
			ctx: func() (context.Context, context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				time.AfterFunc(50*time.Millisecond, cancel)
				return ctx, cancel
			},
			outcome: aggregator.Timeout, is: context.Canceled,
		},
		{
			name: "caller's cause", base: hang.URL, client: hang.Client(),
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeoutCause(context.Background(), 50*time.Millisecond, errSourceTimeout)
			},
			outcome: aggregator.Timeout, is: errSourceTimeout,
		},
		{
			name: "client timeout", base: hang.URL, client: &http.Client{Timeout: 50 * time.Millisecond},
			ctx:     func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			outcome: aggregator.Timeout, is: context.DeadlineExceeded,
		},
		{
			name: "connection refused", base: closedURL, client: http.DefaultClient,
			ctx:     func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			outcome: aggregator.Unavailable,
		},
		{
			name: "DNS failure", base: "http://portal.invalid", client: dnsFailure,
			ctx:     func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			outcome: aggregator.Unavailable,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSource(t, testSpec(tt.base), tt.client)
			ctx, cancel := tt.ctx()
			defer cancel()
			_, err := s.Lookup(ctx, domainQuery)
			checkError(t, err, tt.outcome, tt.status, 0)
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("errors.Is(%v, %v) = false", err, tt.is)
			}
		})
	}
}

// TestErrorTextHasNoURL checks that a transport error, whose *url.Error
// would print the request URL, does not reveal the plate.
func TestErrorTextHasNoURL(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	spec := testSpec(closed.URL)
	spec.Operations[aggregator.ByDomain] = OperationSpec{Path: "/actas/{domain}?d={domain}"}
	s := newSource(t, spec, nil)
	_, err := s.Lookup(context.Background(), domainQuery)
	checkError(t, err, aggregator.Unavailable, 0, 0)
	if !strings.Contains(err.Error(), "connection refused") && !strings.Contains(err.Error(), "connect") {
		t.Errorf("error text %q does not describe the cause", err)
	}
}

func TestMapping(t *testing.T) {
	t.Parallel()
	const doc = `{"data": {"a/b": {"list~": [
		{"n~m": {"id": 7}, "when": "14/03/2026 09:12", "money": {"value": "$ 1.234,565", "cur": " usd "},
		 "st": " impaga ", "where": ["x", "Av. Lugones"], "what": null},
		{"n~m": {"id": "Q 10/442"}, "when": 1773490320000, "money": {"value": 1.5e3, "cur": null},
		 "st": "Pagada", "what": "Semáforo en rojo"},
		{"n~m": {"id": 12.50}, "when": "2026-03-14T09:12:00+02:00", "money": {"value": -0.005}, "st": "OTRA"},
		{"n~m": {"id": "9"}, "st": true, "money": {"value": ""}, "when": ""},
		{"n~m": {"id": "10"}, "st": 2}
	]}}}`
	srv := portal(t, body(200, doc))
	spec := testSpec(srv.URL)
	spec.Response.Items = items("/data/a~1b/list~0")
	spec.Response.Fields = fields(map[string]string{
		"id": "/n~0m/id", "date": "/when", "description": "/what", "place": "/where/1",
		"amount": "/money/value", "currency": "/money/cur", "status": "/st",
	})
	spec.Response.StatusMap = map[string]string{"IMPAGA": "unpaid", "pagada": "paid", "TRUE": "in_process", " 2 ": "paid"}
	s := newSource(t, spec, srv.Client())
	ans, err := s.Lookup(context.Background(), domainQuery)
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	base := aggregator.Infraction{Source: "caba", Jurisdiction: "Ciudad de Buenos Aires"}
	with := func(f func(*aggregator.Infraction)) aggregator.Infraction {
		inf := base
		f(&inf)
		return inf
	}
	want := []aggregator.Infraction{
		with(func(i *aggregator.Infraction) {
			i.ID, i.Date, i.Place, i.Amount, i.Currency = "7", "2026-03-14T09:12:00-03:00", "Av. Lugones", "1234.57", "USD"
			i.Status, i.StatusRaw, i.Voucher = aggregator.Unpaid, "impaga", "/v1/sources/caba/infractions/7/voucher"
		}),
		with(func(i *aggregator.Infraction) {
			i.ID, i.Date, i.Description, i.Amount, i.Currency = "Q 10/442", "2026-03-14T09:12:00-03:00", "Semáforo en rojo", "1500.00", "ARS"
			i.Status, i.StatusRaw, i.Voucher = aggregator.Paid, "Pagada", "/v1/sources/caba/infractions/Q%2010%2F442/voucher"
		}),
		with(func(i *aggregator.Infraction) {
			i.ID, i.Date, i.Amount, i.Currency = "12.50", "2026-03-14T09:12:00+02:00", "-0.01", "ARS"
			i.Status, i.StatusRaw, i.Voucher = aggregator.Unknown, "OTRA", "/v1/sources/caba/infractions/12.50/voucher"
		}),
		with(func(i *aggregator.Infraction) {
			i.ID, i.Currency = "9", "ARS"
			i.Status, i.StatusRaw, i.Voucher = aggregator.InProcess, "true", "/v1/sources/caba/infractions/9/voucher"
		}),
		with(func(i *aggregator.Infraction) {
			i.ID, i.Currency = "10", "ARS"
			i.Status, i.StatusRaw, i.Voucher = aggregator.Paid, "2", "/v1/sources/caba/infractions/10/voucher"
		}),
	}
	if len(ans.Infractions) != len(want) {
		t.Fatalf("got %d infractions, want %d", len(ans.Infractions), len(want))
	}
	for i := range want {
		if ans.Infractions[i] != want[i] {
			t.Errorf("infraction %d =\n%+v\nwant\n%+v", i, ans.Infractions[i], want[i])
		}
	}
}

func TestMappingDocumentIsTheArray(t *testing.T) {
	t.Parallel()
	srv := portal(t, body(200, `[{"id": "A"}, {"id": "B", "estado": null}]`))
	spec := testSpec(srv.URL)
	spec.Response.Items = items("")
	spec.Response.Fields = fields(map[string]string{"id": "/id", "status": "/estado"})
	delete(spec.Operations, aggregator.Voucher)
	spec.Currency = ""
	s := newSource(t, spec, srv.Client())
	ans, err := s.Lookup(context.Background(), domainQuery)
	if err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	want := []aggregator.Infraction{
		{Source: "caba", Jurisdiction: "Ciudad de Buenos Aires", ID: "A", Status: aggregator.Unknown},
		{Source: "caba", Jurisdiction: "Ciudad de Buenos Aires", ID: "B", Status: aggregator.Unknown},
	}
	if !reflect.DeepEqual(ans.Infractions, want) {
		t.Errorf("Infractions = %+v, want %+v", ans.Infractions, want)
	}
}

func TestStatusMap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw        string // JSON value of the status field; "" for none
		wantStatus aggregator.Status
		wantRaw    string
	}{
		{`"IMPAGA"`, aggregator.Unpaid, "IMPAGA"},
		{`"impaga"`, aggregator.Unpaid, "impaga"},
		{`"  Impaga  "`, aggregator.Unpaid, "Impaga"},
		{`"pagada"`, aggregator.Paid, "pagada"},
		{`"en gestion"`, aggregator.InProcess, "en gestion"},
		{`"En Gestión"`, aggregator.Unknown, "En Gestión"},
		{`"ANULADA"`, aggregator.Unknown, "ANULADA"},
		{`""`, aggregator.Unknown, ""},
		{`null`, aggregator.Unknown, ""},
		{``, aggregator.Unknown, ""},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			t.Parallel()
			item := `{"nro": "1"}`
			if tt.raw != "" {
				item = `{"nro": "1", "estado": ` + tt.raw + `}`
			}
			srv := portal(t, body(200, `{"resultado": {"actas": [`+item+`]}}`))
			s := newSource(t, testSpec(srv.URL), srv.Client())
			ans, err := s.Lookup(context.Background(), domainQuery)
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			got := ans.Infractions[0]
			if got.Status != tt.wantStatus || got.StatusRaw != tt.wantRaw {
				t.Errorf("status = %q (raw %q), want %q (raw %q)", got.Status, got.StatusRaw, tt.wantStatus, tt.wantRaw)
			}
		})
	}
}

func TestSizeLimit(t *testing.T) {
	t.Parallel()
	const limit = 100
	doc := func(n int) string {
		head := `{"resultado": {"actas": []}, "p": "`
		return head + strings.Repeat("x", n-len(head)-2) + `"}`
	}
	tests := []struct {
		name   string
		h      http.HandlerFunc
		wantOK bool
	}{
		{"at the limit", body(200, doc(limit)), true},
		{"at the limit chunked", chunked(200, doc(limit)), true},
		{"one byte over", body(200, doc(limit+1)), false},
		{"one byte over chunked", chunked(200, doc(limit+1)), false},
		{"far over chunked", chunked(200, doc(10*limit)), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := portal(t, tt.h)
			spec := testSpec(srv.URL)
			spec.MaxResponseBytes = limit
			s := newSource(t, spec, srv.Client())
			_, err := s.Lookup(context.Background(), domainQuery)
			if tt.wantOK {
				if err != nil {
					t.Errorf("Lookup: %v", err)
				}
				return
			}
			checkError(t, err, aggregator.Unreadable, 200, 0)
		})
	}
}

func TestRequest(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, query, auth, accept, host string
	}
	got := make(chan seen, 1)
	srv := portal(t, func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Accept"), r.Host}
		io.WriteString(w, `{"resultado": {"actas": []}}`)
	})
	spec := testSpec(srv.URL + "/base/")
	spec.Headers = map[string]string{"authorization": "Bearer t0k3n", "Host": "portal.example"}
	spec.Operations = map[aggregator.Operation]OperationSpec{
		aggregator.ByID: {Method: "post", Path: "/personas/{id}/multas?id={id}&tipo={id_kind}"},
	}
	s := newSource(t, spec, srv.Client())
	if _, err := s.Lookup(context.Background(), aggregator.Query{ID: "AB 1/2&x=y", IDKind: aggregator.DNI}); err != nil {
		t.Fatalf("Lookup: %v", err)
	}
	want := seen{
		method: "POST", path: "/base/personas/AB%201%2F2&x=y/multas",
		query: "id=AB+1%2F2%26x%3Dy&tipo=dni", auth: "Bearer t0k3n", accept: "application/json",
		host: "portal.example",
	}
	if g := <-got; g != want {
		t.Errorf("request = %+v, want %+v", g, want)
	}
}

// TestConnectionReuse checks that bodies are drained so that one
// connection serves a run of answers of every kind.
func TestConnectionReuse(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	var n atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch n.Add(1) % 5 {
		case 0:
			body(200, oneItem)(w, r)
		case 1:
			body(404, strings.Repeat("no ", 500))(w, r)
		case 2:
			withHeader(body(503, strings.Repeat("down ", 500)), "Retry-After", "1")(w, r)
		case 3:
			body(429, "slow")(w, r)
		case 4:
			body(200, `{"resultado": {"actas": [{"monto": 1}]}}`)(w, r) // unreadable
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	s := newSource(t, testSpec(srv.URL), srv.Client())
	for range 20 {
		s.Lookup(context.Background(), domainQuery)
	}
	if c := conns.Load(); c != 1 {
		t.Errorf("%d connections for 20 sequential calls, want 1", c)
	}
}

func TestVoucher(t *testing.T) {
	t.Parallel()
	const pdf = "%PDF-1.7 boleta"
	srv := portal(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.EscapedPath() {
		case "/api/v2/actas/Q%2010/boleta":
			w.Header().Set("Content-Type", "application/pdf")
			io.WriteString(w, pdf)
		case "/api/v2/actas/bare/boleta":
			w.Write([]byte{1, 2, 3})
		case "/api/v2/actas/gone/boleta":
			http.NotFound(w, r)
		case "/api/v2/actas/busy/boleta":
			withHeader(body(429, ""), "Retry-After", "8")(w, r)
		case "/api/v2/actas/down/boleta":
			body(503, "")(w, r)
		default:
			body(400, "")(w, r)
		}
	})
	s := newSource(t, testSpec(srv.URL), srv.Client())

	t.Run("streams", func(t *testing.T) {
		t.Parallel()
		v, err := s.Voucher(context.Background(), "Q 10")
		if err != nil {
			t.Fatalf("Voucher: %v", err)
		}
		defer v.Body.Close()
		b, err := io.ReadAll(v.Body)
		if err != nil || string(b) != pdf || v.ContentType != "application/pdf" || v.Length != int64(len(pdf)) {
			t.Errorf("voucher = %q (%v), %q, %d; want %q, application/pdf, %d", b, err, v.ContentType, v.Length, pdf, len(pdf))
		}
	})
	tests := []struct {
		id       string
		outcome  aggregator.Outcome
		status   int
		pause    time.Duration
		notFound bool
	}{
		{id: "gone", outcome: aggregator.Rejected, status: 404, notFound: true},
		{id: "", outcome: aggregator.Rejected, notFound: true},
		{id: "busy", outcome: aggregator.RateLimited, status: 429, pause: 8 * time.Second},
		{id: "down", outcome: aggregator.Unavailable, status: 503},
		{id: "other", outcome: aggregator.Rejected, status: 400},
		// Sniffed by net/http as application/octet-stream: not a voucher
		// type (TestVoucherTypes has the rest).
		{id: "bare", outcome: aggregator.Unreadable, status: 200},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			v, err := s.Voucher(context.Background(), tt.id)
			if v != nil {
				t.Fatalf("Voucher returned a voucher with error %v", err)
			}
			checkError(t, err, tt.outcome, tt.status, tt.pause)
			if got := errors.Is(err, ErrNotFound); got != tt.notFound {
				t.Errorf("errors.Is(err, ErrNotFound) = %v, want %v", got, tt.notFound)
			}
		})
	}
}

func TestUnsupported(t *testing.T) {
	t.Parallel()
	spec := testSpec("http://127.0.0.1:1")
	delete(spec.Operations, aggregator.Voucher)
	s := newSource(t, spec, nil)
	if _, err := s.Voucher(context.Background(), "1"); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Voucher without the operation: %v, want ErrUnsupported", err)
	}
	if _, err := s.Lookup(context.Background(), aggregator.Query{ID: "12345678", IDKind: aggregator.DNI}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Lookup by DNI on a CUIT-only source: %v, want ErrUnsupported", err)
	}
}

func TestSupports(t *testing.T) {
	t.Parallel()
	spec := testSpec("http://portal")
	cuitOnly := newSource(t, spec, nil)
	delete(spec.Operations, aggregator.Voucher)
	spec.Operations[aggregator.ByID] = OperationSpec{Path: "/p?id={id}"}
	both := newSource(t, spec, nil)
	tests := []struct {
		s    *Source
		op   aggregator.Operation
		kind aggregator.IDKind
		want bool
	}{
		{cuitOnly, aggregator.ByDomain, "", true},
		{cuitOnly, aggregator.ByID, aggregator.CUIT, true},
		{cuitOnly, aggregator.ByID, aggregator.DNI, false},
		{cuitOnly, aggregator.ByID, "", true},
		{cuitOnly, aggregator.Voucher, "", true},
		{cuitOnly, "by_plate", "", false},
		{both, aggregator.ByID, aggregator.DNI, true},
		{both, aggregator.ByID, aggregator.CUIT, true},
		{both, aggregator.ByID, "passport", false},
		{both, aggregator.Voucher, "", false},
	}
	for i, tt := range tests {
		if got := tt.s.Supports(tt.op, tt.kind); got != tt.want {
			t.Errorf("case %d: Supports(%s, %q) = %v, want %v", i, tt.op, tt.kind, got, tt.want)
		}
	}
}

func TestNewValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		change func(*Spec)
		want   string // part of the error; "" means valid
	}{
		{"valid", func(*Spec) {}, ""},
		{"no id", func(s *Spec) { s.ID = "" }, "id is empty"},
		{"relative base", func(s *Spec) { s.BaseURL = "/api" }, "base_url"},
		{"ftp base", func(s *Spec) { s.BaseURL = "ftp://portal" }, "base_url"},
		{"no operations", func(s *Spec) { s.Operations = nil }, "operations"},
		{"unknown operation", func(s *Spec) { s.Operations["by_plate"] = OperationSpec{Path: "/{domain}"} }, "unknown operation"},
		{"bad method", func(s *Spec) {
			s.Operations[aggregator.ByDomain] = OperationSpec{Method: "GET /x", Path: "/{domain}"}
		}, "method"},
		{"missing placeholder", func(s *Spec) { s.Operations[aggregator.ByDomain] = OperationSpec{Path: "/actas"} }, "{domain}"},
		{"unknown kind", func(s *Spec) {
			s.Operations[aggregator.ByID] = OperationSpec{Path: "/{id}", Accepts: []aggregator.IDKind{"passport"}}
		}, "passport"},
		{"accepts outside by_id", func(s *Spec) {
			s.Operations[aggregator.ByDomain] = OperationSpec{Path: "/{domain}", Accepts: []aggregator.IDKind{aggregator.DNI}}
		}, "accepts"},
		{"bad items pointer", func(s *Spec) { s.Response.Items = items("resultado") }, "response.items"},
		{"no id field", func(s *Spec) { delete(s.Response.Fields, "id") }, "response.fields.id"},
		{"bad field pointer", func(s *Spec) { s.Response.Fields["date"] = mapping.Field{Select: mapping.List{"/a~2"}} }, "response.fields.date"},
		{"unknown field", func(s *Spec) { s.Response.Fields["plate"] = mapping.Field{Select: mapping.List{"/p"}} }, "response.fields.plate"},
		{"bad status", func(s *Spec) { s.Response.StatusMap["X"] = "cancelled" }, "cancelled"},
		{"conflicting status", func(s *Spec) { s.Response.StatusMap["impaga"] = "paid" }, "conflicts"},
		{"bad header", func(s *Spec) { s.Headers = map[string]string{"X Bad": "1"} }, "headers"},
		{"header line break", func(s *Spec) { s.Headers = map[string]string{"X-A": "1\r\nX-B: 2"} }, "headers"},
		{"negative size", func(s *Spec) { s.MaxResponseBytes = -1 }, "max_response_bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			spec := testSpec("http://portal")
			tt.change(&spec)
			_, err := New(spec, nil, nil)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("New: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("New = %v, want an error about %q", err, tt.want)
			}
		})
	}
}

// TestNewReportsEveryProblem checks that New lists all problems at once.
func TestNewReportsEveryProblem(t *testing.T) {
	t.Parallel()
	spec := testSpec("http://portal")
	spec.Response.Items = items("x")
	delete(spec.Response.Fields, "id")
	spec.Response.StatusMap["X"] = "gone"
	_, err := New(spec, nil, nil)
	if err == nil {
		t.Fatal("New succeeded")
	}
	for _, want := range []string{"response.items", "response.fields.id", "gone"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

func TestSpecIsACopy(t *testing.T) {
	t.Parallel()
	spec := testSpec("http://portal")
	s := newSource(t, spec, nil)
	spec.Response.Fields["id"] = mapping.Field{Select: mapping.List{"/other"}}
	got := s.Spec()
	got.Response.StatusMap["IMPAGA"] = "paid"
	got.Response.Fields["date"].Select[0] = "/x"
	if s.Spec().Response.Fields["id"].Select[0] != "/nro" || s.Spec().Response.StatusMap["IMPAGA"] != "unpaid" ||
		s.Spec().Response.Fields["date"].Select[0] != "/fecha" {
		t.Errorf("Spec shares its maps with the caller")
	}
}

func TestErrorText(t *testing.T) {
	t.Parallel()
	e := &Error{Outcome: aggregator.Unavailable, Status: 503, Err: fmt.Errorf("portal answered 503")}
	if got, want := e.Error(), "unavailable (HTTP 503): portal answered 503"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}
