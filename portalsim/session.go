package portalsim

import (
	"html"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// sessionDialect is ShapeSession, a web site (ASP.NET MVC style) that
// needs its search page first, in UTF-8:
//
//	GET /consulta
//	Set-Cookie: ASP.NET_SessionId=…; Path=/; HttpOnly; SameSite=Lax
//	<form id="consulta" method="post" action="/consulta">
//	<input name="__RequestVerificationToken" type="hidden" value="…">
//
//	POST /consulta   dominio={domain}&__RequestVerificationToken=…
//	POST /consulta   documento={id}&__RequestVerificationToken=…
//	GET  /consulta/boleta/{infraction_id}
//
//	<ul id="resultados">
//	<li class="acta">
//	<span class="numero">MIS-2026-3321</span>
//	<time datetime="2026-01-28T11:15:00">28/01/2026 11:15</time>
//	<span class="descripcion">…</span> <span class="lugar">…</span>
//	<span class="importe" data-moneda="ARS">ARS 143.200,00</span>
//	<span class="estado">Impaga</span>
//	<a class="boleta" href="/consulta/boleta/MIS-2026-3321">Descargar boleta</a>
//	</li>
//	</ul>
//
// Every call but the session page needs the session cookie of a live
// session: without one it is answered with the session page again (200,
// starting a new session). A POST also needs the session's token, in the
// form field __RequestVerificationToken or the RequestVerificationToken
// header: without it, 403. A session lives Jurisdiction.Session.TTL after
// its last use; ExpireSessions (POST /_sim/sessions/expire) ends them all.
// No records is <p class="sin-resultados">; the Maintenance mode's page
// (200) has <div id="mantenimiento">. The results page has no form, so it
// never looks like the session page. CallStats counts the calls to the
// session page, the sessions started and the calls refused.
func sessionDialect() *dialect {
	return &dialect{
		byDomain: "/consulta?dominio={domain}",
		byID:     "/consulta?documento={id}",
		voucher:  "/consulta/boleta/{infraction_id}",
		post:     true,
		format:   formatHTML,
		items:    "ul#resultados li.acta",
		fields: []field{{"id", "span.numero"}, {"date", "time@datetime"}, {"description", "span.descripcion"},
			{"place", "span.lugar"}, {"amount", "span.importe"}, {"currency", "span.importe@data-moneda"},
			{"status", "span.estado"}},
		statusText: map[string]string{StatusUnpaid: "Impaga", StatusPaid: "Pagada", StatusInProcess: "Con descargo"},
		answer:     sessionAnswer,
		gate:       sessionGate,
		extra: func(p *Portal) {
			p.mux.HandleFunc("GET "+sessionPath, p.handleSessionPage)
		},
	}
}

// The names of ShapeSession's session.
const (
	sessionPath        = "/consulta"
	sessionCookie      = "ASP.NET_SessionId"
	sessionTokenField  = "__RequestVerificationToken"
	sessionTokenHeader = "RequestVerificationToken"
)

// sessionStore keeps a portal's live sessions: by cookie, the grant whose
// value is the session's anti-forgery token.
type sessionStore struct {
	mu sync.Mutex
	m  map[string]grant
}

func newSessionStore() *sessionStore { return &sessionStore{m: make(map[string]grant)} }

// start opens a session; it returns its cookie value and token.
func (s *sessionStore) start(ttl time.Duration) (cookie, token string) {
	cookie, token = randomToken(), randomToken()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	prune(s.m, now)
	s.m[cookie] = grant{value: token, expires: now.Add(ttl), issued: now}
	return cookie, token
}

// use is the token of the live session of cookie, whose life starts again.
func (s *sessionStore) use(cookie string, ttl time.Duration) (string, bool) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.m[cookie]
	if !ok || !now.Before(g.expires) {
		delete(s.m, cookie)
		return "", false
	}
	g.expires = now.Add(ttl)
	s.m[cookie] = g
	return g.value, true
}

func (s *sessionStore) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.m)
}

