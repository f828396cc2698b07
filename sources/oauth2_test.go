package sources

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator"
)

const (
	testClientID     = "cliente-caba"
	testClientSecret = "s3creto-que-no-se-ve"
)

// oauthPortal is a fake portal behind the client-credentials grant: its
// token endpoint issues tokens (Basic client authentication) that expire
// in expiresIn seconds, and its API answers 401 without a live token.
type oauthPortal struct {
	issued, apiCalls atomic.Int64
	expiresIn        int
	tokenStatus      int // when not 0, what the token endpoint answers instead
	tokenDelay       time.Duration
	keepNone         bool // issued tokens are never valid

	mu    sync.Mutex
	valid map[string]bool
}

func (p *oauthPortal) revoke() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.valid)
}

func (p *oauthPortal) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/oauth/token" {
		time.Sleep(p.tokenDelay)
		id, secret, ok := r.BasicAuth()
		if p.tokenStatus != 0 || !ok || id != testClientID || secret != testClientSecret ||
			r.FormValue("grant_type") != "client_credentials" {
			code := p.tokenStatus
			if code == 0 {
				code = http.StatusUnauthorized
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			fmt.Fprintf(w, `{"error": "invalid_client", "error_description": "client %s secret %s"}`, id, secret)
			return
		}
		tok := fmt.Sprintf("tok-%d", p.issued.Add(1))
		p.mu.Lock()
		p.valid[tok] = !p.keepNone
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": p.expiresIn})
		return
	}
	p.apiCalls.Add(1)
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	ok = ok && p.valid[tok]
	p.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, oneItem)
}

// oauthSource starts p and a source behind it whose clock is *clock.
func oauthSource(t *testing.T, p *oauthPortal, clock *atomic.Int64) *Source {
	t.Helper()
	p.valid = map[string]bool{}
	srv := portal(t, p.serve)
	spec := testSpec(srv.URL)
	spec.Auth.OAuth2 = &OAuth2{TokenURL: srv.URL + "/oauth/token", ClientID: testClientID, ClientSecret: testClientSecret, Scopes: []string{"actas.read"}}
	base := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	s, err := New(spec, srv.Client(), func() time.Time { return base.Add(time.Duration(clock.Load())) })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestOAuth2OneTokenShared: 20 concurrent lookups, while the token is
// slow to come, share one token: the token endpoint is asked once.
func TestOAuth2OneTokenShared(t *testing.T) {
	t.Parallel()
	p := &oauthPortal{expiresIn: 3600, tokenDelay: 50 * time.Millisecond}
	var clock atomic.Int64
	s := oauthSource(t, p, &clock)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Lookup(t.Context(), domainQuery); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("Lookup: %v", err)
	}
	if got := p.issued.Load(); got != 1 {
		t.Errorf("tokens issued: %d, want 1", got)
	}
	if got := p.apiCalls.Load(); got != 20 {
		t.Errorf("API calls: %d, want 20", got)
	}
}

// TestOAuth2Renewal: a token is renewed shortly before it expires, and
// after the portal refuses it (401), the call being repeated once.
func TestOAuth2Renewal(t *testing.T) {
	t.Parallel()
	p := &oauthPortal{expiresIn: 60}
	var clock atomic.Int64
	s := oauthSource(t, p, &clock)
	lookup := func() {
		t.Helper()
		if _, err := s.Lookup(t.Context(), domainQuery); err != nil {
			t.Fatalf("Lookup: %v", err)
		}
	}
	lookup()
	clock.Store(int64(45 * time.Second)) // before expiry - 6s
	lookup()
	if got := p.issued.Load(); got != 1 {
		t.Errorf("tokens issued before expiry: %d, want 1", got)
	}
	clock.Store(int64(55 * time.Second)) // within the margin
	lookup()
	if got := p.issued.Load(); got != 2 {
		t.Errorf("tokens issued after the renewal time: %d, want 2", got)
	}

	p.revoke()
	calls := p.apiCalls.Load()
	lookup()
	if got := p.issued.Load(); got != 3 {
		t.Errorf("tokens issued after a 401: %d, want 3", got)
	}
	if got := p.apiCalls.Load() - calls; got != 2 {
		t.Errorf("API calls for the refused lookup: %d, want 2 (refused, repeated)", got)
	}
}

