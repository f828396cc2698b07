package e2e

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/client"
	"github.com/multas/aggregator/internal/redistest"
)

// The watches of SPEC 15, end to end: the whole replica over real portals,
// real webhook receivers that verify signatures with the client package,
// and, for the shared store, a real Redis.

// The API keys of the watch tests and their webhook secrets.
var (
	fleetKey, rentalKey = "e2e-fleet-key", "e2e-rental-key"
	fleetWhsec          = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the fleet company's webhook key."))
	defaultWhsec        = "whsec_" + base64.StdEncoding.EncodeToString([]byte("the deployment's own webhook key"))
)

// watchYAML is the configuration of srcs with two API keys (fleet-co with
// a webhook secret of its own, rental-co without), a memory key and a
// watches block whose intervals fit a test (min_interval 1s), sharing
// state through st.
func watchYAML(st memStore, srcs ...source) string {
	text := fleetYAML(st.url, st.prefix, srcs...)
	text = strings.Replace(text, fmt.Sprintf("server: {admin_token: %q}\n", adminToken), fmt.Sprintf(`server:
  admin_token: %q
  api_keys:
    - {name: fleet-co, key: %q, rps: 1000, webhook_secret: %q}
    - {name: rental-co, key: %q, rps: 1000}
`, adminToken, fleetKey, fleetWhsec, rentalKey), 1)
	return text + fmt.Sprintf(`memory: {key: %q}
webhooks: {signing_secret: %q, allow_private: true, backoff: 100ms}
watches: {min_interval: 1s, default_interval: 24h, max_per_key: 3}
`, memKey, defaultWhsec)
}

// as sends a request with an API key, checked against the contract.
func (e *env) as(key, method, path, body string) (*http.Response, []byte) {
	e.t.Helper()
	h := http.Header{"X-Api-Key": {key}}
	if body != "" {
		h.Set("Content-Type", "application/json")
	}
	return e.do(method, path, h, body)
}

// watchDoc is a watch as the API answers it.
type watchDoc struct {
	WatchID     string            `json:"watch_id"`
	Subject     map[string]string `json:"subject"`
	Interval    string            `json:"interval"`
	NextCheckAt time.Time         `json:"next_check_at"`
	LastCheckAt *time.Time        `json:"last_check_at"`
	Sources     []struct {
		Source        string          `json:"source"`
		LastSuccessAt *time.Time      `json:"last_success_at"`
		Problem       json.RawMessage `json:"problem"`
	} `json:"sources"`
}

