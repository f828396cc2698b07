package sources

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator"
)

// sessionPortal is a fake web site that needs its session page first:
// GET /consulta starts a session (cookie sid, a form with a token); a
// lookup without a live session gets the session page again (200), with
// a wrong token 403.
type sessionPortal struct {
	issued, pages, apiCalls atomic.Int64
	refuse                  int  // when not 0, a stale session is answered this instead of the page
	keepNone                bool // no session ever stays live

	mu   sync.Mutex
	live map[string]string // sid → token
}

func (p *sessionPortal) expire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.live)
}

func (p *sessionPortal) page(w http.ResponseWriter) {
	n := p.issued.Add(1)
	sid, tok := fmt.Sprintf("sid-%d", n), fmt.Sprintf("tok-%d", n)
	p.mu.Lock()
	if !p.keepNone {
		p.live[sid] = tok
	}
	p.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: "SessionId", Value: sid, Path: "/", HttpOnly: true})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	fmt.Fprintf(w, `<html><body><form id="consulta" method="post"><input name="__RequestVerificationToken" type="hidden" value="%s"></form></body></html>`, tok)
}

func (p *sessionPortal) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet && r.URL.Path == "/consulta" {
		p.pages.Add(1)
		p.page(w)
		return
	}
	p.apiCalls.Add(1)
	c, err := r.Cookie("SessionId")
	p.mu.Lock()
	tok, ok := "", false
	if err == nil {
		tok, ok = p.live[c.Value]
	}
	p.mu.Unlock()
	switch {
	case !ok && p.refuse != 0:
		w.WriteHeader(p.refuse)
	case !ok:
		p.page(w)
	case r.FormValue("__RequestVerificationToken") != tok:
		w.WriteHeader(http.StatusForbidden)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, oneItem)
	}
}

// sessionSource starts p and a source behind it whose clock is *clock.
func sessionSource(t *testing.T, p *sessionPortal, clock *atomic.Int64) (*Source, string) {
	t.Helper()
	p.live = map[string]string{}
	srv := portal(t, p.serve)
	spec := testSpec(srv.URL)
	spec.Operations[aggregator.ByDomain] = OperationSpec{Method: "POST", Path: "/consulta?dominio={domain}",
		Body: Body{Form: map[string]string{"__RequestVerificationToken": "{session.token}"}}}
	spec.Auth.Session = &Session{Method: "GET", Path: "/consulta", TTL: 10 * time.Minute, Format: "html",
		Extract: map[string]string{"token": "input[name=__RequestVerificationToken]@value"}}
	base := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	s, err := New(spec, srv.Client(), func() time.Time { return base.Add(time.Duration(clock.Load())) })
	if err != nil {
		t.Fatal(err)
	}
	return s, srv.URL
}

// TestSessionKeptForTTL: many lookups, concurrent at first, share one
// visit of the session page until its ttl ends.
func TestSessionKeptForTTL(t *testing.T) {
	t.Parallel()
	p := &sessionPortal{}
	var clock atomic.Int64
	s, _ := sessionSource(t, p, &clock)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if a, err := s.Lookup(t.Context(), domainQuery); err != nil || len(a.Infractions) != 1 {
				t.Errorf("Lookup: %v (%d items)", err, len(a.Infractions))
			}
		}()
	}
	wg.Wait()
	if got := p.pages.Load(); got != 1 {
		t.Errorf("session page visited %d times, want 1", got)
	}
	clock.Store(int64(9 * time.Minute))
	if _, err := s.Lookup(t.Context(), domainQuery); err != nil {
		t.Fatal(err)
	}
	if got := p.pages.Load(); got != 1 {
		t.Errorf("session page visited %d times within the ttl, want 1", got)
	}
	clock.Store(int64(11 * time.Minute))
	if _, err := s.Lookup(t.Context(), domainQuery); err != nil {
		t.Fatal(err)
	}
	if got := p.pages.Load(); got != 2 {
		t.Errorf("session page visited %d times after the ttl, want 2", got)
	}
}

// TestSessionRenewedOnce: a session the portal ended is renewed once,
// whether the portal answers the session page again, 401 or 403; a portal
// that refuses the new one too is asked no more.
func TestSessionRenewedOnce(t *testing.T) {
	t.Parallel()
	for _, refuse := range []int{0, http.StatusUnauthorized, http.StatusForbidden} {
		t.Run(fmt.Sprint(refuse), func(t *testing.T) {
			t.Parallel()
			p := &sessionPortal{refuse: refuse}
			var clock atomic.Int64
			s, _ := sessionSource(t, p, &clock)
			if _, err := s.Lookup(t.Context(), domainQuery); err != nil {
				t.Fatal(err)
			}
			p.expire()
			calls := p.apiCalls.Load()
			a, err := s.Lookup(t.Context(), domainQuery)
			if err != nil || len(a.Infractions) != 1 {
				t.Fatalf("after expiry: %v (%d items)", err, len(a.Infractions))
			}
			if got := p.pages.Load(); got != 2 {
				t.Errorf("session page visited %d times, want 2", got)
			}
			if got := p.apiCalls.Load() - calls; got != 2 {
				t.Errorf("API calls for the lookup: %d, want 2", got)
			}
		})
	}
	t.Run("refused again", func(t *testing.T) {
		t.Parallel()
		p := &sessionPortal{refuse: http.StatusForbidden, keepNone: true}
		var clock atomic.Int64
		s, _ := sessionSource(t, p, &clock)
		_, err := s.Lookup(t.Context(), domainQuery)
		var e *Error
		if !errors.As(err, &e) || e.Outcome != aggregator.Rejected || e.Status != http.StatusForbidden {
			t.Fatalf("got %v, want source-rejected 403", err)
		}
		if got := p.apiCalls.Load(); got != 2 {
			t.Errorf("API calls: %d, want 2", got)
		}
	})
}

// TestSessionCookiesStayOnOrigin: the session's cookies go to the source's
// origin only, not to another port of the same host, whose requests a
// plain cookie jar would give them.
func TestSessionCookiesStayOnOrigin(t *testing.T) {
	t.Parallel()
	p := &sessionPortal{}
	var clock atomic.Int64
	s, base := sessionSource(t, p, &clock)
	if _, err := s.Lookup(t.Context(), domainQuery); err != nil {
		t.Fatal(err)
	}
	own, _ := url.Parse(base + "/consulta")
	if got := s.client.Jar.Cookies(own); len(got) != 1 {
		t.Fatalf("cookies for the source's origin: %v, want the session's", got)
	}
	var seen atomic.Value
	other := portal(t, func(w http.ResponseWriter, r *http.Request) { seen.Store(r.Header.Get("Cookie")) })
	u, _ := url.Parse(other.URL + "/consulta")
	if got := s.client.Jar.Cookies(u); len(got) != 0 {
		t.Errorf("cookies for another origin: %v, want none", got)
	}
	// Through the client itself, as a followed link would go.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, u.String(), nil)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if c, _ := seen.Load().(string); strings.Contains(c, "sid-") {
		t.Errorf("the other origin got cookie %q", c)
	}
}
