package portalsim

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// oauth2Dialect is ShapeOAuth2, a JSON API behind the OAuth2 client
// credentials grant (RFC 6749 4.4; bearer tokens, RFC 6750):
//
//	POST /oauth/token   grant_type=client_credentials[&scope=actas.read]
//	                    client authentication by HTTP Basic or by the form's
//	                    client_id and client_secret (not both)
//	{"access_token": "…", "token_type": "Bearer", "expires_in": 3600, "scope": "actas.read"}
//
//	GET /api/v1/infracciones?dominio={domain}
//	GET /api/v1/infracciones?documento={id}&tipo={id_kind}
//	GET /api/v1/infracciones/{infraction_id}/boleta
//	Authorization: Bearer …
//	{"data": [{"codigo": "ER-1", "fecha": "2026-03-09T16:50:00.000",
//	  "concepto": "…", "lugar": "…", "importe": "198500.00", "moneda": "ARS",
//	  "estado": "ADEUDADA"}], "total": 1}
//
// Every call to the API needs a token the portal issued, not expired nor
// revoked, granted every scope of Jurisdiction.OAuth2: without one it is
// 401 (WWW-Authenticate: Bearer, error="invalid_token" when one was sent),
// with too few scopes 403 insufficient_scope. The token endpoint answers
// wrong client credentials 401 {"error": "invalid_client"}, another grant
// 400 unsupported_grant_type, a scope the client may not have 400
// invalid_scope. Faults apply to the token endpoint as to the API.
// CallStats counts the calls to the token endpoint, the tokens issued and
// the calls refused; RevokeTokens (POST /_sim/tokens/revoke) invalidates
// every token issued.
func oauth2Dialect() *dialect {
	return &dialect{
		byDomain: "/api/v1/infracciones?dominio={domain}",
		byID:     "/api/v1/infracciones?documento={id}&tipo={id_kind}",
		voucher:  "/api/v1/infracciones/{infraction_id}/boleta",
		items:    "/data",
		fields: []field{{"id", "/codigo"}, {"date", "/fecha"}, {"description", "/concepto"},
			{"place", "/lugar"}, {"amount", "/importe"}, {"currency", "/moneda"}, {"status", "/estado"}},
		statusText: map[string]string{StatusUnpaid: "ADEUDADA", StatusPaid: "PAGADA", StatusInProcess: "EN_DESCARGO"},
		render:     renderOAuth2,
		gate:       bearerGate,
		extra: func(p *Portal) {
			p.mux.HandleFunc(tokenPath, p.handleToken)
		},
	}
}

// tokenPath is the token endpoint of ShapeOAuth2.
const tokenPath = "/oauth/token"

type oauth2Item struct {
	Codigo   string `json:"codigo"`
	Fecha    string `json:"fecha"`
	Concepto string `json:"concepto"`
	Lugar    string `json:"lugar"`
	Importe  string `json:"importe"`
	Moneda   string `json:"moneda,omitempty"`
	Estado   string `json:"estado"`
}

type oauth2Body struct {
	Data  []oauth2Item `json:"data"`
	Total int          `json:"total"`
}

func renderOAuth2(d *dialect, recs []Record) any {
	b := oauth2Body{Data: make([]oauth2Item, 0, len(recs)), Total: len(recs)}
	for _, r := range recs {
		b.Data = append(b.Data, oauth2Item{
			Codigo: r.ID, Fecha: recordTime(r.Date).Format("2006-01-02T15:04:05.000"),
			Concepto: r.Description, Lugar: r.Place, Importe: r.Amount, Moneda: r.Currency,
			Estado: d.status(r.Status),
		})
	}
	return b
}

// maxGrants bounds the tokens (and the sessions) a portal keeps: past it,
// the expired ones are dropped, then the oldest.
const maxGrants = 10_000

// grant is a token or a session: its secret value and when it expires.
type grant struct {
	value   string
	scopes  []string
	expires time.Time
	issued  time.Time
}

// tokenStore keeps the tokens a portal issued.
type tokenStore struct {
	mu sync.Mutex
	m  map[string]grant // by token
}

func newTokenStore() *tokenStore { return &tokenStore{m: make(map[string]grant)} }

func (s *tokenStore) issue(scopes []string, ttl time.Duration) string {
	tok := randomToken()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	prune(s.m, now)
	s.m[tok] = grant{value: tok, scopes: scopes, expires: now.Add(ttl), issued: now}
	return tok
}

// valid is the grant of tok when it is neither unknown nor expired.
func (s *tokenStore) valid(tok string) (grant, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.m[tok]
	if !ok || !time.Now().Before(g.expires) {
		return grant{}, false
	}
	return g, true
}

func (s *tokenStore) revoke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.m)
}

