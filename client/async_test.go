package client_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/client"
	"github.com/multas/aggregator/internal/apitest"
	"github.com/multas/aggregator/problem"
)

// fakeQueries stands for the server's asynchronous queries (SPEC 3.4),
// which the aggregator does not serve yet. It is held faithful to
// api/openapi.yaml: every answer it gives is checked with apitest, and the
// request bodies it receives are kept for the tests to check against the
// AsyncQueryRequest schema.
type fakeQueries struct {
	t        testing.TB
	v        *apitest.Validator
	problems problem.Catalog
	now      time.Time

	mu       sync.Mutex
	queries  map[string]*client.AsyncQuery
	requests [][]byte
}

func newFakeQueries(t testing.TB) *fakeQueries {
	return &fakeQueries{
		t:        t,
		v:        apitest.New(t),
		problems: problem.Catalog{Base: "https://aggregator.example/problems/"},
		now:      time.Date(2026, 3, 20, 10, 0, 0, 0, time.FixedZone("ART", -3*3600)),
		queries:  map[string]*client.AsyncQuery{},
	}
}

// ServeHTTP answers, then checks the answer against the contract.
func (f *fakeQueries) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	f.serve(rec, r)
	f.v.CheckRecorder(f.t, r, rec)
	for k, vs := range rec.Header() {
		w.Header()[k] = vs
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (f *fakeQueries) serve(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/v1/queries":
		f.create(w, r)
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/queries/"):
		f.get(w, strings.TrimPrefix(r.URL.Path, "/v1/queries/"))
	default:
		problem.Write(w, f.problems.New(problem.NotFound, "No such resource."), nil)
	}
}