func TestWatchesAPI(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("Q-1"))
	e := replica(t, "replica", watchYAML(memStore{name: "in-process"}, source{id: "caba", url: p.URL}, source{id: "cordoba", url: p.URL}))
	hook := "http://127.0.0.1:9/hook" // allow_private; never called within the test
	tests := []struct {
		name, body string
		status     int
		params     []string
	}{
		{"created", `{"domain": "ab 123 cd", "callback_url": "` + hook + `", "interval": "1h"}`, 201, nil},
		{"by id", `{"id": "20-31415926-9", "callback_url": "` + hook + `", "sources": ["caba"]}`, 201, nil},
		{"bad plate", `{"domain": "nope", "callback_url": "` + hook + `"}`, 400, []string{"domain"}},
		{"both", `{"domain": "AB123CD", "id": "20314159269", "callback_url": "` + hook + `"}`, 400, []string{"domain", "id"}},
		{"interval below min_interval", `{"domain": "AB123CD", "callback_url": "` + hook + `", "interval": "500ms"}`, 400, []string{"interval"}},
		{"interval not a duration", `{"domain": "AB123CD", "callback_url": "` + hook + `", "interval": "daily"}`, 400, []string{"interval"}},
		{"no callback", `{"domain": "AB123CD"}`, 400, []string{"callback_url"}},
		{"callback not http", `{"domain": "AB123CD", "callback_url": "ftp://x.example/h"}`, 400, []string{"callback_url"}},
		{"unknown source", `{"domain": "AB123CD", "callback_url": "` + hook + `", "sources": ["atlantis"]}`, 400, []string{"sources"}},
		{"not an object", `[]`, 400, []string{"body"}},
	}
	for _, tt := range tests {
		resp, body := e.as(fleetKey, http.MethodPost, "/v1/watches", tt.body)
		if resp.StatusCode != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.name, resp.StatusCode, body, tt.status)
			continue
		}
		if tt.status == 201 {
			var w watchDoc
			_ = json.Unmarshal(body, &w)
			if resp.Header.Get("Location") != "/v1/watches/"+w.WatchID || resp.Header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s: Location %q Cache-Control %q", tt.name, resp.Header.Get("Location"), resp.Header.Get("Cache-Control"))
			}
			continue
		}
		var pr problemDoc
		_ = json.Unmarshal(body, &pr)
		checkType(t, pr, "invalid-query")
		if got := paramNames(pr); !slices.Equal(got, tt.params) {
			t.Errorf("%s: invalid_params %v, want %v", tt.name, got, tt.params)
		}
	}
	// The third watch is the key's last; rental-co has its own three.
	if resp, body := e.as(fleetKey, http.MethodPost, "/v1/watches", `{"domain": "AC456DE", "callback_url": "`+hook+`"}`); resp.StatusCode != 201 {
		t.Fatalf("third watch: %d %s", resp.StatusCode, body)
	}
	resp, body := e.as(fleetKey, http.MethodPost, "/v1/watches", `{"domain": "AD789EF", "callback_url": "`+hook+`"}`)
	var pr problemDoc
	_ = json.Unmarshal(body, &pr)
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("past max_per_key: %d %s, want 409", resp.StatusCode, body)
	}
	checkType(t, pr, "watch-limit")
	resp, body = e.as(rentalKey, http.MethodPost, "/v1/watches", `{"domain": "AB123CD", "callback_url": "`+hook+`"}`)
	if resp.StatusCode != 201 {
		t.Fatalf("another key's watch: %d %s", resp.StatusCode, body)
	}
	var theirs watchDoc
	_ = json.Unmarshal(body, &theirs)

	// Listing, page by page, in the order made.
	var listed []watchDoc
	cursor := ""
	for pages := 0; pages < 5; pages++ {
		path := "/v1/watches?limit=2"
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		resp, body := e.as(fleetKey, http.MethodGet, path, "")
		var page struct {
			Watches    []watchDoc `json:"watches"`
			NextCursor *string    `json:"next_cursor"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(body, &page) != nil {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
		}
		listed = append(listed, page.Watches...)
		if page.NextCursor == nil {
			break
		}
		cursor = *page.NextCursor
	}
	if len(listed) != 3 || listed[0].Subject["domain"] != "AB123CD" || listed[1].Subject["id"] != "20314159269" ||
		listed[0].Interval != "1h0m0s" || listed[1].Interval != "24h0m0s" || len(listed[0].Sources) != 2 || len(listed[1].Sources) != 1 {
		t.Errorf("listed %+v", listed)
	}
	for _, w := range listed {
		if w.WatchID == theirs.WatchID {
			t.Error("another key's watch is listed")
		}
	}
	for _, bad := range []string{"limit=0", "limit=x", "cursor=nope"} {
		if resp, body := e.as(fleetKey, http.MethodGet, "/v1/watches?"+bad, ""); resp.StatusCode != 400 {
			t.Errorf("GET /v1/watches?%s: %d %s, want 400", bad, resp.StatusCode, body)
		}
	}
	if resp, _ := e.as(fleetKey, http.MethodGet, "/v1/watches?limit=1000", ""); resp.StatusCode != 200 {
		t.Errorf("limit above 100: %d, want 200 (taken as 100)", resp.StatusCode)
	}

	// Another key's watch is not found; the key's own is, until deleted.
	mine := listed[0].WatchID
	for _, c := range []struct {
		key, method, path string
		status            int
	}{
		{fleetKey, "GET", "/v1/watches/" + theirs.WatchID, 404},
		{fleetKey, "DELETE", "/v1/watches/" + theirs.WatchID, 404},
		{rentalKey, "GET", "/v1/watches/" + mine, 404},
		{fleetKey, "GET", "/v1/watches/" + mine, 200},
		{fleetKey, "GET", "/v1/watches/w_nope", 404},
		{"", "GET", "/v1/watches", 401},
		{fleetKey, "DELETE", "/v1/watches/" + mine, 204},
		{fleetKey, "GET", "/v1/watches/" + mine, 404},
		{fleetKey, "DELETE", "/v1/watches/" + mine, 404},
		{rentalKey, "GET", "/v1/watches/" + theirs.WatchID, 200},
	} {
		if resp, body := e.as(c.key, c.method, c.path, ""); resp.StatusCode != c.status {
			t.Errorf("%s %s as %q: %d %s, want %d", c.method, c.path, c.key, resp.StatusCode, body, c.status)
		}
	}
	// The operators' figures: the fleet's watches, checked against the
	// contract like every answer here.
	resp, body = e.admin(http.MethodGet, "/watches", "")
	var stats struct {
		Watches int `json:"watches"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(body, &stats) != nil || stats.Watches != 3 {
		t.Errorf("GET /v1/admin/watches: %d %s, want 3 watches", resp.StatusCode, body)
	}
	// A deleted watch frees its place under the limit.
	if resp, body := e.as(fleetKey, http.MethodPost, "/v1/watches", `{"domain": "AD789EF", "callback_url": "`+hook+`"}`); resp.StatusCode != 201 {
		t.Errorf("a watch after one was deleted: %d %s", resp.StatusCode, body)
	}
}

// Without a watches block, /v1/watches is not there.
func TestWatchesOffWithoutTheBlock(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("Q-1"))
	e := startWith(t, source{id: "caba", url: p.URL})
	if resp, b := e.admin(http.MethodGet, "/watches", ""); resp.StatusCode != 404 {
		t.Errorf("GET /v1/admin/watches: %d %s, want 404", resp.StatusCode, b)
	}
	for _, c := range [][2]string{{"POST", "/v1/watches"}, {"GET", "/v1/watches"}, {"GET", "/v1/watches/w_x"}, {"DELETE", "/v1/watches/w_x"}} {
		body := ""
		if c[0] == "POST" {
			body = `{"domain": "AB123CD", "callback_url": "https://hooks.example.com/h"}`
		}
		if resp, b := e.do(c[0], c[1], http.Header{"Content-Type": {"application/json"}}, body); resp.StatusCode != 404 {
			t.Errorf("%s %s: %d %s, want 404", c[0], c[1], resp.StatusCode, b)
		}
	}
}