// prune makes room for one more grant in m: it drops the expired ones when
// m is full, then the oldest.
func prune(m map[string]grant, now time.Time) {
	if len(m) < maxGrants {
		return
	}
	for k, g := range m {
		if !now.Before(g.expires) {
			delete(m, k)
		}
	}
	for len(m) >= maxGrants {
		var oldest string
		var at time.Time
		for k, g := range m {
			if oldest == "" || g.issued.Before(at) {
				oldest, at = k, g.issued
			}
		}
		delete(m, oldest)
	}
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// RevokeTokens invalidates every OAuth2 token the portal issued: the next
// call with one is a 401.
func (p *Portal) RevokeTokens() { p.tokens.revoke() }

// oauthError is an RFC 6749 5.2 error answer.
type oauthError struct {
	Error       string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

type tokenAnswer struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
}

// handleToken serves the token endpoint.
func (p *Portal) handleToken(w http.ResponseWriter, r *http.Request) {
	p.call(w, r, kindToken, func() {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Pragma", "no-cache")
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			writeJSON(w, http.StatusMethodNotAllowed, oauthError{"invalid_request", "el token se pide por POST"})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
		if err := r.ParseForm(); err != nil {
			writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request", "formulario ilegible"})
			return
		}
		form := r.PostForm
		cfg := p.j.OAuth2
		basicID, basicSecret, basic := r.BasicAuth()
		_, formHasID := form["client_id"]
		_, formHasSecret := form["client_secret"]
		var known bool
		switch {
		case basic && (formHasID || formHasSecret):
			writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request", "más de un método de autenticación del cliente"})
			return
		case basic && p.d.tokenBodyOnly:
			refuseBasic(p, w)
			return
		case basic:
			// RFC 6749 2.3.1: the client id and secret are form-urlencoded
			// before Basic; a client that does not do it is served too.
			known = (equalSecret(basicID, cfg.ClientID) || equalSecret(formDecoded(basicID), cfg.ClientID)) &&
				(equalSecret(basicSecret, cfg.ClientSecret) || equalSecret(formDecoded(basicSecret), cfg.ClientSecret))
		default:
			known = equalSecret(form.Get("client_id"), cfg.ClientID) && equalSecret(form.Get("client_secret"), cfg.ClientSecret)
		}
		if !known {
			if basic {
				w.Header().Set("WWW-Authenticate", `Basic realm="`+tokenPath+`"`)
			}
			p.calls.refused()
			writeJSON(w, http.StatusUnauthorized, oauthError{"invalid_client", "credenciales de cliente inválidas"})
			return
		}
		switch gt := form.Get("grant_type"); gt {
		case "client_credentials":
		case "":
			writeJSON(w, http.StatusBadRequest, oauthError{"invalid_request", "falta grant_type"})
			return
		default:
			writeJSON(w, http.StatusBadRequest, oauthError{"unsupported_grant_type", "solo client_credentials"})
			return
		}
		scopes := cfg.Scopes
		if asked := strings.Fields(form.Get("scope")); len(asked) > 0 {
			for _, s := range asked {
				if !slices.Contains(cfg.Scopes, s) {
					writeJSON(w, http.StatusBadRequest, oauthError{"invalid_scope", "alcance no permitido"})
					return
				}
			}
			scopes = slices.Compact(slices.Sorted(slices.Values(asked)))
		}
		tok := p.tokens.issue(scopes, cfg.TokenTTL)
		p.calls.tokenIssued()
		writeJSON(w, http.StatusOK, tokenAnswer{
			AccessToken: tok, TokenType: "Bearer",
			ExpiresIn: max(1, int64(cfg.TokenTTL/time.Second)), Scope: strings.Join(scopes, " "),
		})
	})
}

// formDecoded is s decoded as application/x-www-form-urlencoded, or ""
// when it does not decode.
func formDecoded(s string) string {
	d, _ := url.QueryUnescape(s)
	return d
}

// equalSecret compares in constant time.
func equalSecret(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// bearerGate admits a call with a valid bearer token granted every scope
// of the portal's OAuth2 settings.
func bearerGate(p *Portal, w http.ResponseWriter, r *http.Request, _ kind) bool {
	realm := `Bearer realm="` + p.j.ID + `"`
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(tok) == "" {
		p.calls.refused()
		w.Header().Set("WWW-Authenticate", realm)
		writeJSON(w, http.StatusUnauthorized, oauthError{"invalid_request", "se requiere un token de acceso"})
		return false
	}
	g, ok := p.tokens.valid(strings.TrimSpace(tok))
	if !ok {
		p.calls.refused()
		w.Header().Set("WWW-Authenticate", realm+`, error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, oauthError{"invalid_token", "token inválido o vencido"})
		return false
	}
	for _, s := range p.j.OAuth2.Scopes {
		if !slices.Contains(g.scopes, s) {
			p.calls.refused()
			w.Header().Set("WWW-Authenticate", realm+`, error="insufficient_scope", scope="`+strings.Join(p.j.OAuth2.Scopes, " ")+`"`)
			writeJSON(w, http.StatusForbidden, oauthError{"insufficient_scope", "el token no alcanza"})
			return false
		}
	}
	return true
}