// create validates the request as SPEC 3.4 says (but for the private
// address check: the fake resolves nothing) and accepts it as pending.
func (f *fakeQueries) create(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	f.mu.Lock()
	f.requests = append(f.requests, body)
	f.mu.Unlock()
	var req struct {
		Domain      *string  `json:"domain"`
		ID          *string  `json:"id"`
		CallbackURL string   `json:"callback_url"`
		Sources     []string `json:"sources"`
		MaxWait     string   `json:"max_wait"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		problem.Write(w, f.problems.Invalid(problem.InvalidParam{Name: "body", Reason: "not a JSON object"}), nil)
		return
	}
	var bad []problem.InvalidParam
	if (req.Domain == nil) == (req.ID == nil) {
		bad = append(bad, problem.InvalidParam{Name: "domain", Reason: "exactly one of domain and id is required"})
	}
	if u, err := url.Parse(req.CallbackURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		bad = append(bad, problem.InvalidParam{Name: "callback_url", Reason: "must be an absolute http or https URL"})
	}
	maxWait := time.Hour
	if req.MaxWait != "" {
		d, err := time.ParseDuration(req.MaxWait)
		if err != nil || d <= 0 || d > time.Hour {
			bad = append(bad, problem.InvalidParam{Name: "max_wait", Reason: "must be a positive Go duration up to 1h0m0s"})
		}
		maxWait = d
	}
	if len(bad) > 0 {
		problem.Write(w, f.problems.Invalid(bad...), nil)
		return
	}
	echo := aggregator.QueryEcho{}
	if req.Domain != nil {
		echo.Domain = strings.ToUpper(*req.Domain)
	} else {
		echo.ID = strings.ReplaceAll(*req.ID, "-", "")
	}
	f.mu.Lock()
	id := "q" + strconv.Itoa(len(f.queries)+1)
	q := &client.AsyncQuery{
		ID: id, Status: client.QueryPending, CreatedAt: f.now, ExpiresAt: f.now.Add(maxWait),
		Result: f.partial(echo),
	}
	f.queries[id] = q
	f.mu.Unlock()
	w.Header().Set("Location", "/v1/queries/"+id)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusAccepted, q)
}

// get answers a query; the first look at a pending one finds it completed,
// the breaker of its skipped source having closed meanwhile.
func (f *fakeQueries) get(w http.ResponseWriter, id string) {
	f.mu.Lock()
	q, ok := f.queries[id]
	if ok && q.Status == client.QueryPending {
		done := f.now.Add(40 * time.Second)
		q.Status, q.CompletedAt = client.QueryCompleted, &done
		q.Result = f.complete(q.Result.Query)
	}
	var doc []byte
	if ok {
		doc, _ = json.Marshal(q)
	}
	f.mu.Unlock()
	if !ok {
		problem.Write(w, f.problems.New(problem.NotFound, "No such query."), nil)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(doc)
}

func (f *fakeQueries) partial(q aggregator.QueryEcho) *aggregator.Result {
	open := f.problems.New(problem.CircuitOpen, "The breaker of (cordoba, by_domain) is open.")
	open.SetRetryAfter(30 * time.Second)
	open.Slug = "" // as it travels: the type carries it
	r := aggregator.NewResult(aggregator.Query{Domain: q.Domain, ID: q.ID}, []aggregator.SourceResult{
		{Source: "caba", Jurisdiction: "Ciudad de Buenos Aires", Operation: aggregator.ByDomain, Status: aggregator.EntrySucceeded, Count: ptr(1), DurationMS: ptr[int64](41)},
		{Source: "cordoba", Jurisdiction: "Provincia de Córdoba", Operation: aggregator.ByDomain, Status: aggregator.EntrySkipped, Problem: open},
	}, []aggregator.Infraction{infraction("caba", "Q-10442")})
	return &r
}

func (f *fakeQueries) complete(q aggregator.QueryEcho) *aggregator.Result {
	r := aggregator.NewResult(aggregator.Query{Domain: q.Domain, ID: q.ID}, []aggregator.SourceResult{
		{Source: "caba", Jurisdiction: "Ciudad de Buenos Aires", Operation: aggregator.ByDomain, Status: aggregator.EntrySucceeded, Count: ptr(1), DurationMS: ptr[int64](41)},
		{Source: "cordoba", Jurisdiction: "Provincia de Córdoba", Operation: aggregator.ByDomain, Status: aggregator.EntrySucceeded, Count: ptr(1), DurationMS: ptr[int64](120)},
	}, []aggregator.Infraction{infraction("caba", "Q-10442"), infraction("cordoba", "CBA-2026-004512")})
	return &r
}

func infraction(source, id string) aggregator.Infraction {
	return aggregator.Infraction{
		Source: source, Jurisdiction: source, ID: id, Date: "2026-03-14T09:12:00-03:00",
		Amount: "185000.00", Currency: "ARS", Status: aggregator.Unpaid, StatusRaw: "IMPAGA",
		Voucher: "/v1/sources/" + source + "/infractions/" + id + "/voucher",
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func ptr[T any](v T) *T { return &v }

func TestAsync(t *testing.T) {
	t.Parallel()
	fake := newFakeQueries(t)
	srv := httptest.NewServer(fake)
	defer srv.Close()
	c := newClient(t, srv.URL)

	q, err := c.CreateQuery(t.Context(), client.AsyncRequest{
		Domain: "ab123cd", CallbackURL: "https://fleet.example/hooks/multas",
		Sources: []string{"caba", "cordoba"}, MaxWait: 10 * time.Minute,
	})
	if err != nil {
		t.Fatalf("CreateQuery: %v", err)
	}
	if q.Status != client.QueryPending || q.Done() || q.Location != "/v1/queries/"+q.ID || q.CompletedAt != nil {
		t.Errorf("created %+v, want pending at /v1/queries/%s", q, q.ID)
	}
	if want := fake.now.Add(10 * time.Minute); !q.ExpiresAt.Equal(want) {
		t.Errorf("expires_at %v, want %v (max_wait sent as 10m0s)", q.ExpiresAt, want)
	}
	if p := client.SourceErrors(q.Result)["cordoba"]; p == nil || p.Slug != problem.CircuitOpen {
		t.Errorf("result so far: cordoba's problem %+v, want circuit-open with its Slug set", p)
	}

	got, err := c.GetQuery(t.Context(), q.ID)
	if err != nil {
		t.Fatalf("GetQuery: %v", err)
	}
	if got.Status != client.QueryCompleted || !got.Done() || got.CompletedAt == nil || got.Result == nil || !got.Result.Complete {
		t.Errorf("got %+v, want completed with a complete result", got)
	}
	if got.Result != nil && got.Result.Query.Domain != "AB123CD" {
		t.Errorf("query echo %+v", got.Result.Query)
	}

	fake.mu.Lock()
	requests := fake.requests
	fake.mu.Unlock()
	for _, body := range requests {
		if err := validate(t, "AsyncQueryRequest", body, false); err != nil {
			t.Errorf("the client sent %s, not an AsyncQueryRequest: %v", body, err)
		}
		if !strings.Contains(string(body), `"max_wait":"10m0s"`) {
			t.Errorf("the client sent %s, want max_wait as a Go duration", body)
		}
	}
}

func TestAsyncErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newFakeQueries(t))
	defer srv.Close()
	c := newClient(t, srv.URL)

	tests := []struct {
		name  string
		call  func() error
		slug  problem.Slug
		param string
	}{
		{
			name: "no callback",
			call: func() error {
				_, err := c.CreateQuery(t.Context(), client.AsyncRequest{Domain: "AB123CD"})
				return err
			},
			slug: problem.InvalidQuery, param: "callback_url",
		},
		{
			name: "max_wait too long",
			call: func() error {
				_, err := c.CreateQuery(t.Context(), client.AsyncRequest{ID: "20-12345678-6", CallbackURL: "https://x.example/h", MaxWait: 2 * time.Hour})
				return err
			},
			slug: problem.InvalidQuery, param: "max_wait",
		},
		{
			name: "unknown query",
			call: func() error {
				_, err := c.GetQuery(t.Context(), "nope")
				return err
			},
			slug: problem.NotFound,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var p *problem.Problem
			if !errors.As(err, &p) || !errors.Is(err, tt.slug) {
				t.Fatalf("error %v, want a %s problem", err, tt.slug)
			}
			if tt.param != "" && (len(p.InvalidParams) != 1 || p.InvalidParams[0].Name != tt.param) {
				t.Errorf("invalid_params %+v, want %s", p.InvalidParams, tt.param)
			}
		})
	}
	if _, err := c.GetQuery(t.Context(), ""); err == nil {
		t.Errorf("GetQuery(\"\") sent a request")
	}
}

// TestAsyncRequestJSON checks the wire form of AsyncRequest both ways.
func TestAsyncRequestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		req  client.AsyncRequest
		want string
	}{
		{client.AsyncRequest{Domain: "AB123CD", CallbackURL: "https://x.example/h"},
			`{"domain":"AB123CD","callback_url":"https://x.example/h"}`},
		{client.AsyncRequest{ID: "20123456786", CallbackURL: "https://x.example/h", Sources: []string{"caba"}, MaxWait: 90 * time.Second},
			`{"id":"20123456786","callback_url":"https://x.example/h","sources":["caba"],"max_wait":"1m30s"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.req)
		if err != nil || string(b) != tt.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tt.req, b, err, tt.want)
		}
		if err := validate(t, "AsyncQueryRequest", b, false); err != nil {
			t.Errorf("%s is not an AsyncQueryRequest: %v", b, err)
		}
		var back client.AsyncRequest
		if err := json.Unmarshal(b, &back); err != nil || back.MaxWait != tt.req.MaxWait || back.CallbackURL != tt.req.CallbackURL {
			t.Errorf("Unmarshal(%s) = %+v, %v", b, back, err)
		}
	}
	var r client.AsyncRequest
	if err := json.Unmarshal([]byte(`{"max_wait":"soon"}`), &r); err == nil {
		t.Errorf("max_wait \"soon\" decoded")
	}
}

