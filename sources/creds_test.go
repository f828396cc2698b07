package sources

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator"
)

// credsToken is what tokenServer's endpoint issues.
const credsToken = "tok-final-Zq8vT2"

// tokenServer is a token endpoint that redirects: /hop/N?code=C answers C
// to /hop/N-1 on its own origin, /hop/0 issues credsToken to the right
// client credentials (Basic) with the grant in the body, and
// /to?code=C&u=URL answers C to URL.
func tokenServer(t *testing.T) *counter {
	t.Helper()
	return newCounter(t, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		code, _ := strconv.Atoi(q.Get("code"))
		switch {
		case r.URL.Path == "/to":
			http.Redirect(w, r, q.Get("u"), code)
		case strings.HasPrefix(r.URL.Path, "/hop/"):
			n, _ := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/hop/"))
			if n > 0 {
				http.Redirect(w, r, "/hop/"+strconv.Itoa(n-1)+"?"+r.URL.RawQuery, code)
				return
			}
			id, secret, ok := r.BasicAuth()
			if !ok || id != testClientID || secret != testClientSecret || r.FormValue("grant_type") != "client_credentials" {
				http.Error(w, `{"error": "invalid_client"}`, http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(map[string]any{"access_token": credsToken, "token_type": "Bearer", "expires_in": 3600})
		default:
			http.NotFound(w, r)
		}
	})
}

// bearerPortal is a portal that answers oneItem to Bearer credsToken, and
// 401 to anything else.
func bearerPortal(t *testing.T) *counter {
	t.Helper()
	return newCounter(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+credsToken {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, oneItem)
	})
}

// oauthSpec is a source of the portal at base whose token_url is tokenURL.
func oauthSpec(base, tokenURL string) Spec {
	spec := testSpec(base)
	spec.Auth.OAuth2 = &OAuth2{TokenURL: tokenURL, ClientID: testClientID, ClientSecret: testClientSecret, Scopes: []string{"actas.read"}}
	return spec
}

// A token endpoint's redirects are followed within its own origin, at
// most 3, the credentials and the body sent again there; a redirect to
// any other origin (the portal's among them) fails the call as
// source-error before a request leaves for it, so no other server ever
// receives the client credentials (SPEC 9).
func TestOAuth2TokenRedirects(t *testing.T) {
	t.Parallel()
	tok := tokenServer(t)
	api := bearerPortal(t)
	other := newCounter(t, nil)
	tokenHost := strings.TrimPrefix(tok.URL, "http://")
	_, tokenPort, _ := strings.Cut(tokenHost, ":")

	tests := []struct {
		name string
		path string // on the token endpoint
		ok   bool
	}{
		{"307 within its origin", "/hop/1?code=307", true},
		{"308 within its origin, 3 hops", "/hop/3?code=308", true},
		{"302 within its origin", "/hop/1?code=302", false}, // POST becomes a GET without the grant: refused by the endpoint
		{"4 hops", "/hop/4?code=307", false},
		{"307 to the portal", "/to?code=307&u=" + url.QueryEscape(api.URL+"/hop/0"), false},
		{"302 to the portal", "/to?code=302&u=" + url.QueryEscape(api.URL+"/hop/0"), false},
		{"308 to another server", "/to?code=308&u=" + url.QueryEscape(other.URL+"/hop/0"), false},
		{"307 to localhost, same port", "/to?code=307&u=" + url.QueryEscape("http://localhost:"+tokenPort+"/hop/0"), false},
		{"307 to https, same host and port", "/to?code=307&u=" + url.QueryEscape("https://"+tokenHost+"/hop/0"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newSource(t, oauthSpec(api.URL, tok.URL+tt.path), api.Client())
			a, err := s.Lookup(t.Context(), domainQuery)
			switch {
			case tt.ok && (err != nil || len(a.Infractions) != 1):
				t.Fatalf("lookup: %v, %d infractions; want 1", err, len(a.Infractions))
			case tt.ok:
				return
			case err == nil:
				t.Fatalf("lookup succeeded, want a failure")
			}
			var e *Error
			if !errors.As(err, &e) || (e.Outcome != aggregator.Unreadable && e.Outcome != aggregator.Rejected) {
				t.Errorf("got %v, want source-error (a redirect not followed) or source-rejected (refused by the endpoint)", err)
			}
			for _, leak := range []string{testClientSecret, testClientID, "127.0.0.1", "localhost"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error text %q holds %q", err, leak)
				}
			}
		})
	}
	t.Run("redirect to another origin is ErrRedirect", func(t *testing.T) {
		t.Parallel()
		s := newSource(t, oauthSpec(api.URL, tok.URL+"/to?code=307&u="+url.QueryEscape(api.URL+"/x")), api.Client())
		_, err := s.Lookup(t.Context(), domainQuery)
		checkRedirectError(t, err, 0)
	})

	t.Cleanup(func() {
		if n := len(other.received()); n != 0 {
			t.Errorf("the other server received %d requests, want none", n)
		}
		for _, r := range api.received() {
			if r.Header.Get("Authorization") != "Bearer "+credsToken || r.URL.Path == "/hop/0" || r.Method != http.MethodGet {
				t.Errorf("the portal received %s %s with Authorization %q: only lookups with the token belong there",
					r.Method, r.URL.Path, r.Header.Get("Authorization"))
			}
		}
		for _, r := range tok.received() {
			if r.Host != tokenHost {
				t.Errorf("the token endpoint received a request for host %q", r.Host)
			}
		}
	})
}

