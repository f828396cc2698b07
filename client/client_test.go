package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/client"
	"github.com/multas/aggregator/portalsim"
	"github.com/multas/aggregator/problem"
)

func newClient(t testing.TB, baseURL string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(baseURL, opts...)
	if err != nil {
		t.Fatalf("client.New(%q): %v", baseURL, err)
	}
	return c
}

// TestQuery runs synchronous queries against a real aggregator over the
// simulator: cordoba's breaker forced open, rosario down, pba throttling,
// caba and santafe healthy.
func TestQuery(t *testing.T) {
	t.Parallel()
	e := newEnv(t, baseYAML)
	if err := e.forceOpen("cordoba", "by_domain"); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, e.URL)

	tests := []struct {
		name         string
		query        func(context.Context) (*aggregator.Result, error)
		echo         aggregator.QueryEcho
		complete     bool
		summary      aggregator.Summary
		infractions  int
		sourceErrors map[string]problem.Slug
	}{
		{
			name: "complete by domain, normalised",
			query: func(ctx context.Context) (*aggregator.Result, error) {
				return c.ByDomain(ctx, "ab-123 cd", client.WithSources("caba", "santafe"))
			},
			echo:     aggregator.QueryEcho{Domain: portalsim.DemoPlate},
			complete: true, summary: aggregator.Summary{Total: 2, Succeeded: 2}, infractions: 3,
		},
		{
			name: "complete by id, with a timeout",
			query: func(ctx context.Context) (*aggregator.Result, error) {
				return c.ByID(ctx, portalsim.DemoCUIT, client.WithSources("caba"), client.WithTimeout(2500*time.Millisecond))
			},
			echo:     aggregator.QueryEcho{ID: "20123456786"},
			complete: true, summary: aggregator.Summary{Total: 1, Succeeded: 1}, infractions: 3,
		},
		{
			name: "no infractions anywhere",
			query: func(ctx context.Context) (*aggregator.Result, error) {
				return c.ByDomain(ctx, portalsim.DemoPlateClean, client.WithSources("caba", "santafe"))
			},
			echo:     aggregator.QueryEcho{Domain: portalsim.DemoPlateClean},
			complete: true, summary: aggregator.Summary{Total: 2, Succeeded: 2},
		},
		{
			// The only case that calls pba: its first 429 fails the call;
			// later ones would be skipped during the pause.
			name: "partial",
			query: func(ctx context.Context) (*aggregator.Result, error) {
				return c.ByDomain(ctx, portalsim.DemoPlate)
			},
			echo:    aggregator.QueryEcho{Domain: portalsim.DemoPlate},
			summary: aggregator.Summary{Total: 5, Succeeded: 2, Failed: 2, Skipped: 1}, infractions: 3,
			sourceErrors: map[string]problem.Slug{
				"cordoba": problem.CircuitOpen,
				"pba":     problem.RateLimited,
				"rosario": problem.SourceUnavailable,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := tt.query(t.Context())
			if err != nil {
				t.Fatalf("query: %v", err)
			}
			if res.Query != tt.echo {
				t.Errorf("query = %+v, want %+v", res.Query, tt.echo)
			}
			if res.Complete != tt.complete {
				t.Errorf("complete = %v, want %v", res.Complete, tt.complete)
			}
			if res.Summary != tt.summary {
				t.Errorf("summary = %+v, want %+v", res.Summary, tt.summary)
			}
			if len(res.Infractions) != tt.infractions {
				t.Errorf("%d infractions, want %d", len(res.Infractions), tt.infractions)
			}
			errs := client.SourceErrors(res)
			if len(errs) != len(tt.sourceErrors) {
				t.Errorf("SourceErrors = %v, want %d problems", errs, len(tt.sourceErrors))
			}
			for source, slug := range tt.sourceErrors {
				p := errs[source]
				if !errors.Is(p, slug) {
					t.Errorf("SourceErrors()[%s] = %v, want errors.Is %s", source, p, slug)
					continue
				}
				if p.Slug != slug {
					t.Errorf("SourceErrors()[%s].Slug = %q, want %q", source, p.Slug, slug)
				}
			}
			if p := errs["cordoba"]; p != nil {
				if d, ok := client.RetryAfter(p); !ok || d != 30*time.Second {
					t.Errorf("RetryAfter(cordoba's problem) = %v, %v; want 30s (the forced open's open_for), true", d, ok)
				}
			}
		})
	}
}

