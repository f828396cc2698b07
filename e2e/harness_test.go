package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/apitest"
)

// The configuration every test shares: an admin token, a problem base URI
// that makes type URIs easy to recognise, and small breaker settings so that
// trips and recoveries happen within a test's time.
const (
	adminToken = "e2e-admin-token"
	baseURI    = "https://errors.multas.test/problems/"
)

// The people and vehicles of the tests. The CUIT's check digit is valid;
// badCUIT differs from it in the check digit only.
const (
	plate      = "AB123CD"
	cuit       = "20-31415926-9"
	cuitDigits = "20314159269"
	badCUIT    = "20-31415926-8"
	dni        = "31415926"
)

// ---------------------------------------------------------------------------
// Portals: the outside world, faked faithfully as real HTTP servers.

// portal is a fake jurisdiction portal. It records every request it
// receives before its current behaviour (a handler, changeable at run time)
// answers it.
type portal struct {
	URL string

	srv  *httptest.Server
	stop chan struct{} // closed at cleanup: hanging and slow handlers return

	mu       sync.Mutex
	handler  http.Handler
	received []string // request URIs, in order of arrival
	finished int      // requests whose handler returned
}

// newPortal starts a portal answering with h (a 404 to everything when nil).
func newPortal(t *testing.T, h http.Handler) *portal {
	t.Helper()
	if h == nil {
		h = http.NotFoundHandler()
	}
	p := &portal{handler: h, stop: make(chan struct{})}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(func() {
		close(p.stop)
		p.srv.Close()
	})
	return p
}

func (p *portal) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.received = append(p.received, r.URL.RequestURI())
	h := p.handler
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.finished++
		p.mu.Unlock()
	}()
	h.ServeHTTP(w, r)
}

// set changes how the portal answers from the next request on.
func (p *portal) set(h http.Handler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.handler = h
}

// calls is how many requests the portal has received.
func (p *portal) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.received)
}

// requests lists the URIs of the requests received, in order.
func (p *portal) requests() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.received...)
}

// done is how many received requests have been answered or abandoned.
func (p *portal) done() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.finished
}

// hang never answers: it returns when the client goes away.
func (p *portal) hang() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-p.stop:
		}
	})
}

// slow runs h after d, unless the client goes away first.
func (p *portal) slow(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			h.ServeHTTP(w, r)
		case <-r.Context().Done():
		case <-p.stop:
		}
	})
}

// gated runs h once gate is closed, unless the client goes away first: a
// portal as slow as the test needs it to be.
func (p *portal) gated(gate <-chan struct{}, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-gate:
			h.ServeHTTP(w, r)
		case <-r.Context().Done():
		case <-p.stop:
		}
	})
}

// acta is one infraction as the fake portals write it.
type acta map[string]any

// actas answers a lookup with items, in the dialect the test sources map
// (SPEC 6's example): {"resultado": {"actas": [...]}}.
func actas(items ...acta) http.Handler {
	if items == nil {
		items = []acta{}
	}
	body, err := json.Marshal(map[string]any{"resultado": map[string]any{"actas": items}})
	if err != nil {
		panic(err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
}

// status answers code with a small JSON body and the header pairs given.
func status(code int, header ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error": %q}`, http.StatusText(code))
	})
}

// hangUp closes the connection without answering: a portal whose process
// has crashed, as the client sees it.
func hangUp() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err)
		}
		conn.Close()
	})
}

// one is a single infraction, for portals whose content does not matter.
func one(id string) http.Handler {
	return actas(acta{"nro": id, "fecha": "2026-03-14 09:12", "monto": 1000, "estado": "IMPAGA"})
}

// ---------------------------------------------------------------------------
// Configuration.

// stdOps are the three operations at the paths the fake portals serve.
const stdOps = `{by_domain: {path: "/actas?dominio={domain}"}, by_id: {path: "/personas/{id_kind}/{id}"}, voucher: {path: "/actas/{infraction_id}/boleta"}}`

// source is one source of a test's configuration.
type source struct {
	id, url string
	// key is the breaker_key; empty for the default (the id).
	key string
	// ops is the YAML of the operations block; empty for stdOps.
	ops string
	// extra are more keys of the source, one YAML line each, such as
	// "timeout: 100ms" or "breaker: {min_calls: 1}".
	extra []string
}

