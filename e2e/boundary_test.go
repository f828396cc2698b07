package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
)

// The trust boundaries of SPEC 9 (issue #11), through the whole stack:
// real portals, app.New, real HTTP. docs/security.md points here.

// portalToken is a credential the test sources send to their portal; it
// must never reach another origin.
const portalToken = "Bearer portal-only-token"

// TestPortalRedirects: a portal's redirects are followed on its own origin
// (scheme, host, port), 3 at most; a redirect anywhere else, or a 4th,
// fails the call as source-error, which the breaker does not count, and
// the other origin receives nothing at all (so neither the configured
// headers nor anything else reach it). Lookups and vouchers alike.
func TestPortalRedirects(t *testing.T) {
	t.Parallel()
	other := newPortal(t, voucherPDF()) // another port of the same host
	_, otherPort, _ := net.SplitHostPort(strings.TrimPrefix(other.URL, "http://"))

	var mu sync.Mutex
	var strangers []string // requests to the portal that were not its own origin, or lacked its headers
	var portalHost string
	mux := http.NewServeMux()
	hop := func(w http.ResponseWriter, r *http.Request, final http.Handler) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		if n == 0 {
			final.ServeHTTP(w, r)
			return
		}
		rest := strings.SplitN(r.URL.RequestURI(), "/", 4)[3] // after /hop/{n}/
		http.Redirect(w, r, "/hop/"+strconv.Itoa(n-1)+"/"+rest, http.StatusFound)
	}
	mux.HandleFunc("GET /hop/{n}/actas", func(w http.ResponseWriter, r *http.Request) { hop(w, r, one("R-1")) })
	mux.HandleFunc("GET /hop/{n}/actas/{id}/boleta", func(w http.ResponseWriter, r *http.Request) { hop(w, r, voucherPDF()) })
	// /to/{where}/…: a redirect elsewhere, keeping the rest of the URL.
	mux.HandleFunc("GET /to/{where}/", func(w http.ResponseWriter, r *http.Request) {
		rest := strings.SplitN(r.URL.RequestURI(), "/", 4)[3]
		var target string
		switch r.PathValue("where") {
		case "port":
			target = "http://127.0.0.1:" + otherPort + "/" + rest
		case "localhost":
			target = "http://localhost:" + otherPort + "/" + rest
		case "localhost-same-port":
			_, port, _ := net.SplitHostPort(portalHost)
			target = "http://localhost:" + port + "/hop/0/" + rest
		case "https":
			target = "https://" + portalHost + "/hop/0/" + rest
		}
		http.Redirect(w, r, target, http.StatusMovedPermanently)
	})
	p := newPortal(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.Host != portalHost || r.Header.Get("Authorization") != portalToken || r.Header.Get("X-Api-Key") != "portal-key" {
			strangers = append(strangers, r.Host+r.URL.Path)
		}
		mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	portalHost = strings.TrimPrefix(p.URL, "http://")

	headers := `headers: {Authorization: "` + portalToken + `", X-Api-Key: portal-key}`
	src := func(id, prefix string) source {
		return source{id: id, url: p.URL, extra: []string{headers},
			ops: `{by_domain: {path: "` + prefix + `/actas?dominio={domain}"}, voucher: {path: "` + prefix + `/actas/{infraction_id}/boleta"}}`}
	}
	e := startWith(t,
		src("hop3", "/hop/3"), src("hop4", "/hop/4"),
		src("port", "/to/port"), src("localhost", "/to/localhost"),
		src("localsame", "/to/localhost-same-port"), src("https", "/to/https"),
	)

	// Three redirects on the portal's own origin: followed, with its headers.
	a := e.byDomain(plate, "sources=hop3")
	checkEntry(t, a.entry(t, "hop3"), "succeeded", "")
	resp, body := e.get("/v1/sources/hop3/infractions/R-1/voucher")
	if resp.StatusCode != http.StatusOK || string(body) != pdf {
		t.Errorf("voucher through 3 same-origin redirects: got %d %q, want 200 and the PDF", resp.StatusCode, body)
	}

	// A 4th redirect, or any redirect off the origin: source-error, for
	// lookups and vouchers; never counted by the breaker, however many.
	for _, id := range []string{"hop4", "port", "localhost", "localsame", "https"} {
		for range 5 { // above min_calls (4): counted failures would trip it
			a := e.byDomain(plate, "sources="+id)
			if a.status != http.StatusServiceUnavailable {
				t.Errorf("%s: query answered %d, want 503 (its only source failed)", id, a.status)
			}
			checkEntry(t, a.entry(t, id), "failed", "source-error")
			e.voucherProblem(id, "R-1", http.StatusBadGateway, "source-error")
		}
		for _, op := range []string{"by_domain", "voucher"} {
			if b := e.breaker(id, op); b.State != "closed" || b.Window.Calls != 0 || b.Window.Failures != 0 {
				t.Errorf("%s/%s after 5 redirected calls: %s, window %+v; want closed and nothing counted", id, op, b.State, b.Window)
			}
		}
	}

	if n := other.calls(); n != 0 {
		t.Errorf("the other origin received %d requests (%q), want none", n, other.requests())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(strangers) > 0 {
		t.Errorf("the portal received requests off its origin or without its headers: %q", strangers)
	}
	// hop3: 4 requests per call (lookup and voucher); hop4: 4 per call, the
	// 5th redirect refused; the others: 1 per call.
	if want := 2*4 + 5*2*4 + 4*5*2; p.calls() != want {
		t.Errorf("the portal received %d requests, want %d", p.calls(), want)
	}
}

// TestVoucherBoundary: vouchers are relayed only with a media type of the
// source's voucher_types, bounded by voucher_max_bytes, and always with
// nosniff, a sandboxing CSP and an attachment file name; anything else is
// 502 source-error, which the breaker does not count.
func TestVoucherBoundary(t *testing.T) {
	t.Parallel()
	const limit = 1024
	typed := func(ct, body string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if ct == "" {
				w.Header()["Content-Type"] = nil // not even net/http's sniffed one
			} else {
				w.Header().Set("Content-Type", ct)
			}
			_, _ = io.WriteString(w, body)
		})
	}
	// stream sends n bytes of a PDF in chunks, without Content-Length.
	stream := func(n int) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/pdf")
			for sent := 0; sent < n; sent += 256 {
				_, _ = io.WriteString(w, strings.Repeat("%", min(256, n-sent)))
				http.NewResponseController(w).Flush()
			}
		})
	}
	mux := http.NewServeMux()
	mux.Handle("GET /actas/PDF/boleta", typed("application/pdf", pdf))
	mux.Handle("GET /actas/PNG/boleta", typed("image/png; name=x", "\x89PNG"))
	mux.Handle("GET /actas/HTML/boleta", typed("text/html; charset=utf-8", "<script>alert(document.cookie)</script>"))
	mux.Handle("GET /actas/SVG/boleta", typed("image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg" onload="alert(1)"/>`))
	mux.Handle("GET /actas/XHTML/boleta", typed("application/xhtml+xml", `<html xmlns="http://www.w3.org/1999/xhtml"><script>alert(1)</script></html>`))
	mux.Handle("GET /actas/NONE/boleta", typed("", pdf))
	mux.Handle("GET /actas/GARBLED/boleta", typed("application/pdf/x; ;=", pdf))
	mux.Handle("GET /actas/BIG/boleta", typed("application/pdf", strings.Repeat("%", limit+1)))
	mux.Handle("GET /actas/EXACT/boleta", stream(limit))
	mux.Handle("GET /actas/STREAM/boleta", stream(20*limit))
	p := newPortal(t, mux)
	e := startWith(t, source{id: "v", url: p.URL, extra: []string{fmt.Sprintf("voucher_max_bytes: %d", limit)}})

	// A good PDF: relayed as it came, with the protective headers.
	resp, body := e.get("/v1/sources/v/infractions/PDF/voucher")
	if resp.StatusCode != http.StatusOK || string(body) != pdf {
		t.Fatalf("PDF voucher: got %d %q", resp.StatusCode, body)
	}
	for h, want := range map[string]string{
		"Content-Type":            "application/pdf",
		"X-Content-Type-Options":  "nosniff",
		"Content-Security-Policy": "sandbox; default-src 'none'",
		"Content-Disposition":     `attachment; filename="v-PDF.pdf"`,
		"Cache-Control":           "no-store",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("PDF voucher %s: got %q, want %q", h, got, want)
		}
	}
	resp, _ = e.get("/v1/sources/v/infractions/PNG/voucher")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/png; name=x" ||
		resp.Header.Get("Content-Disposition") != `attachment; filename="v-PNG.png"` {
		t.Errorf("PNG voucher: got %d, %q, %q", resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Content-Disposition"))
	}
	resp, body = e.get("/v1/sources/v/infractions/EXACT/voucher")
	if resp.StatusCode != http.StatusOK || len(body) != limit {
		t.Errorf("voucher of exactly voucher_max_bytes: got %d with %d bytes, want 200 with %d", resp.StatusCode, len(body), limit)
	}

	// Refused before a byte is relayed: 502 source-error, twice each, more
	// than min_calls (4) in all: counted, they would trip the breaker.
	for _, id := range []string{"HTML", "SVG", "XHTML", "NONE", "GARBLED", "BIG"} {
		for range 2 {
			h, _ := e.voucherProblem("v", id, http.StatusBadGateway, "source-error")
			if cd := h.Get("Content-Disposition"); cd != "" {
				t.Errorf("%s: a problem with Content-Disposition %q", id, cd)
			}
			if ns := h.Get("X-Content-Type-Options"); ns != "nosniff" { // as every JSON answer (SPEC 9)
				t.Errorf("%s: a problem with X-Content-Type-Options %q, want nosniff", id, ns)
			}
		}
	}
	if b := e.breaker("v", "voucher"); b.State != "closed" || b.Window.Failures != 0 || b.Window.Calls != 3 {
		t.Errorf("v/voucher after 3 good vouchers and 12 refused ones: %s, window %+v; want closed, 3 calls, no failure", b.State, b.Window)
	}

	// Longer than voucher_max_bytes, found out while streaming: the
	// transfer is cut off, never a voucher that looks whole; source-error
	// in the metrics.
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/sources/v/infractions/STREAM/voucher", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The cut may come before net/http has sent the head (it buffers the
	// first few KiB): the client then sees the connection close at once.
	// A fresh connection: on a reused one, net/http would send the GET
	// again.
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	if resp, err = (&http.Client{Transport: tr}).Do(req); err == nil {
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || err == nil || len(got) > limit {
			t.Errorf("oversized streamed voucher: %d, read %d bytes, err %v; want a broken transfer of at most %d bytes",
				resp.StatusCode, len(got), err, limit)
		}
	}
	if n := sourceCalls(t, e, "v", "voucher", "error"); n != 12+1 {
		t.Errorf(`aggregator_source_calls_total{source="v",operation="voucher",outcome="error"} = %v, want 13 (12 refused, 1 cut off)`, n)
	}
	if n := sourceCalls(t, e, "v", "voucher", "succeeded"); n != 3 {
		t.Errorf(`aggregator_source_calls_total{source="v",operation="voucher",outcome="succeeded"} = %v, want 3`, n)
	}
}

// sourceCalls reads aggregator_source_calls_total for one source,
// operation and outcome (0 when absent).
func sourceCalls(t *testing.T, e *env, source, op, outcome string) float64 {
	t.Helper()
	_, body := e.get("/metrics")
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, "aggregator_source_calls_total{") {
			continue
		}
		labels, value, _ := strings.Cut(strings.TrimSpace(line), "} ")
		if strings.Contains(labels, `source="`+source+`"`) && strings.Contains(labels, `operation="`+op+`"`) &&
			strings.Contains(labels, `outcome="`+outcome+`"`) {
			f, err := strconv.ParseFloat(value, 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// TestOverload: with server.max_in_flight requests being served, the next
// one is refused at once with 503 overloaded and Retry-After: 1, without
// reaching a portal; health, readiness, metrics and, with the admin token,
// the runtime profiles still answer; when the held requests end, the
// replica serves again.
func TestOverload(t *testing.T) {
	t.Parallel()
	const maxInFlight = 4
	gate := make(chan struct{})
	p := newPortal(t, nil)
	p.set(p.gated(gate, one("O-1")))
	text := strings.Replace(configYAML(adminToken, source{id: "slow", url: p.URL, extra: []string{"timeout: 9s"}}),
		"server: {", fmt.Sprintf("server: {max_in_flight: %d, ", maxInFlight), 1)
	cfg, err := config.Parse([]byte(text), "e2e.yaml", nil)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, text)
	}
	e := start(t, cfg, app.Options{})

	var held sync.WaitGroup
	for i := range maxInFlight {
		held.Add(1)
		go func() {
			defer held.Done()
			// Different plates: identical queries in flight share one call.
			if a := e.byDomain(plateN(i), "timeout=10s"); a.status != http.StatusOK {
				t.Errorf("a held query: got %d, want 200 once released", a.status)
			}
		}()
	}
	released := false
	release := func() {
		if !released {
			released = true
			close(gate)
			held.Wait()
		}
	}
	defer release()
	eventually(t, 5*time.Second, "the held queries reach the portal", func() bool { return p.calls() == maxInFlight })

	for _, path := range []string{"/v1/infractions?domain=" + plate, "/v1/sources", "/v1/sources/slow/infractions/O-1/voucher",
		"/v1/admin/breakers", "/nowhere", "/"} {
		begin := time.Now()
		resp, body := e.get(path)
		took := time.Since(begin)
		var doc problemDoc
		_ = json.Unmarshal(body, &doc)
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || retryAfter(&doc) != 1 {
			t.Errorf("GET %s while %d requests are served: got %d, Retry-After %q: %s; want 503 overloaded, Retry-After: 1",
				path, maxInFlight, resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
		checkType(t, doc, "overloaded")
		if took > time.Second {
			t.Errorf("GET %s: overloaded after %v, want at once", path, took)
		}
	}
	if n := p.calls(); n != maxInFlight {
		t.Errorf("the portal received %d calls, want %d: a refused query did work", n, maxInFlight)
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if resp, body := e.get(path); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s while overloaded: got %d %s, want 200", path, resp.StatusCode, body)
		}
	}
	// An overloaded replica is the one an operator profiles (issue 23).
	admin := http.Header{"Authorization": {"Bearer " + adminToken}}
	if resp, body := e.do(http.MethodGet, "/debug/pprof/goroutine?debug=1", admin, ""); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /debug/pprof/goroutine with the admin token while overloaded: got %d %s, want 200", resp.StatusCode, body)
	}
	if resp, _ := e.get("/debug/pprof/goroutine"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /debug/pprof/goroutine without the token while overloaded: got %d, want 401", resp.StatusCode)
	}

	release()
	if a := e.byDomain(plate); a.status != http.StatusOK {
		t.Errorf("a query once the held ones ended: got %d, want 200", a.status)
	}
	if resp, _ := e.get("/v1/sources"); resp.StatusCode != http.StatusOK {
		t.Errorf("GET /v1/sources once the held queries ended: got %d, want 200", resp.StatusCode)
	}
}

// TestReadyzTellsNoSecrets: with Redis unreachable, /readyz says the store
// check is degraded or unavailable, and nothing of the address or the
// error; the admin API has the detail.
func TestReadyzTellsNoSecrets(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close() // nothing listens there now
	_, port, _ := net.SplitHostPort(dead)
	p := newPortal(t, one("Q-1"))
	text := configYAML(adminToken, source{id: "caba", url: p.URL}) +
		fmt.Sprintf("store: {redis_url: %q, key_prefix: %q}\n", "redis://"+dead+"/0", "e2e-readyz:")
	cfg, err := config.Parse([]byte(text), "e2e.yaml", nil)
	if err != nil {
		t.Fatalf("config.Parse: %v", err)
	}
	e := start(t, cfg, app.Options{})

	resp, body := e.get("/readyz")
	var doc struct {
		Status string                    `json:"status"`
		Checks map[string]map[string]any `json:"checks"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("GET /readyz: %v: %s", err, body)
	}
	st := doc.Checks["redis"]["status"]
	if (st != "degraded" && st != "unavailable") || len(doc.Checks["redis"]) != 1 {
		t.Errorf("GET /readyz with Redis down: %d %s, want the redis check degraded or unavailable, and nothing else", resp.StatusCode, body)
	}
	for _, leak := range []string{"127.0.0.1", port, "redis://", "dial", "refused", "tcp", "detail"} {
		if strings.Contains(string(body), leak) {
			t.Errorf("GET /readyz tells %q: %s", leak, body)
		}
	}

	resp, body = e.admin(http.MethodGet, "/readyz", "")
	doc.Checks = nil
	if err := json.Unmarshal(body, &doc); err != nil || resp.StatusCode != http.StatusOK || doc.Checks["redis"]["detail"] == "" {
		t.Errorf("GET /v1/admin/readyz: %d %s, want 200 with the detail", resp.StatusCode, body)
	}
	if resp, _ := e.get("/v1/admin/readyz"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/admin/readyz without the token: %d, want 401", resp.StatusCode)
	}
}