// TestQueryErrors checks that every error answer of a query is a
// *problem.Problem, branchable with errors.Is.
func TestQueryErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, baseYAML)
	if err := e.forceOpen("cordoba", "by_domain"); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, e.URL)

	tests := []struct {
		name       string
		query      func(context.Context) (*aggregator.Result, error)
		slug       problem.Slug
		status     int
		param      string         // the invalid_params name expected
		sources    []problem.Slug // the slugs of an Unavailable's sources
		retryAfter time.Duration  // 0: none
	}{
		{
			name:  "not a plate",
			query: func(ctx context.Context) (*aggregator.Result, error) { return c.ByDomain(ctx, "ZZ") },
			slug:  problem.InvalidQuery, status: http.StatusBadRequest, param: "domain",
		},
		{
			name:  "bad check digit",
			query: func(ctx context.Context) (*aggregator.Result, error) { return c.ByID(ctx, "20-12345678-0") },
			slug:  problem.InvalidQuery, status: http.StatusBadRequest, param: "id",
		},
		{
			name: "unknown source",
			query: func(ctx context.Context) (*aggregator.Result, error) {
				return c.ByDomain(ctx, portalsim.DemoPlate, client.WithSources("atlantis"))
			},
			slug: problem.InvalidQuery, status: http.StatusBadRequest, param: "sources",
		},
		{
			name: "timeout not positive",
			query: func(ctx context.Context) (*aggregator.Result, error) {
				return c.ByDomain(ctx, portalsim.DemoPlate, client.WithTimeout(-time.Second))
			},
			slug: problem.InvalidQuery, status: http.StatusBadRequest, param: "timeout",
		},
		{
			name: "the only source failed",
			query: func(ctx context.Context) (*aggregator.Result, error) {
				return c.ByDomain(ctx, portalsim.DemoPlate, client.WithSources("rosario"))
			},
			slug: problem.NoSourceAvailable, status: http.StatusServiceUnavailable,
			sources: []problem.Slug{problem.SourceUnavailable},
		},
		{
			name: "every source skipped",
			query: func(ctx context.Context) (*aggregator.Result, error) {
				return c.ByDomain(ctx, portalsim.DemoPlate, client.WithSources("cordoba"))
			},
			slug: problem.NoSourceAvailable, status: http.StatusServiceUnavailable,
			sources: []problem.Slug{problem.CircuitOpen}, retryAfter: 30 * time.Second,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res, err := tt.query(t.Context())
			if err == nil {
				t.Fatalf("got a result %+v, want a %s problem", res, tt.slug)
			}
			if res != nil {
				t.Errorf("got a result with the error")
			}
			if !errors.Is(err, tt.slug) {
				t.Errorf("error %v: errors.Is(err, %s) is false", err, tt.slug)
			}
			var p *problem.Problem
			if !errors.As(err, &p) {
				t.Fatalf("error %T %v is not a *problem.Problem", err, err)
			}
			if p.Slug != tt.slug || p.Status != tt.status {
				t.Errorf("problem %s %d, want %s %d", p.Slug, p.Status, tt.slug, tt.status)
			}
			if tt.param != "" && (len(p.InvalidParams) != 1 || p.InvalidParams[0].Name != tt.param) {
				t.Errorf("invalid_params = %+v, want one naming %q", p.InvalidParams, tt.param)
			}
			var u *client.Unavailable
			if errors.As(err, &u) != (tt.sources != nil) {
				t.Errorf("errors.As(err, *Unavailable) = %v, want %v", u != nil, tt.sources != nil)
			}
			if u != nil {
				if len(u.Sources) != len(tt.sources) {
					t.Fatalf("Unavailable.Sources = %+v, want %d", u.Sources, len(tt.sources))
				}
				for i, slug := range tt.sources {
					if got := u.Sources[i].Problem; !errors.Is(got, slug) || got.Slug != slug {
						t.Errorf("Sources[%d].Problem = %+v, want slug %s", i, got, slug)
					}
				}
			}
			d, ok := client.RetryAfter(err)
			if ok != (tt.retryAfter != 0) || d != tt.retryAfter {
				t.Errorf("RetryAfter = %v, %v; want %v", d, ok, tt.retryAfter)
			}
		})
	}
}