// configYAML writes a configuration over srcs. admin is the admin token
// ("" for none). Every source maps SPEC 6's example dialect; defaults keep
// breakers small and retries off, so that each query makes one call.
func configYAML(admin string, srcs ...source) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server: {admin_token: %q}\n", admin)
	fmt.Fprintf(&b, "problems: {base_uri: %q}\n", baseURI)
	b.WriteString(`query: {deadline: 3s, max_deadline: 10s}
defaults:
  timeout: 2s
  time_zone: America/Argentina/Buenos_Aires
  currency: ARS
  retry: {max_retries: 0, initial_backoff: 10ms, max_backoff: 100ms}
  breaker: {window: 10s, min_calls: 4, failure_ratio: 0.5, open_for: 300ms}
sources:
`)
	for _, s := range srcs {
		ops := s.ops
		if ops == "" {
			ops = stdOps
		}
		fmt.Fprintf(&b, "  - id: %s\n    jurisdiction: %q\n    base_url: %q\n", s.id, "Jurisdicción "+s.id, s.url)
		if s.key != "" {
			fmt.Fprintf(&b, "    breaker_key: %s\n", s.key)
		}
		fmt.Fprintf(&b, "    operations: %s\n", ops)
		b.WriteString(`    response:
      items: /resultado/actas
      fields: {id: /nro, date: /fecha, description: /detalle, place: /lugar, amount: /monto, currency: /moneda, status: /estado}
      status_map: {IMPAGA: unpaid, PAGADA: paid, "EN GESTION": in_process}
`)
		for _, line := range s.extra {
			fmt.Fprintf(&b, "    %s\n", line)
		}
	}
	return b.String()
}

// newConfig parses configYAML(admin, srcs...).
func newConfig(t *testing.T, admin string, srcs ...source) *config.Config {
	t.Helper()
	text := configYAML(admin, srcs...)
	cfg, err := config.Parse([]byte(text), "e2e.yaml", nil)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, text)
	}
	return cfg
}

// ---------------------------------------------------------------------------
// The aggregator under test, and its client.

// env is one aggregator replica served on a real listener.
type env struct {
	t      *testing.T
	app    *app.App
	srv    *httptest.Server
	api    *apitest.Validator
	client *http.Client
	// queries counts the queries that reached the aggregator's handler.
	queries atomic.Int64
}

// start builds a replica of cfg and serves it until the test ends.
func start(t *testing.T, cfg *config.Config, opts app.Options) *env {
	t.Helper()
	a, err := app.New(cfg, opts)
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	t.Cleanup(func() { _ = a.Close() }) // its background work (async queries) stops
	e := &env{t: t, app: a, api: apitest.New(t)}
	e.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/infractions" {
			e.queries.Add(1)
		}
		a.Server.ServeHTTP(w, r)
	}))
	e.client = e.srv.Client()
	t.Cleanup(e.srv.Close)
	return e
}

// startWith is start over a fresh configuration of srcs, with the admin
// token set.
func startWith(t *testing.T, srcs ...source) *env {
	t.Helper()
	return start(t, newConfig(t, adminToken, srcs...), app.Options{})
}

// do sends a request, checks the answer against the OpenAPI document, and
// returns it with its body (already read). A transport error is reported
// with t.Errorf and comes back as status 0, so do is safe in goroutines.
func (e *env) do(method, path string, header http.Header, body string) (*http.Response, []byte) {
	e.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		e.t.Errorf("%s %s: %v", method, path, err)
		return &http.Response{Header: http.Header{}}, nil
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Errorf("%s %s: %v", method, path, err)
		return &http.Response{Header: http.Header{}}, nil
	}
	return resp, e.api.CheckResponse(e.t, resp)
}

// get is do for a GET without headers.
func (e *env) get(path string) (*http.Response, []byte) {
	e.t.Helper()
	return e.do(http.MethodGet, path, nil, "")
}

// answer is the aggregator's answer to a query: a result or a problem.
type answer struct {
	status  int
	header  http.Header
	took    time.Duration
	result  result
	problem problemDoc
}

