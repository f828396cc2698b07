package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/internal/apptest"
	"github.com/multas/aggregator/portalsim"
	"github.com/multas/aggregator/server"
)

// TestDashboardPage checks what GET / serves without a browser: a page
// that needs nothing from outside, and a policy that lets only its own
// inline style and script run.
func TestDashboardPage(t *testing.T) {
	srv := httptest.NewServer(server.New(server.Options{AdminToken: "x"}))
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	page := string(body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %d, want 200 without credentials", resp.StatusCode)
	}
	if got := resp.Header.Get("Content-Type"); got != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q", got)
	}
	for h, want := range map[string]string{
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
		"X-Frame-Options":        "DENY",
		"Cache-Control":          "no-cache",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s = %q, want %q", h, got, want)
		}
	}

	csp := resp.Header.Get("Content-Security-Policy")
	directives := map[string]string{}
	for _, d := range strings.Split(csp, ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		directives[name] = value
	}
	for name, want := range map[string]string{
		"default-src": "'none'", "connect-src": "'self'", "base-uri": "'none'",
		"form-action": "'none'", "frame-ancestors": "'none'",
	} {
		if directives[name] != want {
			t.Errorf("CSP %s = %q, want %q (policy %q)", name, directives[name], want, csp)
		}
	}
	for _, tag := range []string{"script", "style"} {
		blocks := regexp.MustCompile(`(?s)<`+tag+`>(.*?)</`+tag+`>`).FindAllStringSubmatch(page, -1)
		if len(blocks) == 0 {
			t.Errorf("no inline <%s>", tag)
		}
		for _, b := range blocks {
			sum := sha256.Sum256([]byte(b[1]))
			hash := "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'"
			if !strings.Contains(directives[tag+"-src"], hash) {
				t.Errorf("CSP %s-src %q lacks the hash of the page's <%s>, %s", tag, directives[tag+"-src"], tag, hash)
			}
		}
		if strings.Contains(directives[tag+"-src"], "unsafe-inline") {
			t.Errorf("CSP %s-src allows unsafe-inline", tag)
		}
	}

	// Everything is in the page: it works offline, behind any firewall.
	for _, bad := range []string{"http://", "https://", "src=", "@import", "url(", `rel="stylesheet"`} {
		if strings.Contains(page, bad) {
			t.Errorf("the page refers to something outside it: %q", bad)
		}
	}
	// Data reaches the DOM as text only.
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "localStorage"} {
		if strings.Contains(page, bad) {
			t.Errorf("the page uses %s", bad)
		}
	}
	for _, id := range []string{"token-form", "token-input", "message", "last-updated", "breakers", "events-body", "dlq", "dlq-status", "dlq-body", "watches", "watches-figures"} {
		if !strings.Contains(page, `id="`+id+`"`) {
			t.Errorf("the page lacks #%s", id)
		}
	}
}

const dashboardToken = "dashboard-test-admin-token"

// chromium finds Debian's chromium: $CHROMIUM, /usr/bin/chromium or PATH.
// Without it the browser test is skipped, except in CI where it must run.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium not found: run scripts/provision-chromium.sh")
	}
	t.Skip("chromium not found (scripts/provision-chromium.sh installs it)")
	return ""
}

// dashboardEnv is an aggregator in front of five simulated portals.
type dashboardEnv struct {
	url string
	sim *portalsim.Server
}

func startDashboardEnv(t *testing.T) *dashboardEnv {
	t.Helper()
	faults := map[string]portalsim.Fault{
		"caba": {Mode: portalsim.Down}, "mendoza": {Mode: portalsim.Down},
		"cordoba": {Mode: portalsim.Healthy}, "rosario": {Mode: portalsim.Healthy}, "santafe": {Mode: portalsim.Healthy},
		// pba throttles: its breaker stays closed while its calls are held.
		"pba": {Mode: portalsim.Throttle, RetryAfter: 5 * time.Minute},
	}
	var js []portalsim.Jurisdiction
	for _, j := range portalsim.Demo() {
		if f, ok := faults[j.ID]; ok {
			j.Fault = f
			js = append(js, j)
		}
	}
	env := apptest.Start(t, js, fmt.Sprintf(`server: {listen: "127.0.0.1:0", admin_token: %q}
query: {deadline: 5s, max_deadline: 10s}
defaults:
  timeout: 2s
  retry: {max_retries: 0}
  breaker: {window: 60s, min_calls: 2, failure_ratio: 0.5, open_for: 10m}
  remember: {fresh: 1m}
memory: {key: %q}
`, dashboardToken, base64.StdEncoding.EncodeToString([]byte("dashboard test memory key 32 b.."))), app.Options{})
	return &dashboardEnv{url: env.URL, sim: env.Sim}
}