// verifier is a webhook receiver that keeps what it got and which
// secrets verify each delivery.
type verifier struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []delivery
	secrets map[string]string
}

type delivery struct {
	id       string
	verified []string
	event    struct {
		Type string `json:"type"`
		Data struct {
			WatchID         string   `json:"watch_id"`
			Baseline        bool     `json:"baseline"`
			BaselineSources []string `json:"baseline_sources"`
			Changes         struct {
				Added   []struct{ ID string } `json:"added"`
				Removed []struct{ ID string } `json:"removed"`
				Changed []struct {
					Before, After struct{ ID, Status string }
				} `json:"changed"`
			} `json:"changes"`
		} `json:"data"`
	}
}

func newVerifier(t *testing.T) *verifier {
	v := &verifier{secrets: map[string]string{"fleet-co": fleetWhsec, "default": defaultWhsec}}
	v.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		d := delivery{id: r.Header.Get(client.HeaderWebhookID)}
		for name, s := range v.secrets {
			if client.VerifyWebhook(s, r.Header, body, 0, time.Now()) == nil {
				d.verified = append(d.verified, name)
			}
		}
		_ = json.Unmarshal(body, &d.event)
		v.mu.Lock()
		v.got = append(v.got, d)
		v.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(v.srv.Close)
	return v
}

