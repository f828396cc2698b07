package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/multas/aggregator/config"
)

// The secrets of TestSourcesCheckHostile. Each holds a core that no
// encoding changes (letters and digits), looked for as well as the value.
const (
	hostileClientID     = "cli-Wd4Kx7"
	hostileClientSecret = "sec/Rt5+Yu6=Hj7"
	hostileTokenUpper   = "tok.Zq8vT2~upper"
	hostileTokenHop     = "tok.Xy7Rw4~hop"
	hostileSession      = "s3ss/10n+Lm3Np9=&x"
	hostileCookie       = "c00k13Pq3Hs5"
	hostileQueryKey     = "qk-Jk8Fd2.Vb6~" // ${QUERY_KEY}, in a query parameter
	hostilePathKey      = "pk-Gt1Nm2"      // ${PATH_KEY}, in a path
	hostileHeaderKey    = "hk-Bv9Cx8"      // ${HEADER_KEY}, in a header
	hostileBodyKey      = "bk-Qa2Ws3<&>\"" // ${BODY_KEY}, in a JSON body
)

// hostileEnv is the environment of TestSourcesCheckHostile.
var hostileEnv = map[string]string{
	"CLIENT_ID": hostileClientID, "CLIENT_SECRET": hostileClientSecret,
	"QUERY_KEY": hostileQueryKey, "PATH_KEY": hostilePathKey, "HEADER_KEY": hostileHeaderKey, "BODY_KEY": hostileBodyKey,
}

// hostileSecrets is what TestSourcesCheckHostile's output must not hold,
// in any form: every secret and its core, and the Basic credentials.
func hostileSecrets() []string {
	var out []string
	for _, s := range []string{hostileClientID, hostileClientSecret, hostileTokenUpper, hostileTokenHop, hostileSession,
		hostileCookie, hostileQueryKey, hostilePathKey, hostileHeaderKey, hostileBodyKey} {
		out = append(out, s, url.QueryEscape(s), url.PathEscape(s))
	}
	out = append(out, "Wd4Kx7", "Rt5", "Yu6", "Zq8vT2", "Xy7Rw4", "Lm3Np9", "Pq3Hs5", "Jk8Fd2", "Gt1Nm2", "Bv9Cx8", "Qa2Ws3",
		base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(hostileClientID)+":"+url.QueryEscape(hostileClientSecret))))
	return out
}

// hostileText is what a hostile portal or configuration writes to move
// the cursor, recolour, reorder or hide text on an operator's terminal.
const hostileText = "\x1b[2J\x1b]0;owned\x07 \u202egnp.exe\u202c \u2066iso\u2069 zero\u200bwidth \u200f \ufeff \u2028 \u009b31m \x00 \x7f \r \t end"

// hostileHeader is as much of it as net/http lets through in a header.
const hostileHeader = "\u202egnp.exe\u202c \u2066iso\u2069 zero\u200bwidth \u200f \ufeff \u2028 \u009b31m \t end"

