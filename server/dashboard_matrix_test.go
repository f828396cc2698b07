package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
)

// matrixPortal is one portal server behind many sources: the first
// segment of the path names the source (/s07/actas?dominio=…), and the
// source's number decides how it answers. renamed, once set, makes the
// answers of source 10 call the amount "importe".
type matrixPortal struct {
	renamed atomic.Bool
}

func (p *matrixPortal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var n int
	fmt.Sscanf(r.URL.Path, "/s%d/", &n)
	w.Header().Set("Content-Type", "application/json")
	switch {
	case n >= 1 && n <= 4: // throttling: paused for 5 minutes
		w.Header().Set("Retry-After", "300")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{}`)
	case n >= 5 && n <= 8: // down
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{}`)
	case n == 10 && p.renamed.Load():
		io.WriteString(w, `{"resultado": {"actas": [{"nro": "Q-1", "fecha": "2026-03-14 09:12", "importe": 1000, "estado": "IMPAGA", "dominio": "AB123CD"}]}}`)
	default:
		io.WriteString(w, `{"resultado": {"actas": [{"nro": "Q-1", "fecha": "2026-03-14 09:12", "monto": 1000, "estado": "IMPAGA", "dominio": "AB123CD"}]}}`)
	}
}

// startMatrixEnv is an aggregator over n sources of one matrixPortal.
func startMatrixEnv(t *testing.T, n int) (*dashboardEnv, *matrixPortal) {
	t.Helper()
	portal := &matrixPortal{}
	srv := httptest.NewServer(portal)
	t.Cleanup(srv.Close)
	var b strings.Builder
	fmt.Fprintf(&b, `server: {listen: "127.0.0.1:0", admin_token: %q}
query: {deadline: 5s, max_deadline: 10s}
defaults:
  timeout: 2s
  retry: {max_retries: 0}
  breaker: {window: 60s, min_calls: 1, consecutive_failures: 1, failure_ratio: 0.5, open_for: 10m}
sources:
`, dashboardToken)
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, `  - id: s%02d
    jurisdiction: Juzgado de faltas %d
    base_url: %s/s%02d
    operations: {by_domain: {path: "/actas?dominio={domain}"}, by_id: {path: "/personas/{id}"}, voucher: {path: "/actas/{infraction_id}/boleta"}}
    response:
      items: /resultado/actas
      fields: {id: /nro, date: /fecha, amount: /monto, status: /estado}
      status_map: {IMPAGA: unpaid}
`, i, i, srv.URL, i)
	}
	cfg, err := config.Parse([]byte(b.String()), "matrix.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	a, err := app.New(cfg, app.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	front := httptest.NewServer(a.Server)
	t.Cleanup(front.Close)
	return &dashboardEnv{url: front.URL}, portal
}