// query asks GET /v1/infractions?params and decodes the answer.
func (e *env) query(params string) answer {
	e.t.Helper()
	return e.queryHeader(nil, params)
}

// queryHeader is query with the request headers h.
func (e *env) queryHeader(h http.Header, params string) answer {
	e.t.Helper()
	begin := time.Now()
	resp, body := e.do(http.MethodGet, "/v1/infractions?"+params, h, "")
	a := answer{status: resp.StatusCode, header: resp.Header, took: time.Since(begin)}
	var err error
	if resp.StatusCode == http.StatusOK {
		err = json.Unmarshal(body, &a.result)
	} else {
		err = json.Unmarshal(body, &a.problem)
	}
	if err != nil {
		e.t.Errorf("query %s: decoding %d answer: %v\n%s", params, resp.StatusCode, err, body)
	}
	return a
}

// byDomain queries by domain, with more parameters if given.
func (e *env) byDomain(domain string, more ...string) answer {
	e.t.Helper()
	return e.query(strings.Join(append([]string{"domain=" + url.QueryEscape(domain)}, more...), "&"))
}

// admin sends an admin request with the bearer token.
func (e *env) admin(method, path, body string) (*http.Response, []byte) {
	e.t.Helper()
	h := http.Header{"Authorization": {"Bearer " + adminToken}}
	if body != "" {
		h.Set("Content-Type", "application/json")
	}
	return e.do(method, "/v1/admin"+path, h, body)
}

