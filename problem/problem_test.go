package problem_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/multas/aggregator/problem"
)

func TestCatalogNew(t *testing.T) {
	t.Parallel()
	c := problem.Catalog{Base: "https://errors.example/problems/"}
	tests := []struct {
		slug   problem.Slug
		status int
	}{
		{problem.CircuitOpen, 503},
		{problem.RateLimited, 503},
		{problem.SourceTimeout, 504},
		{problem.SourceUnavailable, 502},
		{problem.SourceRejected, 502},
		{problem.SourceError, 502},
		{problem.DeadlineExceeded, 504},
		{problem.NoSourceAvailable, 503},
		{problem.InvalidQuery, 400},
		{problem.Unauthorized, 401},
		{problem.Forbidden, 403},
		{problem.NotFound, 404},
		{problem.MethodNotAllowed, 405},
		{problem.RequestTimeout, 408},
		{problem.PayloadTooLarge, 413},
		{problem.WatchLimit, 409},
		{problem.TooManyRequests, 429},
		{problem.Overloaded, 503},
		{problem.Internal, 500},
	}
	for _, tt := range tests {
		p := c.New(tt.slug, "detail")
		if want := c.Base + string(tt.slug); p.Type != want {
			t.Errorf("%s: type %q, want %q", tt.slug, p.Type, want)
		}
		if p.Status != tt.status || p.Title == "" {
			t.Errorf("%s: status %d title %q, want %d and a title", tt.slug, p.Status, p.Title, tt.status)
		}
		if !errors.Is(p, tt.slug) {
			t.Errorf("%s: errors.Is(problem, slug) is false", tt.slug)
		}
		if errors.Is(p, problem.Internal) && tt.slug != problem.Internal {
			t.Errorf("%s: matches another slug", tt.slug)
		}
		if wrapped := fmt.Errorf("call: %w", p); !errors.Is(wrapped, tt.slug) {
			t.Errorf("%s: not found through wrapping", tt.slug)
		}
	}
	if len(problem.Catalogue) != len(tests) {
		t.Errorf("catalogue has %d kinds, this test knows %d", len(problem.Catalogue), len(tests))
	}
}

func TestDecodedProblemMatchesBySlugOfType(t *testing.T) {
	t.Parallel()
	var p problem.Problem
	if err := json.Unmarshal([]byte(`{"type":"https://x.test/problems/circuit-open","title":"t","status":503}`), &p); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(&p, problem.CircuitOpen) || errors.Is(&p, problem.RateLimited) {
		t.Errorf("decoded problem: errors.Is by its type's slug does not hold")
	}
}

func TestSeconds(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    time.Duration
		want int
	}{
		{0, 1}, {-time.Second, 1}, {time.Millisecond, 1}, {time.Second, 1},
		{1001 * time.Millisecond, 2}, {17 * time.Second, 17}, {90 * time.Second, 90},
	}
	for _, tt := range tests {
		if got := problem.Seconds(tt.d); got != tt.want {
			t.Errorf("Seconds(%s) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestWrite(t *testing.T) {
	t.Parallel()
	c := problem.Catalog{Base: "/problems/"}
	p := c.New(problem.CircuitOpen, "open")
	p.SetRetryAfter(1500 * time.Millisecond)
	rec := httptest.NewRecorder()
	problem.Write(rec, p, nil)
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status %d, want 503", rec.Code)
	}
	if ct := rec.Header().Get("Content-Type"); ct != problem.ContentType {
		t.Errorf("content type %q", ct)
	}
	if ra := rec.Header().Get("Retry-After"); ra != "2" {
		t.Errorf("Retry-After %q, want 2", ra)
	}
	if ns := rec.Header().Get("X-Content-Type-Options"); ns != "nosniff" {
		t.Errorf("X-Content-Type-Options %q, want nosniff", ns)
	}
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != "/problems/circuit-open" || got["retry_after"] != float64(2) || got["status"] != float64(503) {
		t.Errorf("body %v", got)
	}
	if _, ok := got["invalid_params"]; ok {
		t.Errorf("invalid_params present on a non-validation problem")
	}
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	c := problem.Catalog{Base: "/problems/"}
	p := c.Invalid(problem.InvalidParam{Name: "domain", Reason: "bad"}, problem.InvalidParam{Name: "id", Reason: "bad"})
	if p.Status != 400 || len(p.InvalidParams) != 2 || !errors.Is(p, problem.InvalidQuery) {
		t.Errorf("Invalid = %+v", p)
	}
}

// A problem document carries its answer's X-Request-Id as request_id,
// extension documents (a struct embedding the problem) included; without
// the header it has no request_id member at all.
func TestWriteRequestID(t *testing.T) {
	t.Parallel()
	c := problem.Catalog{Base: "/problems/"}
	type withSources struct {
		*problem.Problem
		Sources []string `json:"sources"`
	}
	tests := []struct {
		name   string
		header string // the answer's X-Request-Id, set before Write
		preset string // the problem's own RequestID
		extra  bool
		want   any // request_id in the body; nil for absent
	}{
		{"from the answer's header", "req-7", "", false, "req-7"},
		{"in an extension document", "req-8", "", true, "req-8"},
		{"the problem's own id wins", "req-9", "own", false, "own"},
		{"no header, no member", "", "", false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := httptest.NewRecorder()
			if tt.header != "" {
				rec.Header().Set("X-Request-Id", tt.header)
			}
			p := c.New(problem.NoSourceAvailable, "none")
			p.RequestID = tt.preset
			var extra any
			if tt.extra {
				extra = withSources{Problem: p, Sources: []string{"caba"}}
			}
			problem.Write(rec, p, extra)
			var got map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if v, ok := got["request_id"]; (tt.want == nil && ok) || (tt.want != nil && v != tt.want) {
				t.Errorf("request_id = %v (present %v), want %v; body %s", v, ok, tt.want, rec.Body.String())
			}
			if tt.extra && got["sources"] == nil {
				t.Errorf("extension member lost: %s", rec.Body.String())
			}
		})
	}
}