// sources check run against hostile portals: token endpoints that
// redirect (within their origin, and to the portal's), an HTTP:// token
// URL, a session whose value lands in a path, an inline query and a
// header, ${ENV} credentials in a query, a path, a header and a body, a
// portal that echoes back the token, the session value, the cookie and
// the credentials in its headers and bodies (and into mapped fields), and
// control and bidirectional characters from the portal and from the
// configuration's jurisdiction name. No secret is printed in any form; no
// control or format character reaches the terminal raw; what is expected
// is shown, escaped; a redirect to the portal's origin sends it no
// credential.
func TestSourcesCheckHostile(t *testing.T) {
	t.Parallel()
	h := startHostile(t)

	tests := []struct {
		source string
		status int
		want   []string
	}{
		{"upper", 0, []string{"> POST http://" + h.tokenHost + "/oauth/token", "> Authorization: ***", "< X-Echo-Token: ***", "< X-Echo-Auth: Basic ***",
			"< *** (", "> Authorization: ***", "< X-Echo: Bearer *** | d=AB123CD", `description="Bearer *** | d=AB123CD"`, "OK: 1 infraction(s)"}},
		{"hop", 0, []string{"/hop/2?code=307", "< 307 Temporary Redirect", "/hop/0?code=307", "< X-Echo: Bearer ***", "OK: 1 infraction(s)"}},
		{"foreign", 1, []string{"< 307 Temporary Redirect", "FAILED: source-error: token endpoint: redirect to another origin not followed"}},
		{"session", 0, []string{"> GET " + h.portalURL + "/sesion", "< Set-Cookie: ***", "> GET " + h.portalURL + "/s/***/k/***/actas?t=***&d=AB123CD&api_key=***",
			"> X-Csrf: ***", "> X-Key: ***", "> Cookie: ***", "< X-Echo: *** | *** | t=***&d=AB123CD&api_key=***", "OK: 1 infraction(s)"}},
		{"body", 0, []string{`> {"key":"***","d":"AB123CD"}`, "< X-Echo: ***", "OK: 1 infraction(s)"}},
		{"hostile", 0, []string{`== hostile (Provincia \u001b[31mRoja\u001b[0m \u202eodarugesni\u202c \u2066x\u2069): by_domain`,
			`< X-Hostile: \u202egnp.exe\u202c \u2066iso\u2069 zero\u200bwidth \u200f \ufeff \u2028 \u009b31m \t end`,
			`\u202egnp.exe\u202c`, "OK: 1 infraction(s)"}},
		{"raw", 1, []string{"< first line\n< " + `\u001b[2J\u001b]0;owned\u0007 \u202egnp.exe\u202c \u2066iso\u2069 zero\u200bwidth \u200f \ufeff \u2028 \u009b31m \u0000 \u007f \r \t end` +
			"\n< \uFFFD\uFFFD not UTF-8\n< last line\n", "FAILED: source-error"}},
	}
	for _, tt := range tests {
		t.Run(tt.source, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr syncBuffer
			err := run(context.Background(), []string{"sources", "check", "-config", h.cfgPath, "-source", tt.source, "-domain", "AB123CD"},
				func(k string) string { return hostileEnv[k] }, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if got := exitCode(err); got != tt.status {
				t.Errorf("exit status %d, want %d; output:\n%s", got, tt.status, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			for _, secret := range hostileSecrets() {
				if strings.Contains(out, secret) {
					t.Errorf("output holds secret %q:\n%s", secret, out)
				}
			}
			if i, r := rawControl(out); i >= 0 {
				t.Errorf("output holds %U raw at byte %d:\n%q", r, i, out)
			}
		})
	}
}

// hostile is the portal and token endpoint of TestSourcesCheckHostile and
// a configuration of sources over them: upper, hop and foreign (OAuth2),
// session, body, hostile and raw.
type hostile struct {
	cfgPath, portalURL, tokenHost string
	// offline set, a request to either server fails the test.
	offline atomic.Bool
}

// called fails t when the servers are offline.
func (h *hostile) called(t *testing.T, r *http.Request) {
	if h.offline.Load() {
		t.Errorf("a request reached the hostile servers while offline: %s %s", r.Method, r.URL.Path)
	}
}

// startHostile starts the hostile servers, closed when t ends, which
// check then that credentials never crossed origins.
func startHostile(t *testing.T) *hostile {
	t.Helper()
	h := &hostile{}
	var mu sync.Mutex
	var portalAuth []string // Authorization of each portal request
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.called(t, r)
		auth := r.Header.Get("Authorization")
		mu.Lock()
		portalAuth = append(portalAuth, auth)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		echo := func(values ...string) {
			all := strings.Join(values, " | ")
			w.Header().Set("X-Echo", all)
			w.Header().Add("X-Echo-Encoded", url.QueryEscape(all))
			b, _ := json.Marshal(map[string]any{"actas": []map[string]string{{"nro": "Q-1", "nota": all}}, "echo": all})
			w.Write(b)
		}
		switch {
		case r.URL.Path == "/api/actas":
			if auth != "Bearer "+hostileTokenUpper && auth != "Bearer "+hostileTokenHop {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			echo(auth, r.URL.RawQuery)
		case r.URL.Path == "/sesion":
			http.SetCookie(w, &http.Cookie{Name: "sid", Value: hostileCookie, Path: "/"})
			json.NewEncoder(w).Encode(map[string]string{"token": hostileSession})
		case strings.HasPrefix(r.URL.Path, "/s/"):
			c, err := r.Cookie("sid")
			if err != nil || c.Value != hostileCookie || r.URL.Query().Get("t") != hostileSession ||
				r.Header.Get("X-Csrf") != hostileSession || r.URL.Query().Get("api_key") != hostileQueryKey ||
				r.URL.Path != "/s/"+hostileSession+"/k/"+hostilePathKey+"/actas" || r.Header.Get("X-Key") != hostileHeaderKey {
				http.Error(w, "session not honoured", http.StatusForbidden)
				return
			}
			echo(hostileSession, c.Value, r.URL.RawQuery, r.URL.EscapedPath(), r.Header.Get("X-Key"))
		case r.URL.Path == "/body":
			var got map[string]string
			json.NewDecoder(r.Body).Decode(&got)
			echo(got["key"])
		case r.URL.Path == "/hostile":
			w.Header().Set("X-Hostile", hostileHeader)
			b, _ := json.Marshal(map[string]any{"actas": []map[string]string{{"nro": "Q-1", "nota": hostileText}}})
			w.Write(b)
		case r.URL.Path == "/raw":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			fmt.Fprint(w, "first line\n"+hostileText+"\n\xff\xfe not UTF-8\nlast line\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(portal.Close)

	// The token endpoint, on its own origin: /oauth/token issues the
	// token of the upper-case source, /hop/N redirects N times on its own
	// origin before issuing the other's, /to redirects anywhere. It
	// echoes the credentials it gets.
	var tokenHosts []string
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.called(t, r)
		mu.Lock()
		tokenHosts = append(tokenHosts, r.Host)
		mu.Unlock()
		q := r.URL.Query()
		code, _ := strconv.Atoi(q.Get("code"))
		if r.URL.Path == "/to" {
			http.Redirect(w, r, q.Get("u"), code)
			return
		}
		if n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/")); strings.HasPrefix(r.URL.Path, "/hop/") && n > 0 {
			http.Redirect(w, r, "/hop/"+strconv.Itoa(n-1)+"?"+r.URL.RawQuery, code)
			return
		}
		id, secret, ok := r.BasicAuth()
		id, _ = url.QueryUnescape(id) // RFC 6749 section 2.3.1
		secret, _ = url.QueryUnescape(secret)
		if !ok || id != hostileClientID || secret != hostileClientSecret || r.FormValue("grant_type") != "client_credentials" {
			http.Error(w, `{"error": "invalid_client"}`, http.StatusUnauthorized)
			return
		}
		tok := hostileTokenUpper
		if strings.HasPrefix(r.URL.Path, "/hop/") {
			tok = hostileTokenHop
		}
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		w.Header().Set("X-Echo-Token", tok)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600, "echo": secret})
	}))
	t.Cleanup(tokens.Close)
	tokenHost := strings.TrimPrefix(tokens.URL, "http://")
	h.tokenHost, h.portalURL = tokenHost, portal.URL

	var oauth strings.Builder
	for _, o := range []struct{ id, jurisdiction, tokenURL string }{
		{"upper", "Token por HTTP en mayúsculas", "HTTP://" + tokenHost + "/oauth/token"},
		{"hop", "Token tras dos redirecciones", "http://" + tokenHost + "/hop/2?code=307"},
		{"foreign", "Token redirigido al portal", "http://" + tokenHost + "/to?code=307&u=" + url.QueryEscape(portal.URL+"/api/actas")},
	} {
		fmt.Fprintf(&oauth, `  - id: %s
    jurisdiction: %s
    base_url: %s
    operations: {by_domain: {path: /api/actas, query: {d: "{domain}"}}}
    auth: {oauth2: {token_url: %q, client_id: "${CLIENT_ID}", client_secret: "${CLIENT_SECRET}"}}
    response: {items: /actas, fields: {id: /nro, description: /nota}}
`, o.id, o.jurisdiction, portal.URL, o.tokenURL)
	}
	h.cfgPath = filepath.Join(t.TempDir(), "aggregator.yaml")
	writeFile(t, h.cfgPath, "sources:\n"+oauth.String()+fmt.Sprintf(`  - id: session
    jurisdiction: Sesión
    base_url: %[1]s
    operations:
      by_domain:
        path: "/s/{session.token}/k/${PATH_KEY}/actas?t={session.token}&d={domain}"
        query: {api_key: "${QUERY_KEY}"}
        headers: {X-Csrf: "{session.token}", X-Key: "${HEADER_KEY}"}
    auth: {session: {path: /sesion, format: json, extract: {token: /token}}}
    response: {items: /actas, fields: {id: /nro, description: /nota}}
  - id: body
    jurisdiction: Cuerpo JSON
    base_url: %[1]s
    operations: {by_domain: {method: POST, path: /body, body: {json: {key: "${BODY_KEY}", d: "{domain}"}}}}
    response: {items: /actas, fields: {id: /nro, description: /nota}}
  - id: hostile
    jurisdiction: "Provincia \e[31mRoja\e[0m \u202eodarugesni\u202c \u2066x\u2069"
    base_url: %[1]s
    operations: {by_domain: {path: /hostile, query: {d: "{domain}"}}}
    response: {items: /actas, fields: {id: /nro, description: /nota}}
  - id: raw
    jurisdiction: Texto crudo
    base_url: %[1]s
    operations: {by_domain: {path: /raw, query: {d: "{domain}"}}}
    response: {items: /actas, fields: {id: /nro}}
`, portal.URL))
	t.Cleanup(func() {
		for _, a := range portalAuth {
			if a != "" && !strings.HasPrefix(a, "Bearer ") {
				t.Errorf("the portal received Authorization %q: client credentials crossed origins", a)
			}
		}
		for _, h := range tokenHosts {
			if h != tokenHost {
				t.Errorf("the token endpoint received a request for %q", h)
			}
		}
	})
	return h
}