// TestAuth runs against an aggregator with server.api_keys.
func TestAuth(t *testing.T) {
	t.Parallel()
	header := strings.Replace(baseYAML, `server: {admin_token: "`+adminToken+`"}`,
		`server: {admin_token: "`+adminToken+`", api_keys: [{name: tester, key: s3cret, rps: 100}]}`, 1)
	e := newEnv(t, header)

	tests := []struct {
		name string
		opts []client.Option
		slug problem.Slug // empty: success
	}{
		{"no key", nil, problem.Unauthorized},
		{"unknown key", []client.Option{client.WithAPIKey("guess")}, problem.Unauthorized},
		{"good key", []client.Option{client.WithAPIKey("s3cret")}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, e.URL, tt.opts...)
			res, err := c.ByDomain(t.Context(), portalsim.DemoPlate, client.WithSources("caba"))
			body, _, verr := c.Voucher(t.Context(), "caba", "Q-10442")
			if verr == nil {
				body.Close()
			}
			for what, err := range map[string]error{"ByDomain": err, "Voucher": verr} {
				if tt.slug == "" {
					if err != nil {
						t.Errorf("%s: %v", what, err)
					}
					continue
				}
				var p *problem.Problem
				if !errors.As(err, &p) || !errors.Is(err, tt.slug) || p.Status != http.StatusUnauthorized {
					t.Errorf("%s: error %v, want a 401 %s problem", what, err, tt.slug)
				}
			}
			if tt.slug == "" && (res == nil || !res.Complete) {
				t.Errorf("result %+v, want complete", res)
			}
		})
	}
}

func TestVoucher(t *testing.T) {
	t.Parallel()
	e := newEnv(t, baseYAML)
	if err := e.forceOpen("cordoba", "voucher"); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, e.URL)

	tests := []struct {
		name, source, id string
		slug             problem.Slug // empty: a PDF
		status           int
		retryAfter       time.Duration
	}{
		{name: "pdf", source: "caba", id: "Q-10442"},
		{name: "unknown infraction", source: "caba", id: "Q-0", slug: problem.NotFound, status: 404},
		{name: "id with a slash stays one segment", source: "caba", id: "Q/10442", slug: problem.NotFound, status: 404},
		{name: "unknown source", source: "atlantis", id: "Q-10442", slug: problem.NotFound, status: 404},
		{name: "circuit open", source: "cordoba", id: "CBA-2026-004512", slug: problem.CircuitOpen, status: 503, retryAfter: 30 * time.Second},
		{name: "portal down", source: "rosario", id: "ROS-2026-0042", slug: problem.SourceUnavailable, status: 502},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body, ct, err := c.Voucher(t.Context(), tt.source, tt.id)
			if tt.slug == "" {
				if err != nil {
					t.Fatalf("Voucher: %v", err)
				}
				defer body.Close()
				b, err := io.ReadAll(body)
				if err != nil {
					t.Fatal(err)
				}
				if ct != "application/pdf" || !strings.HasPrefix(string(b), "%PDF-") {
					t.Errorf("voucher %q, %d bytes starting %q; want a PDF", ct, len(b), b[:min(len(b), 8)])
				}
				return
			}
			if err == nil {
				body.Close()
				t.Fatalf("got a %q voucher, want a %s problem", ct, tt.slug)
			}
			var p *problem.Problem
			if !errors.As(err, &p) || !errors.Is(err, tt.slug) || p.Status != tt.status {
				t.Errorf("error %v, want a %d %s problem", err, tt.status, tt.slug)
			}
			d, ok := client.RetryAfter(err)
			if ok != (tt.retryAfter != 0) || d != tt.retryAfter {
				t.Errorf("RetryAfter = %v, %v; want %v", d, ok, tt.retryAfter)
			}
		})
	}
}

