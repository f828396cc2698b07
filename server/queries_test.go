package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/async"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/internal/apitest"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/mapping"
)

// fakeAsync is a hand-written AsyncQueries that records what it is asked.
type fakeAsync struct {
	submitted []async.Request
	err       error
}

var _ AsyncQueries = (*fakeAsync)(nil)

func (f *fakeAsync) MaxWait() time.Duration { return time.Hour }

func (f *fakeAsync) CheckCallback(_ context.Context, raw string) string {
	if strings.Contains(raw, "127.0.0.1") {
		return "targets a private address"
	}
	return ""
}

func (f *fakeAsync) Submit(_ context.Context, r async.Request) (async.View, error) {
	f.submitted = append(f.submitted, r)
	now := time.Date(2026, 3, 14, 9, 12, 0, 0, time.UTC)
	return async.View{ID: "q_1", Status: async.Pending, CreatedAt: now, ExpiresAt: now.Add(r.MaxWait),
		Result: aggregator.NewResult(r.Query, nil, nil)}, f.err
}

func (f *fakeAsync) Get(_ context.Context, id string) (async.View, error) {
	if id != "q_1" {
		return async.View{}, async.ErrNotFound
	}
	return async.View{ID: id, Status: async.Pending, Result: aggregator.NewResult(aggregator.Query{Domain: "AB123CD"}, nil, nil)}, f.err
}

func (f *fakeAsync) DLQ(context.Context) ([]async.DLQEntry, error) { return nil, f.err }

func (f *fakeAsync) Redeliver(_ context.Context, id string) error {
	if id != "dlv_1" {
		return async.ErrNotFound
	}
	return f.err
}

func (f *fakeAsync) DeleteDLQ(_ context.Context, id string) error {
	return f.Redeliver(context.Background(), id)
}

func newAsyncServer(t *testing.T, a AsyncQueries) *Server {
	t.Helper()
	src, err := sources.New(sources.Spec{ID: "caba", Jurisdiction: "CABA", BaseURL: "http://portal.invalid",
		Operations: map[aggregator.Operation]sources.OperationSpec{aggregator.ByDomain: {Method: http.MethodGet, Path: "/a?d={domain}"}},
		Response:   mapping.Response{Fields: map[string]mapping.Field{"id": {Select: mapping.List{"/id"}}}}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{})
	eng := fanout.New([]fanout.Member{{Source: src, BreakerKey: "caba", Timeout: time.Second}}, fanout.Options{Breakers: set})
	t.Cleanup(eng.Close)
	opts := Options{Engine: eng, Breakers: set, Problems: problem.Catalog{Base: "https://e.test/problems/"}, AdminToken: "tok"}
	if a != nil {
		opts.Async = a
	}
	return New(opts)
}

func TestQueriesHandlers(t *testing.T) {
	v := apitest.New(t)
	fake := &fakeAsync{}
	s := newAsyncServer(t, fake)
	do := func(method, path, body string) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(method, path, strings.NewReader(body))
		if strings.HasPrefix(path, "/v1/admin") {
			req.Header.Set("Authorization", "Bearer tok")
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		v.CheckRecorder(t, req, rec)
		return rec
	}

	rec := do(http.MethodPost, "/v1/queries", `{"domain": "ab 123 cd", "callback_url": "https://hooks.example.com/", "max_wait": "90s", "sources": ["caba"]}`)
	if rec.Code != http.StatusAccepted || rec.Header().Get("Location") != "/v1/queries/q_1" || rec.Header().Get("Cache-Control") != "no-store" {
		t.Fatalf("POST: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	if r := fake.submitted[0]; r.Query.Domain != "AB123CD" || r.MaxWait != 90*time.Second || len(r.Sources) != 1 || r.CallbackURL != "https://hooks.example.com/" {
		t.Errorf("submitted %+v", r)
	}
	if rec := do(http.MethodPost, "/v1/queries", `{"domain": "AB123CD", "callback_url": "http://127.0.0.1/"}`); rec.Code != http.StatusBadRequest ||
		!strings.Contains(rec.Body.String(), `"name":"callback_url"`) {
		t.Errorf("private callback: %d %s", rec.Code, rec.Body)
	}
	if rec := do(http.MethodGet, "/v1/queries/q_1", ""); rec.Code != http.StatusOK || rec.Header().Get("Cache-Control") != "no-store" {
		t.Errorf("GET: %d %v", rec.Code, rec.Header())
	}
	if rec := do(http.MethodGet, "/v1/queries/q_2", ""); rec.Code != http.StatusNotFound {
		t.Errorf("GET unknown: %d", rec.Code)
	}
	if rec := do(http.MethodGet, "/v1/admin/dlq", ""); rec.Code != http.StatusOK || strings.TrimSpace(rec.Body.String()) != `{"entries":[]}` {
		t.Errorf("DLQ: %d %s", rec.Code, rec.Body)
	}
	for _, tc := range []struct {
		method, path string
		want         int
	}{
		{http.MethodPost, "/v1/admin/dlq/dlv_1/redeliver", http.StatusAccepted},
		{http.MethodPost, "/v1/admin/dlq/dlv_2/redeliver", http.StatusNotFound},
		{http.MethodDelete, "/v1/admin/dlq/dlv_1", http.StatusNoContent},
		{http.MethodDelete, "/v1/admin/dlq/dlv_2", http.StatusNotFound},
	} {
		if rec := do(tc.method, tc.path, ""); rec.Code != tc.want {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.path, rec.Code, tc.want)
		}
	}

	// A failing store is a 500 that discloses nothing.
	fake.err = errors.New("redis: connection refused")
	if rec := do(http.MethodGet, "/v1/queries/q_1", ""); rec.Code != http.StatusInternalServerError || strings.Contains(rec.Body.String(), "redis") {
		t.Errorf("store error: %d %s", rec.Code, rec.Body)
	}

	// Without asynchronous queries the routes answer 404.
	off := newAsyncServer(t, nil)
	req := httptest.NewRequest(http.MethodGet, "/v1/admin/dlq", nil)
	req.Header.Set("Authorization", "Bearer tok")
	rec = httptest.NewRecorder()
	off.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound {
		t.Errorf("disabled DLQ: %d", rec.Code)
	}
}

// TestJSONAnswersAreSized: a JSON answer goes whole, with its
// Content-Length, even when larger than net/http's buffer (which would
// send it chunked).
func TestJSONAnswersAreSized(t *testing.T) {
	t.Parallel()
	r := gin.New()
	big := make([]string, 1000) // about 9 KB of JSON
	for i := range big {
		big[i] = fmt.Sprintf("AB%03dCD", i)
	}
	r.GET("/big", func(c *gin.Context) { writeJSON(c, http.StatusOK, big) })
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	resp, err := srv.Client().Get(srv.URL + "/big")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(body) < 4096 || resp.ContentLength != int64(len(body)) || len(resp.TransferEncoding) > 0 {
		t.Errorf("GET /big: %d, Content-Length %d for %d bytes, Transfer-Encoding %v",
			resp.StatusCode, resp.ContentLength, len(body), resp.TransferEncoding)
	}
}