// rawControl is the byte offset and rune of the first character of s
// that a terminal could act on (Unicode Cc but the line feed, Cf, Zl, Zp,
// or a byte that is not UTF-8), or -1.
func rawControl(s string) (int, rune) {
	for i, r := range s {
		if r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD") ||
			r != '\n' && unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			return i, r
		}
	}
	return -1, 0
}

// What sources check prints is escaped: control, format and separator
// characters and bytes that are not UTF-8 shown as escapes; line breaks
// kept only where they are the output's own structure.
func TestEscapeText(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, line, lines string }{
		{"plain Córdoba 650 ñ €", "plain Córdoba 650 ñ €", "plain Córdoba 650 ñ €"},
		{"a\nb\r\nc\rd", `a\nb\r\nc\rd`, "a\nb\nc\\rd"},
		{"\x1b[31mred\x07", `\u001b[31mred\u0007`, `\u001b[31mred\u0007`},
		{"\x00\x7f\t", `\u0000\u007f\t`, `\u0000\u007f\t`},
		{"\u202eRTL\u202c \u2066\u2067\u2068\u2069 \u200b\u200e\u200f\u061c\ufeff\u2060", `\u202eRTL\u202c \u2066\u2067\u2068\u2069 \u200b\u200e\u200f\u061c\ufeff\u2060`, `\u202eRTL\u202c \u2066\u2067\u2068\u2069 \u200b\u200e\u200f\u061c\ufeff\u2060`},
		{"\u0085\u009b\u2028\u2029", `\u0085\u009b\u2028\u2029`, `\u0085\u009b\u2028\u2029`},
		{"tag\U000E0041", `tag\U000e0041`, `tag\U000e0041`},
		{"bad \xff\xc3", `bad \xff\xc3`, `bad \xff\xc3`},
		{"\uFFFD kept", "\uFFFD kept", "\uFFFD kept"},
	}
	for _, tt := range tests {
		if got := safeText(tt.in); got != tt.line {
			t.Errorf("safeText(%q) = %q, want %q", tt.in, got, tt.line)
		}
		if got := safeLines(tt.in); got != tt.lines {
			t.Errorf("safeLines(%q) = %q, want %q", tt.in, got, tt.lines)
		}
		if i, r := rawControl(safeLines(tt.in)); i >= 0 {
			t.Errorf("safeLines(%q) holds %U raw", tt.in, r)
		}
	}
}

// A secret is hidden in every form a request or an echo gives it.
func TestMaskerForms(t *testing.T) {
	t.Parallel()
	const secret = "a/b+c=d&e<f>\"g h\u202e"
	m := newMasker(config.Source{FromEnv: []string{secret, "ab"}})
	for _, form := range []string{secret, url.QueryEscape(secret), url.PathEscape(secret), url.QueryEscape(url.PathEscape(secret)),
		`a/b+c=d\u0026e\u003cf\u003e\"g h` + "\u202e", `a/b+c=d&e<f>\"g h` + "\u202e", "a/b+c=d&amp;e&lt;f&gt;&#34;g h\u202e",
		"a/b+c=d&amp;e&lt;f&gt;&quot;g h\u202e", safeText(secret)} {
		if got := m.mask("<" + form + ">"); got != "<***>" {
			t.Errorf("mask(%q) = %q, want <***>", form, got)
		}
	}
	if got := m.mask("ab abc"); got != "ab abc" {
		t.Errorf("a two-character value is hidden: %q", got)
	}
}
