package e2e

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"
)

// pdf is a voucher as a portal sends it: bytes the aggregator must pass
// through untouched, NUL and high bytes included.
const pdf = "%PDF-1.4\n\x00\xff\xfe binary voucher \r\n%%EOF\n"

// voucherPDF answers a voucher request with pdf.
func voucherPDF() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		_, _ = w.Write([]byte(pdf))
	})
}

// voucherProblem fetches a voucher expected to fail and returns its problem.
func (e *env) voucherProblem(source, id string, wantStatus int, wantSlug string) (http.Header, problemDoc) {
	e.t.Helper()
	resp, body := e.get("/v1/sources/" + source + "/infractions/" + id + "/voucher")
	var p problemDoc
	if resp.StatusCode != wantStatus {
		e.t.Errorf("voucher %s/%s: got status %d, want %d (%s)", source, id, resp.StatusCode, wantStatus, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		e.t.Errorf("voucher %s/%s: Content-Type %q, want application/problem+json", source, id, ct)
	}
	if err := json.Unmarshal(body, &p); err != nil {
		e.t.Errorf("voucher %s/%s: %v", source, id, err)
	}
	checkType(e.t, p, wantSlug)
	return resp.Header, p
}

// TestVoucher checks SPEC 3.2: the voucher streamed through, and every way
// it can fail, under a breaker of its own.
func TestVoucher(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("GET /actas", one("V-1"))
	mux.Handle("GET /actas/V-1/boleta", voucherPDF())
	mux.Handle("GET /actas/NONE/boleta", status(http.StatusNotFound))
	mux.Handle("GET /actas/BROKEN/boleta", status(http.StatusInternalServerError))
	mux.Handle("GET /actas/BUSY/boleta", status(http.StatusTooManyRequests, "Retry-After", "30"))
	v := newPortal(t, mux)
	thr := newPortal(t, mux)
	hung := newPortal(t, nil)
	hung.set(hung.hang())
	e := startWith(t,
		source{id: "v", url: v.URL, extra: []string{"breaker: {open_for: 5s}"}},
		source{id: "thr", url: thr.URL},
		source{id: "hung", url: hung.URL, extra: []string{"timeout: 100ms"}},
		source{id: "novoucher", url: v.URL, ops: `{by_domain: {path: "/actas?dominio={domain}"}}`},
	)

	// The link in a result leads to the voucher, streamed through.
	a := e.byDomain(plate, "sources=v")
	if len(a.result.Infractions) != 1 {
		t.Fatalf("got infractions %+v, want V-1", a.result.Infractions)
	}
	resp, body := e.get(a.result.Infractions[0].Voucher)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("voucher: got status %d, want 200 (%s)", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/pdf" {
		t.Errorf("voucher Content-Type: got %q, want application/pdf", ct)
	}
	if string(body) != pdf {
		t.Errorf("voucher body: got %q, want %q", body, pdf)
	}

	e.voucherProblem("v", "NONE", http.StatusNotFound, "not-found")
	e.voucherProblem("nope", "V-1", http.StatusNotFound, "not-found")
	e.voucherProblem("novoucher", "V-1", http.StatusNotFound, "not-found")

	// The portal's 500s are 502s, and trip the voucher breaker alone: with
	// the success before (the portal's 404 is not recorded), the window
	// reaches min_calls (4) at the third failure.
	for range 2 {
		e.voucherProblem("v", "BROKEN", http.StatusBadGateway, "source-unavailable")
	}
	if b := e.breaker("v", "voucher"); b.State != "closed" || b.Window.Calls != 3 || b.Window.Failures != 2 {
		t.Errorf("v/voucher after 1 success, a 404 and 2 failures: %s with window %+v, want closed with 3 calls, 2 failures",
			b.State, b.Window)
	}
	e.voucherProblem("v", "BROKEN", http.StatusBadGateway, "source-unavailable")
	if st := e.breaker("v", "voucher").State; st != "open" {
		t.Errorf("v/voucher after 3 failures: %s, want open", st)
	}
	h, p := e.voucherProblem("v", "V-1", http.StatusServiceUnavailable, "circuit-open")
	if h.Get("Retry-After") == "" || retryAfter(&p) < 1 {
		t.Errorf("circuit-open voucher: Retry-After %q, retry_after %d; want both set", h.Get("Retry-After"), retryAfter(&p))
	}
	want := []string{"/actas?dominio=AB123CD", "/actas/V-1/boleta", "/actas/NONE/boleta",
		"/actas/BROKEN/boleta", "/actas/BROKEN/boleta", "/actas/BROKEN/boleta"}
	if got := v.requests(); !slices.Equal(got, want) {
		t.Errorf("portal received\n %q\nwant\n %q", got, want)
	}
	if b := e.breaker("v", "by_domain"); b.State != "closed" {
		t.Errorf("v/by_domain: %s, want closed", b.State)
	}
	checkEntry(t, e.byDomain(plate, "sources=v").entry(t, "v"), "succeeded", "")

	// The portal's 429 is a 503 rate-limited with Retry-After; its pause
	// keeps the next call from going; the breaker does not hear of it.
	h, _ = e.voucherProblem("thr", "BUSY", http.StatusServiceUnavailable, "rate-limited")
	if ra := h.Get("Retry-After"); ra != "30" {
		t.Errorf("rate-limited voucher: Retry-After %q, want 30", ra)
	}
	h, _ = e.voucherProblem("thr", "V-1", http.StatusServiceUnavailable, "rate-limited")
	if h.Get("Retry-After") == "" {
		t.Errorf("paused voucher: no Retry-After")
	}
	if got, want := thr.requests(), []string{"/actas/BUSY/boleta"}; !slices.Equal(got, want) {
		t.Errorf("throttling portal received %q, want %q", got, want)
	}
	if b := e.breaker("thr", "voucher"); b.State != "closed" || b.Window.Calls != 0 {
		t.Errorf("thr/voucher: %s with window %+v, want closed and empty", b.State, b.Window)
	}

	// The source's own timeout is a 504, and counts.
	e.voucherProblem("hung", "V-1", http.StatusGatewayTimeout, "source-timeout")
	if b := e.breaker("hung", "voucher"); b.Window.Calls != 1 || b.Window.Failures != 1 {
		t.Errorf("hung/voucher window: got %+v, want 1 call, 1 failure", b.Window)
	}
	if n := hung.calls(); n != 1 {
		t.Errorf("hanging portal received %d calls, want 1", n)
	}
}

// TestVoucherEscapedID: an infraction id with a slash and a space (acta
// numbers often carry the year: "A-10442/2026") has a voucher link that
// works, and reaches the portal escaped.
func TestVoucherEscapedID(t *testing.T) {
	t.Parallel()
	const id = "A-10442/2026 b"
	mux := http.NewServeMux()
	mux.Handle("GET /actas", actas(acta{"nro": id, "monto": 1}))
	mux.Handle("GET /actas/{id}/boleta", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("id") != id {
			http.NotFound(w, r)
			return
		}
		voucherPDF().ServeHTTP(w, r)
	}))
	p := newPortal(t, mux)
	e := startWith(t, source{id: "caba", url: p.URL})

	a := e.byDomain(plate)
	if len(a.result.Infractions) != 1 {
		t.Fatalf("got infractions %+v, want 1", a.result.Infractions)
	}
	link := a.result.Infractions[0].Voucher
	if want := "/v1/sources/caba/infractions/A-10442%2F2026%20b/voucher"; link != want {
		t.Errorf("voucher link: got %q, want %q", link, want)
	}
	resp, body := e.get(link)
	if resp.StatusCode != http.StatusOK || string(body) != pdf {
		t.Errorf("GET %s: got %d %q, want 200 and the PDF", link, resp.StatusCode, body)
	}
	want := []string{"/actas?dominio=AB123CD", "/actas/A-10442%2F2026%20b/boleta"}
	if got := p.requests(); !slices.Equal(got, want) {
		t.Errorf("portal received %q, want %q", got, want)
	}
}