func (v *verifier) deliveries() []delivery {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.got)
}

// A watch's life through the whole replica, on each store: its baseline,
// then a new infraction, then the same one paid, each delivered once,
// signed with the owner's webhook secret only; then the subject forgotten
// by an operator (DELETE /v1/admin/memory): the watch is gone and nothing
// more is sent.
func TestWatchEndToEnd(t *testing.T) {
	t.Parallel()
	for _, st := range memStores(t) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			p := newPortal(t, actas(acta{"nro": "Q-1", "fecha": "2026-03-14 09:12", "monto": 1000, "estado": "IMPAGA"}))
			e := replica(t, st.name, watchYAML(st, source{id: "caba", url: p.URL}))
			recv := newVerifier(t)
			resp, body := e.as(fleetKey, http.MethodPost, "/v1/watches", `{"domain": "AB123CD", "callback_url": "`+recv.srv.URL+`", "interval": "1s"}`)
			if resp.StatusCode != 201 {
				t.Fatalf("POST /v1/watches: %d %s", resp.StatusCode, body)
			}
			var w watchDoc
			_ = json.Unmarshal(body, &w)
			step := func(n int, check func(d delivery)) {
				t.Helper()
				eventually(t, 15*time.Second, fmt.Sprintf("delivery %d", n), func() bool { return len(recv.deliveries()) >= n })
				d := recv.deliveries()[n-1]
				if d.id != fmt.Sprintf("msg_%s_%d", w.WatchID, n) || !slices.Equal(d.verified, []string{"fleet-co"}) {
					t.Errorf("delivery %d: webhook-id %s, verified by %v; want msg_%s_%d by fleet-co only", n, d.id, d.verified, w.WatchID, n)
				}
				if d.event.Type != "infractions.changed" || d.event.Data.WatchID != w.WatchID {
					t.Errorf("delivery %d: %+v", n, d.event)
				}
				check(d)
			}
			step(1, func(d delivery) {
				if !d.event.Data.Baseline || !slices.Equal(d.event.Data.BaselineSources, []string{"caba"}) ||
					len(d.event.Data.Changes.Added) != 1 || d.event.Data.Changes.Added[0].ID != "Q-1" {
					t.Errorf("baseline %+v", d.event.Data)
				}
			})
			p.set(actas(acta{"nro": "Q-1", "fecha": "2026-03-14 09:12", "monto": 1000, "estado": "IMPAGA"},
				acta{"nro": "Q-2", "fecha": "2026-03-20 18:00", "monto": 2500, "estado": "IMPAGA"}))
			step(2, func(d delivery) {
				if d.event.Data.Baseline || len(d.event.Data.Changes.Added) != 1 || d.event.Data.Changes.Added[0].ID != "Q-2" {
					t.Errorf("added %+v", d.event.Data)
				}
			})
			p.set(actas(acta{"nro": "Q-1", "fecha": "2026-03-14 09:12", "monto": 1000, "estado": "IMPAGA"},
				acta{"nro": "Q-2", "fecha": "2026-03-20 18:00", "monto": 2500, "estado": "PAGADA"}))
			step(3, func(d delivery) {
				c := d.event.Data.Changes.Changed
				if len(c) != 1 || c[0].Before.Status != "unpaid" || c[0].After.Status != "paid" || len(d.event.Data.Changes.Added) != 0 {
					t.Errorf("changed %+v", d.event.Data)
				}
			})
			// Nothing changes for a few checks: nothing is sent.
			calls := p.calls()
			eventually(t, 15*time.Second, "two more checks", func() bool { return p.calls() >= calls+2 })
			if n := len(recv.deliveries()); n != 3 {
				t.Errorf("%d deliveries with nothing changed, want 3", n)
			}
			resp, body = e.as(fleetKey, http.MethodGet, "/v1/watches/"+w.WatchID, "")
			var got watchDoc
			if resp.StatusCode != 200 || json.Unmarshal(body, &got) != nil || got.LastCheckAt == nil ||
				len(got.Sources) != 1 || got.Sources[0].LastSuccessAt == nil || string(got.Sources[0].Problem) != "null" {
				t.Errorf("GET the watch: %d %s", resp.StatusCode, body)
			}

			// The operator erases the vehicle: its watch goes with it.
			if resp, body := e.admin(http.MethodDelete, "/memory?domain=AB123CD", ""); resp.StatusCode != 204 {
				t.Fatalf("erasure: %d %s", resp.StatusCode, body)
			}
			if resp, _ := e.as(fleetKey, http.MethodGet, "/v1/watches/"+w.WatchID, ""); resp.StatusCode != 404 {
				t.Errorf("the watch of an erased subject: %d, want 404", resp.StatusCode)
			}
			p.set(one("Q-9"))
			calls = p.calls()
			time.Sleep(2500 * time.Millisecond)
			if n := len(recv.deliveries()); n != 3 || p.calls() > calls+1 {
				t.Errorf("after the erasure: %d deliveries, %d portal calls; want none more", n, p.calls()-calls)
			}
		})
	}
}