// ExpireSessions ends every session of the portal: the next call with one
// gets the session page again.
func (p *Portal) ExpireSessions() { p.sessions.expire() }

// session is the token of r's live session.
func (p *Portal) session(r *http.Request) (string, bool) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return "", false
	}
	return p.sessions.use(c.Value, p.j.Session.TTL)
}

func (p *Portal) handleSessionPage(w http.ResponseWriter, r *http.Request) {
	p.call(w, r, kindSession, func() { p.sessionPage(w, r) })
}

// sessionPage answers 200 with the search page, in r's live session or in
// a new one.
func (p *Portal) sessionPage(w http.ResponseWriter, r *http.Request) {
	token, ok := p.session(r)
	if !ok {
		var cookie string
		cookie, token = p.sessions.start(p.j.Session.TTL)
		p.calls.sessionIssued()
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: cookie, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
	}
	w.Header().Set("Cache-Control", "no-cache, no-store")
	p.writeHTML(w, http.StatusOK, "Consulta de actas", `<h1>Consulta de actas de tránsito</h1>
<form id="consulta" method="post" action="`+sessionPath+`">
<input name="`+sessionTokenField+`" type="hidden" value="`+html.EscapeString(token)+`">
<label>Dominio <input name="dominio" type="text" maxlength="10"></label>
<label>Documento <input name="documento" type="text" maxlength="13"></label>
<button type="submit">Consultar</button>
</form>
`)
}

// sessionGate admits a call in a live session, a POST only with its token.
func sessionGate(p *Portal, w http.ResponseWriter, r *http.Request, _ kind) bool {
	token, ok := p.session(r)
	if !ok {
		p.calls.refused()
		p.sessionPage(w, r)
		return false
	}
	if r.Method == http.MethodPost {
		got := r.PostForm.Get(sessionTokenField)
		if got == "" {
			got = r.Header.Get(sessionTokenHeader)
		}
		if !equalSecret(got, token) {
			p.calls.refused()
			p.fail(w, http.StatusForbidden, "La solicitud no es válida: falta el token de verificación o no corresponde a la sesión.")
			return false
		}
	}
	return true
}

func sessionAnswer(p *Portal, w http.ResponseWriter, _ *http.Request, _ kind, recs []Record) {
	var b strings.Builder
	b.WriteString("<h1>Resultado de la consulta</h1>\n")
	if len(recs) == 0 {
		b.WriteString(`<p class="sin-resultados">No se registran actas para los datos ingresados.</p>` + "\n")
		p.writeHTML(w, http.StatusOK, "Resultado de la consulta", b.String())
		return
	}
	e := html.EscapeString
	b.WriteString("<ul id=\"resultados\">\n")
	for _, r := range recs {
		b.WriteString("<li class=\"acta\">\n")
		if r.ID != "" {
			b.WriteString(`<span class="numero">` + e(r.ID) + "</span>\n")
		}
		b.WriteString(`<time datetime="` + recordTime(r.Date).Format(recordDateLayout) + `">` + civilTime(r.Date) + "</time>\n")
		b.WriteString(`<span class="descripcion">` + e(r.Description) + "</span>\n")
		b.WriteString(`<span class="lugar">` + e(r.Place) + "</span>\n")
		if r.Currency != "" {
			b.WriteString(`<span class="importe" data-moneda="` + e(r.Currency) + `">` + e(r.Currency) + " " + argentineAmount(r.Amount) + "</span>\n")
		} else {
			b.WriteString(`<span class="importe">` + argentineAmount(r.Amount) + "</span>\n")
		}
		b.WriteString(`<span class="estado">` + e(p.d.status(r.Status)) + "</span>\n")
		if r.ID != "" {
			b.WriteString(`<a class="boleta" href="` + e("/consulta/boleta/"+url.PathEscape(r.ID)) + `">Descargar boleta</a>` + "\n")
		}
		b.WriteString("</li>\n")
	}
	b.WriteString("</ul>\n")
	p.writeHTML(w, http.StatusOK, "Resultado de la consulta", b.String())
}