// TestUnknownAdminPaths: unknown /v1/admin paths answer like known ones,
// 401 without the token (403 with none configured); 404 with it.
func TestUnknownAdminPaths(t *testing.T) {
	t.Parallel()
	p := newPortal(t, nil)
	open := startWith(t, source{id: "caba", url: p.URL})
	closed := start(t, newConfig(t, "", source{id: "caba", url: p.URL}), app.Options{})
	for _, path := range []string{"/v1/admin/nope", "/v1/admin", "/v1/admin/breakers/caba", "/v1/admin/users/1/keys"} {
		resp, body := open.get(path)
		var doc problemDoc
		_ = json.Unmarshal(body, &doc)
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("GET %s without the token: %d %s, want 401 with a Bearer challenge", path, resp.StatusCode, body)
		}
		checkType(t, doc, "unauthorized")
		resp, body = closed.get(path)
		doc = problemDoc{}
		_ = json.Unmarshal(body, &doc)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s, no admin token configured: %d %s, want 403", path, resp.StatusCode, body)
		}
		checkType(t, doc, "forbidden")
		resp, body = open.admin(http.MethodGet, strings.TrimPrefix(path, "/v1/admin"), "")
		doc = problemDoc{}
		_ = json.Unmarshal(body, &doc)
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s with the token: %d %s, want 404", path, resp.StatusCode, body)
		}
		checkType(t, doc, "not-found")
	}
}
