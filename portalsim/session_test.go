package portalsim_test

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/multas/aggregator/portalsim"
)

// sessionVisit is what a client holds after the session page.
type sessionVisit struct {
	cookie *http.Cookie
	token  string
}

func parseUTF8Page(t *testing.T, got answer) *html.Node {
	t.Helper()
	if ct := got.header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type = %q, want text/html; charset=utf-8", ct)
	}
	doc, err := html.Parse(bytes.NewReader(got.body))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// isSessionPage reports whether got is the session page, and reads the
// session it carries (its cookie, when it sets one).
func isSessionPage(t *testing.T, got answer) (sessionVisit, bool) {
	t.Helper()
	doc := parseUTF8Page(t, got)
	token, ok, _ := cssValue(doc, "form#consulta input[name=__RequestVerificationToken]@value")
	var v sessionVisit
	for _, c := range (&http.Response{Header: got.header}).Cookies() {
		if c.Name == "ASP.NET_SessionId" {
			v.cookie = c
		}
	}
	v.token = token
	return v, ok && token != ""
}

func visit(t *testing.T, client *http.Client, base string) sessionVisit {
	t.Helper()
	got, err := get(t.Context(), client, base+"/consulta")
	if err != nil {
		t.Fatal(err)
	}
	v, ok := isSessionPage(t, got)
	if got.status != 200 || !ok || v.cookie == nil || !v.cookie.HttpOnly || v.cookie.Path != "/" {
		t.Fatalf("session page: %d, %+v, %s", got.status, v, got.body)
	}
	return v
}

// post sends form to /consulta with the cookie (when not nil) and the
// token in the header (when not empty).
func post(t *testing.T, client *http.Client, base string, form url.Values, cookie *http.Cookie, header string) answer {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/consulta", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie != nil {
		req.AddCookie(cookie)
	}
	if header != "" {
		req.Header.Set("RequestVerificationToken", header)
	}
	got, err := doReq(client, req)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func resultIDs(t *testing.T, got answer) []string {
	t.Helper()
	items, _ := css(parseUTF8Page(t, got), "ul#resultados li.acta")
	var ids []string
	for _, it := range items {
		v, _, _ := cssValue(it, "span.numero")
		ids = append(ids, v)
	}
	return ids
}