// TestForeignAnswers checks answers that are not the aggregator's own
// problems: a proxy's pages, a problem with a relative type, a broken
// result. Every error answer must still be a *problem.Problem.
func TestForeignAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		status      int
		contentType string
		header      map[string]string
		body        string
		slug        problem.Slug // empty: an error that is not a problem
		retryAfter  time.Duration
		hasRetry    bool
	}{
		{name: "proxy page", status: 502, contentType: "text/html", body: "<h1>Bad gateway</h1>", slug: problem.Internal},
		{name: "no content type", status: 500, body: "oops", slug: problem.Internal},
		{name: "json, not a problem", status: 500, contentType: "application/json", body: `{"error":"boom"}`, slug: problem.Internal},
		{name: "proxy throttling", status: 429, contentType: "text/plain", header: map[string]string{"Retry-After": "7"},
			body: "slow down", slug: problem.Internal, retryAfter: 7 * time.Second, hasRetry: true},
		{name: "retry-after as a past date", status: 503, contentType: "text/plain",
			header: map[string]string{"Retry-After": "Sun, 06 Nov 1994 08:49:37 GMT"}, slug: problem.Internal, hasRetry: true},
		{name: "relative type", status: 404, contentType: "application/problem+json",
			body: `{"type":"/problems/not-found","title":"Not found","status":404}`, slug: problem.NotFound},
		{name: "header fills retry_after", status: 429, contentType: "application/problem+json; charset=utf-8",
			header: map[string]string{"Retry-After": "3"},
			body:   `{"type":"https://x.example/p/too-many-requests","title":"Too many requests","status":429}`,
			slug:   problem.TooManyRequests, retryAfter: 3 * time.Second, hasRetry: true},
		{name: "result that is not JSON", status: 200, contentType: "application/json", body: "{"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				for k, v := range tt.header {
					w.Header().Set(k, v)
				}
				if tt.contentType != "" {
					w.Header().Set("Content-Type", tt.contentType)
				} else {
					w.Header()["Content-Type"] = nil // no sniffing
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			_, err := newClient(t, srv.URL).ByDomain(t.Context(), portalsim.DemoPlate)
			if err == nil {
				t.Fatal("no error")
			}
			var p *problem.Problem
			isProblem := errors.As(err, &p)
			if tt.slug == "" {
				if isProblem {
					t.Errorf("error %v is a problem; want a decoding error", err)
				}
				return
			}
			if !isProblem {
				t.Fatalf("error %T %v is not a *problem.Problem", err, err)
			}
			if !errors.Is(err, tt.slug) || p.Slug != tt.slug || p.Status != tt.status {
				t.Errorf("problem %+v, want slug %s, status %d", p, tt.slug, tt.status)
			}
			d, ok := client.RetryAfter(err)
			if ok != tt.hasRetry || d != tt.retryAfter {
				t.Errorf("RetryAfter = %v, %v; want %v, %v", d, ok, tt.retryAfter, tt.hasRetry)
			}
		})
	}
}