// breakers reads GET /v1/admin/breakers.
func (e *env) breakers() []breakerView {
	e.t.Helper()
	resp, body := e.admin(http.MethodGet, "/breakers", "")
	var doc struct {
		Breakers []breakerView `json:"breakers"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &doc) != nil {
		e.t.Errorf("GET /v1/admin/breakers: got %d %s", resp.StatusCode, body)
	}
	return doc.Breakers
}

// breaker reads one breaker through the admin API.
func (e *env) breaker(key, op string) breakerView {
	e.t.Helper()
	for _, b := range e.breakers() {
		if b.BreakerKey == key && b.Operation == op {
			return b
		}
	}
	e.t.Errorf("breaker %s/%s: not in GET /v1/admin/breakers", key, op)
	return breakerView{}
}

// waitState polls the admin API until breaker key/op is in state.
func (e *env) waitState(key, op, state string) breakerView {
	e.t.Helper()
	var b breakerView
	eventually(e.t, 5*time.Second, fmt.Sprintf("breaker %s/%s %s", key, op, state), func() bool {
		b = e.breaker(key, op)
		return b.State == state
	})
	return b
}

// forceOpen forces breaker key/op open through the admin API.
func (e *env) forceOpen(key, op string) {
	e.t.Helper()
	if resp, body := e.admin(http.MethodPost, "/breakers/"+key+"/"+op+"/open", ""); resp.StatusCode != http.StatusOK {
		e.t.Fatalf("forcing %s/%s open: got %d %s, want 200", key, op, resp.StatusCode, body)
	}
}

// eventually polls cond until it holds, failing the test after within.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---------------------------------------------------------------------------
// The wire documents, decoded independently of the server's own types.

type result struct {
	Query       queryEcho     `json:"query"`
	Complete    bool          `json:"complete"`
	Summary     summary       `json:"summary"`
	Infractions []infraction  `json:"infractions"`
	Sources     []sourceEntry `json:"sources"`
}

type queryEcho struct {
	Domain string `json:"domain"`
	ID     string `json:"id"`
}

type summary struct {
	Total     int `json:"total"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	Stale     int `json:"stale"`
}

type infraction struct {
	Source       string `json:"source"`
	Jurisdiction string `json:"jurisdiction"`
	ID           string `json:"id"`
	Date         string `json:"date"`
	Description  string `json:"description"`
	Place        string `json:"place"`
	Amount       string `json:"amount"`
	Currency     string `json:"currency"`
	Status       string `json:"status"`
	StatusRaw    string `json:"status_raw"`
	Voucher      string `json:"voucher"`
	Stale        bool   `json:"stale"`
}

type sourceEntry struct {
	Source       string      `json:"source"`
	Jurisdiction string      `json:"jurisdiction"`
	Operation    string      `json:"operation"`
	Status       string      `json:"status"`
	Count        *int        `json:"count"`
	DurationMS   *int64      `json:"duration_ms"`
	Problem      *problemDoc `json:"problem"`
	Remembered   *struct {
		AsOf time.Time `json:"as_of"`
	} `json:"remembered"`
}

type problemDoc struct {
	Type          string         `json:"type"`
	Title         string         `json:"title"`
	Status        int            `json:"status"`
	Detail        string         `json:"detail"`
	Instance      string         `json:"instance"`
	RetryAfter    *int           `json:"retry_after"`
	InvalidParams []invalidParam `json:"invalid_params"`
	Sources       []sourceEntry  `json:"sources"`
}

type invalidParam struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

type breakerView struct {
	BreakerKey       string     `json:"breaker_key"`
	Operation        string     `json:"operation"`
	Sources          []string   `json:"sources"`
	State            string     `json:"state"`
	OpenUntil        *time.Time `json:"open_until"`
	OpenSecondsTotal float64    `json:"open_seconds_total"`
	Window           struct {
		Calls    int     `json:"calls"`
		Failures int     `json:"failures"`
		Ratio    float64 `json:"ratio"`
	} `json:"window"`
	LastTransition *event         `json:"last_transition"`
	Settings       map[string]any `json:"settings"`
}

type event struct {
	Time       time.Time          `json:"time"`
	BreakerKey string             `json:"breaker_key"`
	Operation  string             `json:"operation"`
	From       string             `json:"from"`
	To         string             `json:"to"`
	Reason     string             `json:"reason"`
	Evidence   map[string]float64 `json:"evidence"`
}

// entry returns the sources[] entry of source in r.
func (r result) entry(t *testing.T, source string) sourceEntry {
	t.Helper()
	return findEntry(t, r.Sources, source)
}

func findEntry(t *testing.T, entries []sourceEntry, source string) sourceEntry {
	t.Helper()
	for _, e := range entries {
		if e.Source == source {
			return e
		}
	}
	t.Errorf("no sources[] entry for %q in %+v", source, entries)
	return sourceEntry{}
}

// checkEntry checks an entry's status and, unless slug is empty, that its
// problem has exactly that type.
func checkEntry(t *testing.T, e sourceEntry, status, slug string) {
	t.Helper()
	if e.Status != status {
		t.Errorf("source %s: got status %q, want %q (problem %+v)", e.Source, e.Status, status, e.Problem)
	}
	if slug == "" {
		if e.Problem != nil {
			t.Errorf("source %s: got problem %+v, want none", e.Source, *e.Problem)
		}
		return
	}
	if e.Problem == nil {
		t.Errorf("source %s: no problem, want %s", e.Source, slug)
		return
	}
	checkType(t, *e.Problem, slug)
}

// checkType checks that a problem's type is the base URI followed by slug,
// literally.
func checkType(t *testing.T, p problemDoc, slug string) {
	t.Helper()
	if want := baseURI + slug; p.Type != want {
		t.Errorf("problem type: got %q, want %q (%+v)", p.Type, want, p)
	}
}

// retryAfter is a problem's retry_after, or -1 when absent.
func retryAfter(p *problemDoc) int {
	if p == nil || p.RetryAfter == nil {
		return -1
	}
	return *p.RetryAfter
}

// paramNames lists the names of a problem's invalid_params.
func paramNames(p problemDoc) []string {
	names := make([]string, len(p.InvalidParams))
	for i, ip := range p.InvalidParams {
		names[i] = ip.Name
	}
	return names
}

// entries are the sources[] of an answer: of the result, or of the 503
// no-source-available problem.
func (a answer) entries() []sourceEntry {
	if a.status == http.StatusOK {
		return a.result.Sources
	}
	return a.problem.Sources
}

// entry is the sources[] entry of source in a result or a 503 problem.
func (a answer) entry(t *testing.T, source string) sourceEntry {
	t.Helper()
	return findEntry(t, a.entries(), source)
}