func TestSessionNeedsCookieAndToken(t *testing.T) {
	t.Parallel()
	p, base, client := startPortal(t, testJurisdiction(portalsim.ShapeSession, portalsim.Fault{}))
	v := visit(t, client, base)
	other := visit(t, client, base)
	byDomain := url.Values{"dominio": {portalsim.DemoPlate}, "__RequestVerificationToken": {v.token}}

	got := post(t, client, base, byDomain, v.cookie, "")
	if ids := resultIDs(t, got); got.status != 200 || len(ids) != 1 || ids[0] != "T-1" {
		t.Fatalf("cookie and token: %d %v\n%s", got.status, ids, got.body)
	}
	doc := parseUTF8Page(t, got)
	item, _ := css(doc, "ul#resultados li.acta")
	for sel, want := range map[string]string{
		"time@datetime": "2026-03-14T09:12:00", "time": "14/03/2026 09:12", "span.descripcion": "Exceso de velocidad",
		"span.lugar": "Av. Lugones km 4", "span.importe": "ARS 185.000,50", "span.importe@data-moneda": "ARS",
		"span.estado": "Impaga", "a.boleta@href": "/consulta/boleta/T-1",
	} {
		if got, _, _ := cssValue(item[0], sel); got != want {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
	if _, again := isSessionPage(t, got); again {
		t.Errorf("the results look like the session page")
	}

	// The token may come in the header instead; by_id works the same way.
	byID := url.Values{"documento": {portalsim.DemoCUIT}}
	if got := post(t, client, base, byID, v.cookie, v.token); got.status != 200 || len(resultIDs(t, got)) != 1 {
		t.Errorf("token in the header: %d %s", got.status, got.body)
	}
	if got := post(t, client, base, url.Values{"dominio": {portalsim.DemoPlateClean}}, v.cookie, v.token); !strings.Contains(string(got.body), `<p class="sin-resultados">`) {
		t.Errorf("no records: %d %s", got.status, got.body)
	}

	refusals := []struct {
		name   string
		form   url.Values
		cookie *http.Cookie
		header string
		status int
		page   bool // answered with the session page again
	}{
		{"no cookie", byDomain, nil, "", 200, true},
		{"unknown cookie", byDomain, &http.Cookie{Name: "ASP.NET_SessionId", Value: "forged"}, "", 200, true},
		{"no token", url.Values{"dominio": {portalsim.DemoPlate}}, v.cookie, "", 403, false},
		{"another session's token", url.Values{"dominio": {portalsim.DemoPlate}, "__RequestVerificationToken": {other.token}}, v.cookie, "", 403, false},
		{"wrong header token", url.Values{"dominio": {portalsim.DemoPlate}}, v.cookie, "x" + v.token, 403, false},
	}
	for _, tt := range refusals {
		got := post(t, client, base, tt.form, tt.cookie, tt.header)
		s, page := isSessionPage(t, got)
		if got.status != tt.status || page != tt.page || len(resultIDs(t, got)) != 0 {
			t.Errorf("%s: %d, session page %v; want %d, %v", tt.name, got.status, page, tt.status, tt.page)
		}
		if tt.page && (s.cookie == nil || s.cookie.Value == v.cookie.Value) {
			t.Errorf("%s: the session page again does not start a new session", tt.name)
		}
	}

	// The voucher needs the cookie only.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/consulta/boleta/T-1", nil)
	req.AddCookie(v.cookie)
	if got, err := doReq(client, req); err != nil || got.status != 200 || got.header.Get("Content-Type") != "application/pdf" {
		t.Errorf("voucher with the cookie: %d %v", got.status, err)
	}
	if got, err := get(t.Context(), client, base+"/consulta/boleta/T-1"); err != nil {
		t.Fatal(err)
	} else if _, page := isSessionPage(t, got); !page {
		t.Errorf("voucher without the cookie: %d, want the session page", got.status)
	}

	// The session page with a live cookie keeps its session.
	req, _ = http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/consulta", nil)
	req.AddCookie(v.cookie)
	got, err := doReq(client, req)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := isSessionPage(t, got); !ok || s.cookie != nil || s.token != v.token {
		t.Errorf("session page in a live session: %+v, want the same token and no new cookie", s)
	}
	want := portalsim.CallStats{ByDomain: 7, ByID: 1, Voucher: 2, SessionPage: 3, Total: 13,
		SessionsIssued: 5, Refused: 6, MaxInFlight: 1}
	if c := p.Calls(); c != want {
		t.Errorf("Calls() = %+v\nwant       %+v", c, want)
	}

	// Expired (through the control endpoint): the session page again.
	if got, err := do(t.Context(), client, http.MethodPost, base+"/_sim/sessions/expire", ""); err != nil || got.status != 204 {
		t.Fatalf("expire: %d %v", got.status, err)
	}
	if _, page := isSessionPage(t, post(t, client, base, byDomain, v.cookie, "")); !page {
		t.Errorf("after ExpireSessions: not the session page")
	}
}

func TestSessionExpiresWhenIdle(t *testing.T) {
	t.Parallel()
	j := testJurisdiction(portalsim.ShapeSession, portalsim.Fault{})
	j.Session.TTL = 2 * time.Second
	_, base, client := startPortal(t, j)
	v := visit(t, client, base)
	byDomain := url.Values{"dominio": {portalsim.DemoPlate}, "__RequestVerificationToken": {v.token}}
	// Used every 1.2s, the session outlives its TTL; idle for 2.5s, it ends.
	for i := range 2 {
		time.Sleep(1200 * time.Millisecond)
		if got := post(t, client, base, byDomain, v.cookie, ""); len(resultIDs(t, got)) != 1 {
			t.Fatalf("use %d, %v after the last: %d %s", i+1, 1200*time.Millisecond, got.status, got.body)
		}
	}
	time.Sleep(2500 * time.Millisecond)
	if _, page := isSessionPage(t, post(t, client, base, byDomain, v.cookie, "")); !page {
		t.Errorf("an idle session past its TTL still answers")
	}
}