// TestRequests checks what the client sends: the path below a prefix, the
// query, and the headers of its options.
func TestRequests(t *testing.T) {
	t.Parallel()
	type seen struct {
		path, rawPath, query, apiKey, userAgent string
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- seen{r.URL.Path, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("X-API-Key"), r.Header.Get("User-Agent")}
		w.WriteHeader(http.StatusTeapot)
	}))
	defer srv.Close()

	tests := []struct {
		name string
		base string
		opts []client.Option
		call func(*client.Client) error
		want seen
	}{
		{
			name: "by domain, below a prefix",
			base: srv.URL + "/multas/", opts: []client.Option{client.WithAPIKey("k1"), client.WithUserAgent("fleet/2")},
			call: func(c *client.Client) error {
				_, err := c.ByDomain(context.Background(), "AB 123 CD", client.WithSources("caba", "cordoba"), client.WithTimeout(1500*time.Millisecond))
				return err
			},
			want: seen{path: "/multas/v1/infractions", rawPath: "/multas/v1/infractions",
				query: "domain=AB+123+CD&sources=caba%2Ccordoba&timeout=1.5s", apiKey: "k1", userAgent: "fleet/2"},
		},
		{
			name: "voucher with an escaped id",
			base: srv.URL,
			call: func(c *client.Client) error {
				_, _, err := c.Voucher(context.Background(), "caba", "A/1 2")
				return err
			},
			want: seen{path: "/v1/sources/caba/infractions/A/1 2/voucher", rawPath: "/v1/sources/caba/infractions/A%2F1%202/voucher",
				userAgent: client.DefaultUserAgent},
		},
		{
			name: "get query",
			base: srv.URL,
			call: func(c *client.Client) error {
				_, err := c.GetQuery(context.Background(), "q-1")
				return err
			},
			want: seen{path: "/v1/queries/q-1", rawPath: "/v1/queries/q-1", userAgent: client.DefaultUserAgent},
		},
	}
	for _, tt := range tests { // not parallel: they share srv's channel
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(newClient(t, tt.base, tt.opts...))
			if !errors.Is(err, problem.Internal) {
				t.Errorf("error %v, want the 418 as an internal problem", err)
			}
			if s := <-got; s != tt.want {
				t.Errorf("request %+v\nwant      %+v", s, tt.want)
			}
		})
	}
}

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		base string
		ok   bool
	}{
		{"http://127.0.0.1:8080", true},
		{"https://multas.example/api/", true},
		{"", false},
		{"127.0.0.1:8080", false},
		{"ftp://multas.example", false},
		{"http://", false},
		{"http://multas.example/?x=1", false},
		{"http://user:pw@multas.example", false},
	}
	for _, tt := range tests {
		_, err := client.New(tt.base)
		if (err == nil) != tt.ok {
			t.Errorf("New(%q) error %v, want ok %v", tt.base, err, tt.ok)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	seven := 7
	withRetry := &problem.Problem{Status: 503, Slug: problem.CircuitOpen, RetryAfter: &seven}
	tests := []struct {
		name string
		err  error
		want time.Duration
		ok   bool
	}{
		{"nil", nil, 0, false},
		{"not a problem", errors.New("x"), 0, false},
		{"problem without retry_after", &problem.Problem{Status: 502}, 0, false},
		{"problem", withRetry, 7 * time.Second, true},
		{"wrapped", errors.Join(errors.New("ctx"), withRetry), 7 * time.Second, true},
		{"unavailable", &client.Unavailable{Problem: withRetry}, 7 * time.Second, true},
	}
	for _, tt := range tests {
		if d, ok := client.RetryAfter(tt.err); d != tt.want || ok != tt.ok {
			t.Errorf("%s: RetryAfter = %v, %v; want %v, %v", tt.name, d, ok, tt.want, tt.ok)
		}
	}
}

func TestSourceErrors(t *testing.T) {
	t.Parallel()
	open := &problem.Problem{Type: "https://x.example/problems/circuit-open", Status: 503}
	res := &aggregator.Result{Sources: []aggregator.SourceResult{
		{Source: "a", Status: aggregator.EntrySucceeded},
		{Source: "b", Status: aggregator.EntrySkipped, Problem: open},
	}}
	errs := client.SourceErrors(res)
	if len(errs) != 1 || errs["b"] != open {
		t.Errorf("SourceErrors = %v, want only b", errs)
	}
	// A result decoded by other means than the client (a webhook's)
	// branches the same way: the slug is read from the type.
	if !errors.Is(errs["b"], problem.CircuitOpen) {
		t.Errorf("errors.Is(%+v, CircuitOpen) is false", errs["b"])
	}
	var none *problem.Problem
	if errors.Is(none, problem.CircuitOpen) || errors.Is(&problem.Problem{}, problem.Slug("")) {
		t.Errorf("a nil or typeless problem matches a slug")
	}
	if client.SourceErrors(nil) != nil || client.SourceErrors(&aggregator.Result{}) != nil {
		t.Errorf("SourceErrors of nothing is not nil")
	}
}