// call sends a request (with the admin token on /v1/admin) and decodes a
// JSON answer into out when out is not nil.
func (e *dashboardEnv) call(t *testing.T, method, path, body string, out any) int {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url+path, r)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(path, "/v1/admin/") {
		req.Header.Set("Authorization", "Bearer "+dashboardToken)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
	} else {
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	return resp.StatusCode
}

func (e *dashboardEnv) query(t *testing.T, sources string) int {
	t.Helper()
	q := url.Values{"domain": {portalsim.DemoPlate}, "sources": {sources}}
	return e.call(t, http.MethodGet, "/v1/infractions?"+q.Encode(), "", nil)
}

// state reads a breaker's state from the admin API.
func (e *dashboardEnv) state(t *testing.T, key, op string) string {
	t.Helper()
	var list struct {
		Breakers []struct {
			Key   string `json:"breaker_key"`
			Op    string `json:"operation"`
			State string `json:"state"`
		} `json:"breakers"`
	}
	if got := e.call(t, http.MethodGet, "/v1/admin/breakers", "", &list); got != http.StatusOK {
		t.Fatalf("GET /v1/admin/breakers: %d", got)
	}
	for _, b := range list.Breakers {
		if b.Key == key && b.Op == op {
			return b.State
		}
	}
	t.Fatalf("no breaker %s/%s", key, op)
	return ""
}

// browser starts a headless chromium with a fresh profile, and collects
// what the page must never do: throw, or break its security policy.
type browser struct {
	ctx context.Context
	mu  sync.Mutex
	bad []string
}

func startBrowser(t *testing.T, path string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.WindowSize(1280, 900),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(allocCtx)
	t.Cleanup(cancel)
	b := &browser{ctx: ctx}
	err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Text
			if ex := ev.ExceptionDetails.Exception; ex != nil {
				msg += " " + ex.Description
			}
		case *log.EventEntryAdded:
			// 401 and 404 answers are logged as errors too, and expected.
			if ev.Entry.Source == log.EntrySourceSecurity || ev.Entry.Source == log.EntrySourceJavascript {
				msg = string(ev.Entry.Source) + ": " + ev.Entry.Text
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.bad = append(b.bad, msg)
			b.mu.Unlock()
		}
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

func (b *browser) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func (b *browser) eval(t *testing.T, expr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits until the page's auto-refresh shows what sel selects.
func (b *browser) waitFor(t *testing.T, sel string) {
	t.Helper()
	b.do(t, "wait for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
}

// waitUntil waits until the JavaScript expression cond is true.
func (b *browser) waitUntil(t *testing.T, cond string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		t.Fatalf("wait until %s: %v", cond, err)
	}
}

// screenshot saves what shot captures as docs/name.
func (b *browser) screenshot(t *testing.T, shot chromedp.Action[[]byte], name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	png, err := chromedp.Run(ctx, shot)
	cancel()
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	out := filepath.Join("..", "docs", name)
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", out, len(png))
}

func (b *browser) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.bad...)
}

func card(key, op string) string { return fmt.Sprintf(`.card[data-breaker=%q]`, key+"/"+op) }

func cardIn(key, op, state string) string {
	return fmt.Sprintf(`.card[data-breaker=%q][data-state=%q]`, key+"/"+op, state)
}

// The colours of the states, as the browser computes them.
var stateColors = map[string]string{
	"closed":      "rgb(30, 126, 52)",
	"half_open":   "rgb(180, 83, 9)",
	"open":        "rgb(198, 40, 40)",
	"forced_open": "rgb(106, 27, 154)",
}