// TestDashboardMatrix drives the overview in headless chromium over 50
// real sources: they fit one screen; the filters keep the sources not
// closed, paused or drifted; a cell opens its breaker's card; a source
// whose portal renamed a member shows a drift badge, on its cell and on
// its card, that links to the mapping event.
func TestDashboardMatrix(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test")
	}
	path := chromium(t)
	env, portal := startMatrixEnv(t, 50)
	q := url.Values{"domain": {"AB123CD"}}
	// Every source answers once: 4 are paused by their 429, 4 trip open.
	if got := env.call(t, http.MethodGet, "/v1/infractions?"+q.Encode(), "", nil); got != http.StatusOK {
		t.Fatalf("first query: %d", got)
	}
	if got := env.call(t, http.MethodPost, "/v1/admin/breakers/s09/by_id/open", "", nil); got != http.StatusOK {
		t.Fatalf("force open s09/by_id: %d", got)
	}
	// s10's portal renames monto: a mapping event.
	portal.renamed.Store(true)
	q.Set("sources", "s10")
	if got := env.call(t, http.MethodGet, "/v1/infractions?"+q.Encode(), "", nil); got != http.StatusOK {
		t.Fatalf("query after the rename: %d", got)
	}

	b := startBrowser(t, path)
	b.do(t, "sign in",
		chromedp.Navigate(env.url+"/"),
		chromedp.WaitVisible(chromedp.ID("token-form")),
		chromedp.SendKeys(chromedp.ID("token-input"), dashboardToken),
		chromedp.Click(chromedp.ID("token-submit")))
	b.waitFor(t, `#matrix-body .mrow[data-source="s50"]`)
	b.waitFor(t, `#matrix-body .mrow[data-source="s10"][data-drifted="true"]`)

	rows := `document.querySelectorAll('#matrix-body .mrow')`
	if n := b.eval(t, `String(`+rows+`.length)`); n != "50" {
		t.Errorf("%s rows in the overview, want 50", n)
	}
	// 50 sources fit one screen (1280×900): every row is in view at once.
	b.eval(t, `(document.getElementById('matrix-section').scrollIntoView({block: 'start'}), '')`)
	if got := b.eval(t, `(() => {
		const top = document.querySelector('.top').getBoundingClientRect().bottom;
		const out = Array.from(`+rows+`).filter((r) => { const b = r.getBoundingClientRect(); return b.top < top - 1 || b.bottom > window.innerHeight + 1; });
		return out.length + ' of ' + `+rows+`.length + ' rows out of view; overview ' + Math.round(document.getElementById('matrix').getBoundingClientRect().height) + ' px high';
	})()`); !strings.HasPrefix(got, "0 of 50") {
		t.Errorf("the overview does not fit one 1280×900 screen: %s", got)
	}
	if os.Getenv("UPDATE_SCREENSHOT") == "1" {
		b.screenshot(t, chromedp.CaptureScreenshot(), "dashboard-matrix.png")
	}
	// With 50 sources the cards wait to be opened from the overview.
	if got := b.eval(t, `String(Array.from(document.querySelectorAll('.card')).filter((c) => c.offsetParent !== null).length)`); got != "0" {
		t.Errorf("%s cards shown before any is opened, want none", got)
	}
	b.waitFor(t, `#cards-hint`)

	// What a cell says.
	cell := func(source, op, field string) string {
		return fmt.Sprintf(`#matrix-body .mrow[data-source=%q] .mcell[data-operation=%q] %s`, source, op, field)
	}
	text := func(sel string) string {
		return b.eval(t, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ''`, sel))
	}
	visible := func(sel string) bool {
		return b.eval(t, fmt.Sprintf(`(() => { const n = document.querySelector(%q); return n && n.offsetParent !== null ? 'yes' : 'no'; })()`, sel)) == "yes"
	}
	for _, tt := range []struct {
		source, op, state string
		paused, drift     bool
	}{
		{"s01", "by_domain", "closed", true, false},
		{"s05", "by_domain", "open", false, false},
		{"s09", "by_id", "forced_open", false, false},
		{"s10", "by_domain", "closed", false, true},
		{"s30", "by_domain", "closed", false, false},
	} {
		if got := b.eval(t, fmt.Sprintf(`document.querySelector(%q).dataset.state`, strings.TrimSpace(cell(tt.source, tt.op, "")))); got != tt.state {
			t.Errorf("%s/%s cell in state %q, want %q", tt.source, tt.op, got, tt.state)
		}
		if got := visible(cell(tt.source, tt.op, `[data-field="paused"]`)); got != tt.paused {
			t.Errorf("%s/%s cell paused: %v, want %v", tt.source, tt.op, got, tt.paused)
		}
		if got := visible(cell(tt.source, tt.op, `[data-field="drift"]`)); got != tt.drift {
			t.Errorf("%s/%s cell drift badge: %v, want %v", tt.source, tt.op, got, tt.drift)
		}
	}
	if got := text(cell("s30", "by_domain", `[data-field="latency"]`)); !strings.HasSuffix(got, "ms") {
		t.Errorf("s30's latency %q, want its p50", got)
	}
	b.waitUntil(t, `document.querySelector('`+cell("s05", "by_domain", `[data-field="open-time"]`)+`').textContent !== ''`)

	// The filters.
	for _, tt := range []struct {
		filter string
		want   string
	}{
		{"not_closed", "s05 s06 s07 s08 s09"},
		{"paused", "s01 s02 s03 s04"},
		{"drifted", "s10"},
	} {
		b.do(t, "filter "+tt.filter, chromedp.Click(chromedp.CSS(fmt.Sprintf(`#matrix-filters [data-filter=%q]`, tt.filter))))
		got := b.eval(t, `Array.from(`+rows+`).map((r) => r.dataset.source).join(' ')`)
		if got != tt.want {
			t.Errorf("filter %s shows %q, want %q", tt.filter, got, tt.want)
		}
	}
	b.do(t, "filter all", chromedp.Click(chromedp.CSS(`#matrix-filters [data-filter="all"]`)))
	b.waitUntil(t, rows+`.length === 50`)

	// A click on a cell opens its card, and only it.
	b.do(t, "open s05/by_domain", chromedp.Click(chromedp.CSS(cell("s05", "by_domain", "button.open-card"))))
	b.waitFor(t, cardIn("s05", "by_domain", "open")+`[data-focused="true"]`)
	if got := b.eval(t, `Array.from(document.querySelectorAll('.card')).filter((c) => c.offsetParent !== null).map((c) => c.dataset.breaker).join(' ')`); got != "s05/by_domain s05/by_id s05/voucher" {
		t.Errorf("cards shown after opening s05/by_domain: %q, want s05's only", got)
	}
	b.do(t, "close the card", chromedp.Click(chromedp.ID("close-card")))
	b.waitUntil(t, `!document.querySelector('.card[data-breaker="s05/by_domain"]').offsetParent`)

	// s10's drift badge, on its cell and on its card, links to the event.
	b.do(t, "open s10/by_domain", chromedp.Click(chromedp.CSS(cell("s10", "by_domain", "button.open-card"))))
	badge := card("s10", "by_domain") + ` [data-field="drift"]`
	b.waitFor(t, badge)
	if got := text(badge); !strings.HasPrefix(got, "Portal changed: new shape") {
		t.Errorf("s10's card badge reads %q", got)
	}
	href := b.eval(t, fmt.Sprintf(`document.querySelector(%q).getAttribute('href')`, badge))
	if cellHref := b.eval(t, fmt.Sprintf(`document.querySelector(%q).getAttribute('href')`, cell("s10", "by_domain", `[data-field="drift"]`))); cellHref != href {
		t.Errorf("the cell's badge links to %q, the card's to %q", cellHref, href)
	}
	b.do(t, "follow the badge", chromedp.Click(chromedp.CSS(badge)))
	b.waitUntil(t, fmt.Sprintf(`location.hash === %q && document.querySelector('#mapping-body tr:target') !== null`, href))
	row := `#mapping-body tr:target`
	if got := b.eval(t, `document.querySelector('`+row+`').dataset.source + ' ' + document.querySelector('`+row+`').textContent`); !strings.HasPrefix(got, "s10 ") ||
		!strings.Contains(got, "/importe") || !strings.Contains(got, "/monto") {
		t.Errorf("the event the badge links to: %q, want s10's rename of /monto into /importe", got)
	}
	if got := b.eval(t, `document.querySelector('#sources-body tr[data-source="s10"] [data-field="mapping"]').textContent`); !strings.Contains(got, "shape changed") ||
		!strings.Contains(got, "amount missing 1") {
		t.Errorf("s10's mapping in the sources table: %q", got)
	}
	// No value of the portal's answers is on the page.
	if got := b.eval(t, `String(document.body.textContent.toUpperCase().includes('AB123CD'))`); got != "false" {
		t.Error("the page shows the plate")
	}
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the page reported errors:\n%s", strings.Join(p, "\n"))
	}
}