// The token endpoint's client refuses, unsent, a request to any other
// origin: the second lock behind its CheckRedirect.
func TestTokenClientOtherOrigin(t *testing.T) {
	t.Parallel()
	tok := tokenServer(t)
	other := newCounter(t, nil)
	endpoint, _ := url.Parse(tok.URL + "/hop/0")
	c := tokenClient(endpoint, tok.Client())
	for _, u := range []string{other.URL + "/hop/0", strings.Replace(tok.URL, "127.0.0.1", "localhost", 1) + "/hop/0"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, u, strings.NewReader("grant_type=client_credentials"))
		req.SetBasicAuth(testClientID, testClientSecret)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Errorf("POST %s went through the token client", u)
		} else if !errors.Is(err, ErrRedirect) {
			t.Errorf("POST %s: %v, want ErrRedirect", u, err)
		}
	}
	if n := len(other.received()) + len(tok.received()); n != 0 {
		t.Errorf("%d requests received, want none", n)
	}
	resp, err := c.Get(tok.URL + "/hop/0")
	if err != nil {
		t.Fatalf("GET on the endpoint's own origin: %v", err)
	}
	resp.Body.Close()
}

// token_url is checked as base_url is, its scheme in any case: HTTP://
// works like http://.
func TestTokenURL(t *testing.T) {
	t.Parallel()
	tok := tokenServer(t)
	api := bearerPortal(t)
	for _, tt := range []struct {
		tokenURL string
		ok       bool
	}{
		{"HTTP://" + strings.TrimPrefix(tok.URL, "http://") + "/hop/1?code=307", true},
		{"Http://" + strings.TrimPrefix(tok.URL, "http://") + "/hop/0", true},
		{"/oauth/token", false},
		{"ftp://127.0.0.1/token", false},
		{"http:///token", false},
		{"http:token", false},
		{tok.URL + "/hop/0#frag", false},
	} {
		s, err := New(oauthSpec(api.URL, tt.tokenURL), api.Client(), nil)
		if !tt.ok {
			if err == nil || !strings.Contains(err.Error(), "auth.oauth2.token_url") {
				t.Errorf("token_url %q: %v, want an error naming auth.oauth2.token_url", tt.tokenURL, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("token_url %q: %v", tt.tokenURL, err)
			continue
		}
		if a, err := s.Lookup(t.Context(), domainQuery); err != nil || len(a.Infractions) != 1 {
			t.Errorf("token_url %q: lookup %v, %d infractions; want 1", tt.tokenURL, err, len(a.Infractions))
		}
	}
}

// A token or a session value that cannot go in a header makes the call a
// source-error (ErrUnbuildable) before anything is sent to the portal: no
// portal failure, so the breaker never counts it (SPEC 9). The bad token
// is never kept; the value never appears in the error.
func TestUnsendableValues(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"tok\r\nX-Evil: 1", "tok\nline", "tok\rline", "tok\x00nul", "tok\x7fdel", "tok\x1besc"} {
		t.Run("token "+strconv.Quote(bad), func(t *testing.T) {
			t.Parallel()
			tok := newCounter(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				json.NewEncoder(w).Encode(map[string]any{"access_token": bad, "token_type": "Bearer", "expires_in": 3600})
			})
			api := bearerPortal(t)
			s := newSource(t, oauthSpec(api.URL, tok.URL+"/oauth/token"), api.Client())
			for range 2 {
				_, err := s.Lookup(t.Context(), domainQuery)
				checkUnbuildable(t, err, bad)
			}
			if n := len(tok.received()); n != 2 {
				t.Errorf("tokens asked for: %d, want 2 (an unusable token is not kept)", n)
			}
			if n := len(api.received()); n != 0 {
				t.Errorf("the portal received %d requests, want none", n)
			}
		})
	}
	for _, tt := range []struct {
		name, value string
		op          OperationSpec
		ok          bool
	}{
		{"CR LF in a header", "v\r\nX-Evil: 1", OperationSpec{Path: "/actas?d={domain}", Headers: map[string]string{"X-Token": "{session.token}"}}, false},
		{"NUL in a header", "v\x00w", OperationSpec{Path: "/actas?d={domain}", Headers: map[string]string{"X-Token": "t={session.token}"}}, false},
		{"CR LF in the path, escaped", "v\r\nw", OperationSpec{Path: "/actas/{session.token}?d={domain}"}, true},
		{"CR LF in the query, escaped", "v\r\nw", OperationSpec{Path: "/actas?t={session.token}&d={domain}"}, true},
		{"dot segment in the path", "..", OperationSpec{Path: "/actas/{session.token}?d={domain}"}, false},
	} {
		t.Run("session value, "+tt.name, func(t *testing.T) {
			t.Parallel()
			api := newCounter(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/sesion" {
					w.Header().Set("Content-Type", "application/json")
					json.NewEncoder(w).Encode(map[string]string{"token": tt.value})
					return
				}
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, oneItem)
			})
			spec := testSpec(api.URL)
			spec.Operations = map[aggregator.Operation]OperationSpec{aggregator.ByDomain: tt.op}
			spec.Auth.Session = &Session{Path: "/sesion", TTL: time.Minute, Format: "json", Extract: map[string]string{"token": "/token"}}
			s := newSource(t, spec, api.Client())
			_, err := s.Lookup(t.Context(), domainQuery)
			if tt.ok {
				if err != nil {
					t.Fatalf("lookup: %v", err)
				}
				return
			}
			checkUnbuildable(t, err, tt.value)
			for _, r := range api.received() {
				if r.URL.Path != "/sesion" {
					t.Errorf("the portal received %s, want only the session page", r.URL.Path)
				}
			}
		})
	}
}