func (b *browser) wantColor(t *testing.T, key, op, state string) {
	t.Helper()
	got := b.eval(t, fmt.Sprintf(`getComputedStyle(document.querySelector(%q)).borderLeftColor`, card(key, op)))
	if got != stateColors[state] {
		t.Errorf("%s/%s is %s but coloured %s, want %s", key, op, state, got, stateColors[state])
	}
}

// TestDashboardInBrowser drives the dashboard in headless chromium: it
// loads without credentials, refuses a wrong token, shows a breaker of a
// down portal turn red as queries trip it, and green again after a click
// on Reset. UPDATE_SCREENSHOT=1 saves docs/dashboard.png on the way.
func TestDashboardInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	path := chromium(t)
	env := startDashboardEnv(t)

	// Some variety before the page opens: mendoza's portal is down and its
	// breaker, set to open for 1s only, trips and turns half-open;
	// rosario's by_id is forced open for maintenance.
	if got := env.call(t, http.MethodPut, "/v1/admin/sources/mendoza/breaker", `{"open_for": "1s"}`, nil); got != http.StatusOK {
		t.Fatalf("PUT mendoza breaker: %d", got)
	}
	for range 2 {
		env.query(t, "mendoza")
	}
	if got := env.call(t, http.MethodPost, "/v1/admin/breakers/rosario/by_id/open", "", nil); got != http.StatusOK {
		t.Fatalf("force open rosario/by_id: %d", got)
	}
	for range 3 {
		if got := env.query(t, "cordoba,rosario,santafe"); got != http.StatusOK {
			t.Fatalf("query healthy portals: %d", got)
		}
	}
	// pba answers 429 with Retry-After: 300, which pauses it.
	if got := env.query(t, "pba"); got != http.StatusServiceUnavailable {
		t.Fatalf("query a throttling portal: %d, want 503", got)
	}

	b := startBrowser(t, path)

	// The page loads without credentials and asks for the token.
	b.do(t, "open the dashboard", chromedp.Navigate(env.url+"/"), chromedp.WaitVisible(chromedp.ID("token-form")))
	b.waitFor(t, `#message[data-source="signin"]`)
	if got := b.eval(t, `document.getElementById('breakers-section').hidden ? 'hidden' : 'shown'`); got != "hidden" {
		t.Errorf("breakers are %s before signing in", got)
	}

	// A wrong token is refused, clearly, and forgotten.
	b.do(t, "sign in with a wrong token",
		chromedp.SendKeys(chromedp.ID("token-input"), "wrong-token"),
		chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(t, `#message[data-source="auth"]`)
	if msg := b.eval(t, `document.getElementById('message').textContent`); !strings.Contains(msg, "401") || !strings.Contains(msg, "refused") {
		t.Errorf("message after a wrong token = %q, want it to say the token was refused (401)", msg)
	}
	if got := b.eval(t, `sessionStorage.getItem('aggregator.admin_token') === null ? 'none' : 'kept'`); got != "none" {
		t.Error("a refused token stays in session storage")
	}

	// The right token shows the grid: every breaker, each in its colour.
	b.do(t, "sign in",
		chromedp.SendKeys(chromedp.ID("token-input"), dashboardToken),
		chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(t, cardIn("caba", "by_domain", "closed"))
	b.waitFor(t, cardIn("mendoza", "by_domain", "half_open"))
	b.waitFor(t, cardIn("rosario", "by_id", "forced_open"))
	if n := b.eval(t, `String(document.querySelectorAll('.card[data-breaker]').length)`); n != "18" {
		t.Errorf("%s breaker cards, want 18 (6 sources × 3 operations)", n)
	}
	b.wantColor(t, "caba", "by_domain", "closed")
	b.wantColor(t, "mendoza", "by_domain", "half_open")
	b.wantColor(t, "rosario", "by_id", "forced_open")
	if got := b.eval(t, `document.querySelector('.card[data-breaker="rosario/by_id"] [data-action="open"]').disabled ? 'disabled' : 'enabled'`); got != "disabled" {
		t.Error("Force open is enabled on a breaker that is forced open")
	}
	if got := b.eval(t, `document.getElementById('last-updated').textContent`); !strings.HasPrefix(got, "Last updated") {
		t.Errorf("#last-updated = %q", got)
	}
	if got := b.eval(t, `sessionStorage.getItem('aggregator.admin_token') + '|' + localStorage.length + '|' + document.cookie`); got != dashboardToken+"|0|" {
		t.Errorf("token storage = %q, want it in session storage only", got)
	}
	// The DLQ section says whether the server has one (404: not
	// available) and, if it does, that it is empty.
	b.waitUntil(t, `document.getElementById('dlq').dataset.available !== 'unknown'`)
	switch got := b.eval(t, `document.getElementById('dlq').dataset.available + '|' + document.getElementById('dlq-status').textContent`); got {
	case "false|Not available on this server.", "true|Empty: no failed delivery.":
	default:
		t.Errorf("DLQ section = %q, want not available or empty", got)
	}

	// Watches are off on this server: their section stays hidden.
	b.waitUntil(t, `document.getElementById('watches').dataset.available === 'false'`)
	if got := b.eval(t, `document.getElementById('watches').hidden ? 'hidden' : 'shown'`); got != "hidden" {
		t.Errorf("the watches section is %s where watches are off", got)
	}

	// A paused source is not a healthy one: its closed breaker's card says
	// it is rate-limited, until when, and the sources table says why.
	b.waitFor(t, `#sources-body tr[data-source="pba"][data-paused="true"]`)
	if got := b.eval(t, `document.querySelector('#sources-body tr[data-source="pba"] [data-field="reason"]').textContent`); !strings.Contains(got, "429") || !strings.Contains(got, "5m0s") {
		t.Errorf("pba's pause reason = %q, want the portal's 429 and its wait", got)
	}
	if got := b.eval(t, `document.querySelector('#sources-body tr[data-source="pba"] [data-field="pause"]').textContent`); !regexp.MustCompile(`^paused until .+ \((4m 5\ds|5m)\)`).MatchString(got) {
		t.Errorf("pba's pause = %q, want until when and the time left", got)
	}
	b.waitFor(t, cardIn("pba", "by_domain", "closed")+`[data-paused="true"]`)
	if got := b.eval(t, `document.querySelector('.card[data-breaker="pba/by_domain"] [data-field="pause"]').textContent`); !strings.HasPrefix(got, "Rate-limited: paused until ") {
		t.Errorf("pba's card says %q, want it rate-limited", got)
	}
	if got := b.eval(t, `String(document.querySelectorAll('.card[data-paused="true"]').length)`); got != "3" {
		t.Errorf("%s cards marked paused, want pba's 3", got)
	}
	// Per-source outcomes and latency over the last 5 minutes.
	if got := b.eval(t, `document.querySelector('#sources-body tr[data-source="cordoba"] [data-field="outcomes"]').textContent`); got != "succeeded 100%" {
		t.Errorf("cordoba's outcomes = %q, want succeeded 100%%", got)
	}
	for _, q := range []string{"p50", "p95"} {
		got := b.eval(t, fmt.Sprintf(`document.querySelector('#sources-body tr[data-source="cordoba"] [data-field=%q]').textContent`, q))
		if !regexp.MustCompile(`^[0-9.]+ m?s$`).MatchString(got) {
			t.Errorf("cordoba's %s = %q, want a latency", q, got)
		}
	}
	if got := b.eval(t, `document.querySelector('#sources-body tr[data-source="pba"] [data-field="outcomes"]').textContent`); got != "rate-limited (429) 100%" {
		t.Errorf("pba's outcomes = %q", got)
	}
	if got := b.eval(t, `document.querySelector('#sources-body tr[data-source="santafe"] [data-field="p50"]').textContent`); got == "—" {
		t.Error("santafe has no latency after its call")
	}
	// Remembered answers (SPEC 14): cordoba's second and third lookups
	// came from memory; mendoza's failures were never remembered.
	if got := b.eval(t, `document.querySelector('#sources-body tr[data-source="cordoba"] [data-field="hit-rate"]').textContent`); got != "66.7% hits" {
		t.Errorf("cordoba's hit rate = %q, want 66.7%% hits (2 of 3 lookups)", got)
	}
	if got := b.eval(t, `document.querySelector('#sources-body tr[data-source="mendoza"] [data-field="hit-rate"]').textContent`); got != "0% hits" {
		t.Errorf("mendoza's hit rate = %q, want 0%% hits", got)
	}
	if got := b.eval(t, `document.querySelector('#sources-body tr[data-source="pba"] [data-field="p50"]').textContent`); got == "—" {
		t.Error("pba's 429 answered in no time")
	}
	// Time to the probe: none for a forced open breaker, now for a
	// half-open one; mendoza's strip shows it closed, then open, then
	// half-open, and nothing before the aggregator started.
	if got := b.eval(t, `document.querySelector('.card[data-breaker="rosario/by_id"] [data-field="probe"]').textContent`); got != "none until reset" {
		t.Errorf("forced-open probe = %q", got)
	}
	if got := b.eval(t, `document.querySelector('.card[data-breaker="mendoza/by_domain"] [data-field="probe"]').textContent`); got != "now: the next call probes" {
		t.Errorf("half-open probe = %q", got)
	}
	if got := b.eval(t, `document.querySelector('.card[data-breaker="caba/by_domain"] [data-field="probe"]').hidden ? 'hidden' : 'shown'`); got != "hidden" {
		t.Error("a closed breaker shows a probe time")
	}
	b.waitFor(t, card("mendoza", "by_domain")+` .strip .seg[data-state="half_open"]`)
	if got := b.eval(t, `Array.from(document.querySelectorAll('.card[data-breaker="mendoza/by_domain"] .strip > span')).map(s => s.className + ':' + (s.dataset.state || '')).join(' ')`); got != "seg:closed seg:open seg:half_open" {
		t.Errorf("mendoza's strip = %q, want closed, open, half-open", got)
	}
	// The aggregator knows only its own lifetime: the strip says since when.
	if got := b.eval(t, `document.querySelector('.card[data-breaker="mendoza/by_domain"] .strip-label span').textContent`); !strings.HasPrefix(got, "since ") {
		t.Errorf("mendoza's strip covers %q, want since the start", got)
	}
	if got := b.eval(t, `document.querySelector('.card[data-breaker="santafe/by_domain"] [data-field="availability"]').textContent`); got != "100% closed" {
		t.Errorf("santafe's availability = %q, want 100%% closed", got)
	}

	// caba's portal is down: two queries trip its breaker, and the page's
	// own refresh turns its card red.
	for range 2 {
		if got := env.query(t, "caba"); got != http.StatusServiceUnavailable {
			t.Fatalf("query to a down portal: %d, want 503", got)
		}
	}
	b.waitFor(t, cardIn("caba", "by_domain", "open"))
	b.wantColor(t, "caba", "by_domain", "open")
	b.waitFor(t, `#events-body tr[data-breaker="caba/by_domain"][data-to="open"]`)
	if got := b.eval(t, `document.querySelector('.card[data-breaker="caba/by_domain"] [data-field="last-change"]').textContent`); got != "closed → open" {
		t.Errorf("last transition shown as %q, want closed → open", got)
	}
	if got := b.eval(t, `document.querySelector('#events-body tr').dataset.breaker`); got != "caba/by_domain" {
		t.Errorf("newest event row is %q, want caba/by_domain first", got)
	}
	// open_for is 10m: the probe is 9-10 minutes away; the strip shows
	// the open stretch once the history is read again.
	if got := b.eval(t, `document.querySelector('.card[data-breaker="caba/by_domain"] [data-field="probe"]').textContent`); !regexp.MustCompile(`^in (9m( \d+s)?|10m)$`).MatchString(got) {
		t.Errorf("caba's probe = %q, want in 9-10 minutes", got)
	}
	b.do(t, "refresh", chromedp.Click(chromedp.ID("refresh-now")))
	b.waitFor(t, card("caba", "by_domain")+` .strip .seg[data-state="open"]`)

	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		// Let open time accumulate a little so that the picture shows it.
		time.Sleep(2500 * time.Millisecond)
		b.waitFor(t, cardIn("caba", "by_domain", "open"))
		b.screenshot(t, chromedp.FullScreenshot(100), "dashboard.png")
	}

	// Reset turns it green at once, and the aggregator agrees.
	b.do(t, "click Reset", chromedp.Click(chromedp.CSS(card("caba", "by_domain")+` [data-action="reset"]`)))
	b.waitFor(t, cardIn("caba", "by_domain", "closed"))
	b.wantColor(t, "caba", "by_domain", "closed")
	if got := env.state(t, "caba", "by_domain"); got != "closed" {
		t.Errorf("after Reset the admin API says caba/by_domain is %s", got)
	}
	b.waitFor(t, `#events-body tr[data-breaker="caba/by_domain"][data-to="closed"]`)

	// Force open asks for a second click, then holds the breaker open.
	forceOpen := card("caba", "by_id") + ` [data-action="open"]`
	b.do(t, "click Force open", chromedp.Click(chromedp.CSS(forceOpen)))
	if got := b.eval(t, fmt.Sprintf(`document.querySelector(%q).textContent`, forceOpen)); got != "Confirm force open" {
		t.Errorf("after one click Force open reads %q, want a confirmation", got)
	}
	if got := env.state(t, "caba", "by_id"); got != "closed" {
		t.Errorf("one click forced caba/by_id %s", got)
	}
	b.do(t, "confirm Force open", chromedp.Click(chromedp.CSS(forceOpen)))
	b.waitFor(t, cardIn("caba", "by_id", "forced_open"))
	if got := env.state(t, "caba", "by_id"); got != "forced_open" {
		t.Errorf("after Force open the admin API says caba/by_id is %s", got)
	}

	// On a phone the grid is one column and nothing overflows sideways.
	b.do(t, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
	b.waitFor(t, cardIn("caba", "by_domain", "closed"))
	if got := b.eval(t, `String(document.documentElement.scrollWidth <= window.innerWidth)`); got != "true" {
		t.Errorf("the page overflows a 390 px wide phone: scrollWidth %s", b.eval(t, `String(document.documentElement.scrollWidth)`))
	}
	width := b.eval(t, `String(Math.round(document.querySelector('.card[data-breaker="caba/by_domain"]').getBoundingClientRect().width))`)
	if w, err := strconv.Atoi(width); err != nil || w < 300 {
		t.Errorf("a card is %s px wide on a 390 px phone, want about the full width", width)
	}

	if p := b.problems(); len(p) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(p, "\n"))
	}
}