// webhookSecret is the signing secret of the aggregator of TestAsyncServer.
const webhookSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// TestAsyncServer runs an asynchronous query through a real aggregator: its
// answers match the contract, and its delivery verifies with VerifyWebhook
// and decodes as a WebhookEvent.
func TestAsyncServer(t *testing.T) {
	t.Parallel()
	type delivery struct {
		header http.Header
		body   []byte
	}
	deliveries := make(chan delivery, 4)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		deliveries <- delivery{r.Header.Clone(), body}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer receiver.Close()
	header := strings.Replace(baseYAML, "query:",
		`webhooks: {signing_secret: "`+webhookSecret+`", allow_private: true}`+"\nquery:", 1)
	e := newEnv(t, header)
	rec := &recorder{}
	c := newClient(t, e.URL, client.WithHTTPClient(&http.Client{Transport: rec}))
	v := apitest.New(t)
	checkLast := func() {
		got := rec.last()
		v.Check(t, got.req, got.status, got.header, got.body)
	}

	_, err := c.CreateQuery(t.Context(), client.AsyncRequest{Domain: "AB123CD", CallbackURL: "ftp://x.example/h"})
	if !errors.Is(err, problem.InvalidQuery) {
		t.Errorf("an ftp callback: error %v, want invalid-query", err)
	}
	checkLast()

	q, err := c.CreateQuery(t.Context(), client.AsyncRequest{
		Domain: "AB123CD", CallbackURL: receiver.URL + "/hooks/multas", Sources: []string{"caba"}, MaxWait: time.Minute,
	})
	if err != nil {
		t.Fatalf("CreateQuery: %v", err)
	}
	checkLast()
	if q.ID == "" || q.Location != "/v1/queries/"+q.ID || q.Result == nil {
		t.Errorf("created %+v", q)
	}

	var d delivery
	select {
	case d = <-deliveries:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10s")
	}
	if err := client.VerifyWebhook(webhookSecret, d.header, d.body, 0, time.Now()); err != nil {
		t.Errorf("VerifyWebhook of the aggregator's delivery: %v", err)
	}
	if err := validate(t, "WebhookEvent", d.body, false); err != nil {
		t.Errorf("delivery %s is not a WebhookEvent: %v", d.body, err)
	}
	var ev client.WebhookEvent
	if err := json.Unmarshal(d.body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != client.EventQueryCompleted || ev.Data.ID != q.ID || ev.Data.Status != client.QueryCompleted || !ev.Data.Result.Complete {
		t.Errorf("delivered %+v, want query.completed of %s", ev, q.ID)
	}

	got, err := c.GetQuery(t.Context(), q.ID)
	if err != nil {
		t.Fatalf("GetQuery: %v", err)
	}
	checkLast()
	if got.Status != client.QueryCompleted || got.CompletedAt == nil || got.Result == nil || len(got.Result.Infractions) != 2 {
		t.Errorf("got %+v, want completed with caba's 2 infractions", got)
	}
	if _, err := c.GetQuery(t.Context(), "q_nope"); !errors.Is(err, problem.NotFound) {
		t.Errorf("unknown query: error %v, want not-found", err)
	}
	checkLast()
}