func checkUnbuildable(t *testing.T, err error, value string) {
	t.Helper()
	e := checkError(t, err, aggregator.Unreadable, 0, 0)
	if !errors.Is(err, ErrUnbuildable) {
		t.Errorf("errors.Is(%v, ErrUnbuildable) is false", err)
	}
	if strings.Contains(e.Error(), value) {
		t.Errorf("error text %q holds the value", e)
	}
}

// authSeen is a RoundTripper (over the real one) that notes, by path,
// whether each request it carries is IsAuthRequest's.
type authSeen struct {
	next http.RoundTripper
	mu   sync.Mutex
	auth map[string]bool
}

func (a *authSeen) RoundTrip(req *http.Request) (*http.Response, error) {
	a.mu.Lock()
	a.auth[req.URL.Path] = IsAuthRequest(req.Context())
	a.mu.Unlock()
	return a.next.RoundTrip(req)
}

// A call tells the learner of WithSecrets every secret value it sends
// (the client secret when it fetches a token, the token, the session's
// values), and marks its token requests and session pages, redirects
// included, as IsAuthRequest's, and nothing else.
func TestSecretsLearned(t *testing.T) {
	t.Parallel()
	tok := tokenServer(t)
	api := bearerPortal(t)
	sess := newCounter(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sesion" {
			http.SetCookie(w, &http.Cookie{Name: "sid", Value: "c00kie-Jk8Fd2"})
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"token": "s3ss10n-Lm3Np9", "other": "s3ss10n-Pq3Hs5"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, oneItem)
	})
	sessSpec := testSpec(sess.URL)
	sessSpec.Operations = map[aggregator.Operation]OperationSpec{aggregator.ByDomain: {Path: "/actas/{session.token}?d={domain}&o={session.other}"}}
	sessSpec.Auth.Session = &Session{Path: "/sesion", TTL: time.Minute, Format: "json", Extract: map[string]string{"token": "/token", "other": "/other"}}

	tests := []struct {
		name     string
		spec     Spec
		want     []string
		wantAuth map[string]bool
	}{
		{"oauth2", oauthSpec(api.URL, tok.URL+"/hop/1?code=307"), []string{credsToken, testClientSecret},
			map[string]bool{"/hop/1": true, "/hop/0": true, "/api/v2/actas": false}},
		{"session", sessSpec, []string{"s3ss10n-Lm3Np9", "s3ss10n-Pq3Hs5"},
			map[string]bool{"/sesion": true, "/actas/s3ss10n-Lm3Np9": false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			seen := &authSeen{next: api.Client().Transport, auth: map[string]bool{}}
			s := newSource(t, tt.spec, &http.Client{Transport: seen})
			var mu sync.Mutex
			var learned []string
			ctx := WithSecrets(t.Context(), func(v string) {
				mu.Lock()
				defer mu.Unlock()
				learned = append(learned, v)
			})
			for range 2 { // the second call learns the values it reuses
				learned = nil
				if _, err := s.Lookup(ctx, domainQuery); err != nil {
					t.Fatal(err)
				}
				for _, w := range tt.want[:1] {
					if !slices.Contains(learned, w) {
						t.Errorf("learned %q, want %q among them", learned, w)
					}
				}
			}
			if _, err := s.Lookup(context.Background(), domainQuery); err != nil {
				t.Fatalf("lookup without a learner: %v", err)
			}
			seen.mu.Lock()
			defer seen.mu.Unlock()
			for path, want := range tt.wantAuth {
				if got, ok := seen.auth[path]; !ok || got != want {
					t.Errorf("%s: IsAuthRequest %v (sent %v), want %v", path, got, ok, want)
				}
			}
		})
	}
	t.Run("first call learns every value", func(t *testing.T) {
		t.Parallel()
		for _, tt := range tests {
			s := newSource(t, tt.spec, api.Client())
			var learned []string
			if _, err := s.Lookup(WithSecrets(t.Context(), func(v string) { learned = append(learned, v) }), domainQuery); err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !slices.Contains(learned, w) {
					t.Errorf("%s: learned %q, want %q among them", tt.name, learned, w)
				}
			}
		}
	})
}