// fakeAdmin serves the dashboard page of the real server and a canned
// admin API around it: breakers and events whose text is markup, and a
// dead letter queue, which the aggregator does not serve yet.
type fakeAdmin struct {
	mu         sync.Mutex
	dlq        []map[string]any
	redelivers []string
	deletes    []string
}

const markup = `<img src=x onerror="window.__pwned=1">`

func (f *fakeAdmin) handler(t *testing.T) http.Handler {
	page := server.New(server.Options{AdminToken: dashboardToken})
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", page)
	authed := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+dashboardToken {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			h(w, r)
		}
	}
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(v); err != nil {
			t.Error(err)
		}
	}
	now := time.Now().Format(time.RFC3339)
	event := map[string]any{"time": now, "breaker_key": markup, "operation": "by_domain", "from": "closed", "to": "open",
		"reason": "reason " + markup, "evidence": map[string]any{"calls": 10, "failures": 6, "ratio": 0.6, "window_seconds": 60}}
	mux.HandleFunc("GET /v1/admin/breakers", authed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"breakers": []any{map[string]any{
			"breaker_key": markup, "operation": "by_domain", "sources": []string{markup}, "state": "open",
			"since": now, "open_seconds_total": 3725.5, "window": map[string]any{"calls": 0, "failures": 0, "ratio": 0},
			"last_transition": event,
			"settings": map[string]any{"window": "1m0s", "min_calls": 10, "failure_ratio": 0.5, "consecutive_failures": 0,
				"open_for": "30s", "slow_call": "0s", "failure_statuses": []int{500, 502, 503, 504}},
		}}})
	}))
	mux.HandleFunc("GET /v1/admin/events", authed(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"events": []any{event}})
	}))
	mux.HandleFunc("GET /v1/admin/dlq", authed(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		writeJSON(w, map[string]any{"entries": f.dlq})
	}))
	remove := func(id string) bool {
		for i, e := range f.dlq {
			if e["id"] == id {
				f.dlq = append(f.dlq[:i], f.dlq[i+1:]...)
				return true
			}
		}
		return false
	}
	mux.HandleFunc("POST /v1/admin/dlq/{id}/redeliver", authed(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.redelivers = append(f.redelivers, r.PathValue("id"))
		if !remove(r.PathValue("id")) {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	mux.HandleFunc("DELETE /v1/admin/dlq/{id}", authed(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.deletes = append(f.deletes, r.PathValue("id"))
		if !remove(r.PathValue("id")) {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	return mux
}

func (f *fakeAdmin) calls() (redelivers, deletes []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.redelivers...), append([]string(nil), f.deletes...)
}

// TestDashboardDLQAndEscaping checks, against a canned admin API, that
// text from the API never becomes markup, that open time reads as a
// person would say it, and the dead letter queue's redeliver and delete
// buttons; then that a server without an admin token is explained.
func TestDashboardDLQAndEscaping(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	path := chromium(t)
	now := time.Now().Format(time.RFC3339)
	fake := &fakeAdmin{dlq: []map[string]any{
		{"id": "dlq-1", "query_id": "q-1", "callback_url": "https://receiver.example/hook", "attempts": 5,
			"last_error": "503 from receiver " + markup, "created_at": now, "failed_at": now, "payload": map[string]any{}},
		{"id": "dlq-2", "query_id": "q-2", "callback_url": "https://receiver.example/hook", "attempts": 5,
			"last_error": "connection refused", "created_at": now, "failed_at": now, "payload": map[string]any{}},
	}}
	srv := httptest.NewServer(fake.handler(t))
	defer srv.Close()

	b := startBrowser(t, path)
	b.do(t, "sign in",
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token-form")),
		chromedp.SendKeys(chromedp.ID("token-input"), dashboardToken),
		chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(t, `.card[data-state="open"]`)
	b.waitFor(t, `#dlq[data-available="true"] tr[data-dlq-id="dlq-2"]`)

	// Markup from the API is shown as text, and never runs.
	if got := b.eval(t, `String(document.querySelectorAll('img').length) + '|' + String(window.__pwned)`); got != "0|undefined" {
		t.Errorf("markup from the API was parsed: images|__pwned = %s", got)
	}
	if got := b.eval(t, `document.querySelector('.rowhead .key').textContent`); got != markup {
		t.Errorf("breaker key shown as %q, want the text %q", got, markup)
	}
	if got := b.eval(t, `document.querySelector('tr[data-dlq-id="dlq-1"]').textContent`); !strings.Contains(got, markup) {
		t.Errorf("DLQ row %q lacks the literal text of its error", got)
	}
	if got := b.eval(t, `document.querySelector('.card [data-field="open-seconds"]').textContent`); got != "1h 2m" {
		t.Errorf("3725.5 s of open time shown as %q, want 1h 2m", got)
	}

	// Redeliver goes at once; delete asks for a second click.
	b.do(t, "redeliver", chromedp.Click(chromedp.CSS(`button[data-action="redeliver"][data-dlq-id="dlq-1"]`)))
	b.do(t, "wait for the entry to leave", chromedp.WaitNotPresent(chromedp.CSS(`tr[data-dlq-id="dlq-1"]`)))
	del := `button[data-action="delete"][data-dlq-id="dlq-2"]`
	b.do(t, "delete", chromedp.Click(chromedp.CSS(del)))
	if got := b.eval(t, fmt.Sprintf(`document.querySelector(%q).textContent`, del)); got != "Confirm delete" {
		t.Errorf("after one click Delete reads %q, want a confirmation", got)
	}
	if _, deletes := fake.calls(); len(deletes) != 0 {
		t.Errorf("one click deleted %v", deletes)
	}
	b.do(t, "confirm delete", chromedp.Click(chromedp.CSS(del)))
	b.waitUntil(t, `document.getElementById('dlq-table').hidden`)
	if got := b.eval(t, `document.getElementById('dlq-status').textContent`); !strings.HasPrefix(got, "Empty") {
		t.Errorf("empty DLQ status = %q", got)
	}
	redelivers, deletes := fake.calls()
	if strings.Join(redelivers, ",") != "dlq-1" || strings.Join(deletes, ",") != "dlq-2" {
		t.Errorf("redelivered %v and deleted %v, want [dlq-1] and [dlq-2]", redelivers, deletes)
	}

	// A server without an admin token closes the admin API: the page says
	// why, instead of asking for the token again and again.
	closed := httptest.NewServer(server.New(server.Options{}))
	defer closed.Close()
	b.do(t, "sign in where no admin token is configured",
		chromedp.Navigate(closed.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token-form")),
		chromedp.SendKeys(chromedp.ID("token-input"), "anything"),
		chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(t, `#message[data-source="auth"]`)
	if msg := b.eval(t, `document.getElementById('message').textContent`); !strings.Contains(msg, "403") || !strings.Contains(msg, "no admin token is configured") {
		t.Errorf("message = %q, want it to explain the 403", msg)
	}

	if p := b.problems(); len(p) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(p, "\n"))
	}
}

// TestDashboardShowsWatches: where watches are on (SPEC 15), the dashboard
// shows the fleet's watches, their backlog, and how late this replica's
// checks started; where they are off, the section stays hidden.
func TestDashboardShowsWatches(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	path := chromium(t)
	var js []portalsim.Jurisdiction
	for _, j := range portalsim.Demo() {
		if j.ID == "caba" || j.ID == "santafe" {
			js = append(js, j)
		}
	}
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)
	env := apptest.Start(t, js, fmt.Sprintf(`server:
  listen: "127.0.0.1:0"
  admin_token: %q
  api_keys: [{name: fleet-co, key: fleet-key, rps: 100}]
memory: {key: %q}
webhooks: {allow_private: true}
watches: {min_interval: 1s}
`, dashboardToken, base64.StdEncoding.EncodeToString([]byte("dashboard test memory key 32 b.."))), app.Options{})
	for _, plate := range []string{portalsim.DemoPlate, portalsim.DemoPlateOld} {
		req, _ := http.NewRequest(http.MethodPost, env.URL+"/v1/watches",
			strings.NewReader(fmt.Sprintf(`{"domain": %q, "callback_url": %q, "interval": "1s"}`, plate, receiver.URL)))
		req.Header.Set("X-API-Key", "fleet-key")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /v1/watches: %s", resp.Status)
		}
	}

	b := startBrowser(t, path)
	b.do(t, "open the dashboard and sign in", chromedp.Navigate(env.URL+"/"), chromedp.WaitVisible(chromedp.ID("token-form")),
		chromedp.SendKeys(chromedp.ID("token-input"), dashboardToken), chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(t, `#watches[data-available="true"]`)
	// Two watches, each checked (a baseline each, so two changed checks),
	// started within a second of when they were due.
	b.waitUntil(t, `/changed [2-9]/.test(document.querySelector('#watches [data-field="checks"]').textContent)`)
	field := func(name string) string {
		return b.eval(t, fmt.Sprintf(`document.querySelector('#watches [data-field=%q]').textContent`, name))
	}
	if got := field("watches"); got != "2" {
		t.Errorf("watches = %q, want 2", got)
	}
	if got := field("backlog"); got != "none" && !regexp.MustCompile(`^(<1s|[0-9]s)$`).MatchString(got) {
		t.Errorf("backlog = %q, want none or a moment", got)
	}
	if got := field("lag"); !regexp.MustCompile(`^(0s|<1s|[0-9]+s) / (0s|<1s|[0-9]+s)$`).MatchString(got) {
		t.Errorf("lag = %q, want p50 / p95", got)
	}
	if got := field("checks"); !strings.HasPrefix(got, "unchanged ") || !strings.Contains(got, " · failed 0") {
		t.Errorf("checks = %q, want every outcome", got)
	}
	if got := b.eval(t, `document.querySelector('#watches [data-field="lag-box"]').dataset.late`); got != "false" {
		t.Errorf("lag marked late: %s", got)
	}
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the page threw or broke its policy: %q", p)
	}
}