// TestOAuth2PortalRefusesTwice: a portal that refuses a fresh token too is
// asked twice, no more, and the lookup is source-rejected.
func TestOAuth2PortalRefusesTwice(t *testing.T) {
	t.Parallel()
	p := &oauthPortal{expiresIn: 3600, keepNone: true}
	var clock atomic.Int64
	s := oauthSource(t, p, &clock)
	_, err := s.Lookup(t.Context(), domainQuery)
	var e *Error
	if !errors.As(err, &e) || e.Outcome != aggregator.Rejected || e.Status != http.StatusUnauthorized {
		t.Fatalf("got %v, want source-rejected 401", err)
	}
	if got := p.apiCalls.Load(); got != 2 {
		t.Errorf("API calls: %d, want 2", got)
	}
}

// TestOAuth2TokenEndpointFailures: a refusal is Rejected, a failure is
// Unavailable; no error text carries the secret or a token.
func TestOAuth2TokenEndpointFailures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		status  int
		outcome aggregator.Outcome
	}{
		{http.StatusUnauthorized, aggregator.Rejected},
		{http.StatusBadRequest, aggregator.Rejected},
		{http.StatusServiceUnavailable, aggregator.Unavailable},
	} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			t.Parallel()
			p := &oauthPortal{expiresIn: 3600, tokenStatus: tc.status}
			var clock atomic.Int64
			s := oauthSource(t, p, &clock)
			_, err := s.Lookup(t.Context(), domainQuery)
			var e *Error
			if !errors.As(err, &e) || e.Outcome != tc.outcome || e.Status != tc.status {
				t.Fatalf("got %v, want %s with status %d", err, tc.outcome, tc.status)
			}
			if tc.outcome == aggregator.Rejected && !errors.Is(err, ErrTokenRefused) {
				t.Errorf("got %v, want ErrTokenRefused", err)
			}
			for _, secret := range []string{testClientSecret, testClientID, plate} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error %q carries %q", err, secret)
				}
			}
			if got := p.apiCalls.Load(); got != 0 {
				t.Errorf("API calls: %d, want 0", got)
			}
		})
	}
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		p := &oauthPortal{expiresIn: 3600}
		p.valid = map[string]bool{}
		srv := portal(t, p.serve)
		dead := portal(t, p.serve)
		dead.Close()
		spec := testSpec(srv.URL)
		spec.Auth.OAuth2 = &OAuth2{TokenURL: dead.URL + "/oauth/token", ClientID: testClientID, ClientSecret: testClientSecret}
		s := newSource(t, spec, srv.Client())
		_, err := s.Lookup(t.Context(), domainQuery)
		var e *Error
		if !errors.As(err, &e) || e.Outcome != aggregator.Unavailable || e.Status != 0 {
			t.Fatalf("got %v, want source-unavailable without status", err)
		}
		if strings.Contains(err.Error(), testClientSecret) {
			t.Errorf("error %q carries the secret", err)
		}
	})
}

// TestOAuth2ClientAuth: client_auth says where the credentials go (RFC
// 6749 section 2.3.1), and a token endpoint that takes them only one way
// refuses the other.
func TestOAuth2ClientAuth(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		clientAuth, endpoint string // endpoint: how the token endpoint takes credentials
		ok                   bool
	}{
		{"", "basic", true}, {"basic", "basic", true}, {"body", "body", true},
		{"basic", "body", false}, {"body", "basic", false},
	} {
		t.Run(tt.clientAuth+" to "+tt.endpoint, func(t *testing.T) {
			t.Parallel()
			srv := portal(t, func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/oauth/token" {
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprint(w, oneItem)
					return
				}
				id, secret, basic := r.BasicAuth()
				if tt.endpoint == "body" {
					id, secret = r.PostFormValue("client_id"), r.PostFormValue("client_secret")
					basic = false
				} else if r.PostFormValue("client_secret") != "" {
					id = "" // a secret in the form where Basic is expected
				}
				if id != testClientID || secret != testClientSecret || (tt.endpoint == "basic") != basic {
					w.WriteHeader(http.StatusUnauthorized)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"access_token": "t", "token_type": "Bearer", "expires_in": 60}`)
			})
			spec := testSpec(srv.URL)
			spec.Auth.OAuth2 = &OAuth2{TokenURL: srv.URL + "/oauth/token", ClientID: testClientID, ClientSecret: testClientSecret, ClientAuth: tt.clientAuth}
			s := newSource(t, spec, srv.Client())
			_, err := s.Lookup(t.Context(), domainQuery)
			if tt.ok {
				if err != nil {
					t.Fatalf("Lookup: %v", err)
				}
				return
			}
			checkError(t, err, aggregator.Rejected, http.StatusUnauthorized, 0)
		})
	}
}