// TestWatchNoPersonalDataInRedis watches a plate and a person with a
// receiver that refuses every delivery, so that the deliveries are
// retried and dead-lettered, then reads every key and value in Redis: none
// holds the plate, the CUIT or the DNI in any spelling; the watches are
// there (the scan saw them), and the operators still read the dead letters.
func TestWatchNoPersonalDataInRedis(t *testing.T) {
	t.Parallel()
	st := redisStore(t)
	p := newPortal(t, one("Q-1"))
	text := strings.Replace(watchYAML(st, source{id: "caba", url: p.URL}), "allow_private: true, backoff: 100ms}", "allow_private: true, backoff: 100ms, max_attempts: 2}", 1)
	e := replica(t, st.name, text)
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }))
	t.Cleanup(refusing.Close)
	for _, subject := range []string{`"domain": "ab-123-cd"`, `"id": "` + cuit + `"`} {
		if resp, body := e.as(fleetKey, http.MethodPost, "/v1/watches", `{`+subject+`, "callback_url": "`+refusing.URL+`", "interval": "1s"}`); resp.StatusCode != 201 {
			t.Fatalf("POST /v1/watches: %d %s", resp.StatusCode, body)
		}
	}
	var dlq struct {
		Entries []struct {
			WatchID string          `json:"watch_id"`
			Payload json.RawMessage `json:"payload"`
		} `json:"entries"`
	}
	eventually(t, 20*time.Second, "both baselines dead-lettered", func() bool {
		_, body := e.admin(http.MethodGet, "/dlq", "")
		return json.Unmarshal(body, &dlq) == nil && len(dlq.Entries) >= 2
	})
	for _, en := range dlq.Entries {
		if en.WatchID == "" || !strings.Contains(string(en.Payload), "infractions.changed") {
			t.Errorf("dead letter %+v: want the watch's, its payload opened for the operators", en)
		}
	}
	c, _ := redistest.Connect(t)
	all := scanRedis(t, c, st.prefix)
	watches := 0
	for k, vals := range all {
		if strings.Contains(k, "{watches}:w:") {
			watches++
		}
		for _, s := range plateSpellings() {
			if strings.Contains(strings.ToLower(k), strings.ToLower(s)) {
				t.Errorf("key %q holds %q", k, s)
			}
			for _, v := range vals {
				if strings.Contains(strings.ToLower(v), strings.ToLower(s)) {
					t.Errorf("the value of %q holds %q", k, s)
				}
			}
		}
	}
	if watches != 2 {
		t.Errorf("%d watches in Redis, want 2: %v", watches, keysOf(all))
	}
}
