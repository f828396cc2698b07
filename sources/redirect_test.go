package sources

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/multas/aggregator"
)

func TestSameOrigin(t *testing.T) {
	t.Parallel()
	tests := []struct {
		base, u string
		want    bool
	}{
		{"http://127.0.0.1:9101", "http://127.0.0.1:9101/x?y=1", true},
		{"http://127.0.0.1:9101/api/", "/relative", false}, // resolved by net/http before the check; unresolved is no origin
		{"http://127.0.0.1:9101", "http://127.0.0.1:9102/x", false},
		{"http://127.0.0.1:9101", "http://localhost:9101/x", false},
		{"http://localhost:9101", "http://127.0.0.1:9101/x", false},
		{"http://127.0.0.1:9101", "https://127.0.0.1:9101/x", false},
		{"https://portal.example", "http://portal.example/x", false},
		{"https://portal.example", "https://portal.example:443/x", true},
		{"https://portal.example:443", "https://portal.example/x", true},
		{"http://portal.example", "http://portal.example:80/x", true},
		{"http://portal.example:80", "http://portal.example/x", true},
		{"http://portal.example:080", "http://portal.example/x", true},
		{"https://portal.example", "https://portal.example:80/x", false},
		{"http://portal.example", "http://portal.example:443/x", false},
		{"https://Portal.Example", "HTTPS://portal.example/x", true},
		{"https://portal.example", "https://portal.example./x", false},
		{"https://portal.example", "https://evil.portal.example/x", false},
		{"https://portal.example", "https://portal.example.evil/x", false},
		{"https://portal.example", "https://user:pw@portal.example/x", true},
		{"http://[::1]:9101", "http://[::1]:9101/x", true},
		{"http://[::1]:9101", "http://[::1]:9102/x", false},
		{"http://[::1]:9101", "http://127.0.0.1:9101/x", false},
		{"https://portal.example", "ftp://portal.example/x", false},
		{"https://portal.example", "mailto:someone@portal.example", false},
		{"ftp://portal.example", "ftp://portal.example/x", false},
	}
	for _, tt := range tests {
		base, err := url.Parse(tt.base)
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(tt.u)
		if err != nil {
			t.Fatal(err)
		}
		if got := sameOrigin(base, u); got != tt.want {
			t.Errorf("sameOrigin(%s, %s) = %v, want %v", tt.base, tt.u, got, tt.want)
		}
	}
	if sameOrigin(nil, &url.URL{}) || sameOrigin(&url.URL{}, nil) {
		t.Errorf("sameOrigin with nil is true")
	}
}

// counter is a real HTTP server that counts, and remembers, every request
// it receives: the second origin of the redirect tests, which must
// receive nothing.
type counter struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []*http.Request
}

func newCounter(t *testing.T, h http.HandlerFunc) *counter {
	t.Helper()
	c := &counter{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		c.reqs = append(c.reqs, r)
		c.mu.Unlock()
		if h != nil {
			h(w, r)
		}
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *counter) received() []*http.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*http.Request(nil), c.reqs...)
}

// A portal's redirects are followed within its own origin, at most 3;
// any other redirect fails the call as Unreadable (source-error) before a
// single request leaves for the other origin, lookups and vouchers alike,
// and the configured headers go along on the same origin only.
func TestRedirects(t *testing.T) {
	t.Parallel()
	other := newCounter(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		io.WriteString(w, `{"resultado": {"actas": []}}`)
	})
	_, otherPort, _ := strings.Cut(other.Listener.Addr().String(), ":")

	// The portal: /hop/N redirects N more times on its own origin, then
	// answers; /to?u=URL redirects to URL.
	var portalURL string
	p := newCounter(t, func(w http.ResponseWriter, r *http.Request) {
		path := r.URL.Path
		switch {
		case strings.HasPrefix(path, "/hop/"):
			parts := strings.SplitN(path, "/", 4) // "", "hop", N, "actas" or "boleta"
			n, _ := strconv.Atoi(parts[2])
			rest := parts[3]
			if n > 0 {
				http.Redirect(w, r, "/hop/"+strconv.Itoa(n-1)+"/"+rest+"?"+r.URL.RawQuery, http.StatusFound)
				return
			}
			if rest == "boleta" {
				w.Header().Set("Content-Type", "application/pdf")
				io.WriteString(w, "%PDF-1.4")
				return
			}
			io.WriteString(w, oneItem)
		case strings.HasPrefix(path, "/to/"):
			target := strings.Replace(r.URL.Query().Get("u"), "PORTAL", strings.TrimPrefix(portalURL, "http://"), 1)
			target = strings.Replace(target, "OTHER", otherPort, 1)
			http.Redirect(w, r, target, http.StatusMovedPermanently)
		default:
			http.NotFound(w, r)
		}
	})
	portalURL = p.URL
	_, portalPort, _ := strings.Cut(strings.TrimPrefix(p.URL, "http://"), ":")

	spec := func(lookup, voucher string) Spec {
		s := testSpec(p.URL)
		s.Headers = map[string]string{"Authorization": "Bearer portal-secret", "X-Api-Key": "k-secret"}
		s.Operations = map[aggregator.Operation]OperationSpec{
			aggregator.ByDomain: {Path: lookup},
			aggregator.Voucher:  {Path: voucher},
		}
		return s
	}

	t.Run("same origin, 3 hops", func(t *testing.T) {
		t.Parallel()
		s := newSource(t, spec("/hop/3/actas?d={domain}", "/hop/3/boleta?i={infraction_id}"), p.Client())
		a, err := s.Lookup(context.Background(), domainQuery)
		if err != nil || len(a.Infractions) != 1 {
			t.Errorf("lookup through 3 redirects: %v, %d infractions; want 1", err, len(a.Infractions))
		}
		v, err := s.Voucher(context.Background(), "Q-1")
		if err != nil {
			t.Fatalf("voucher through 3 redirects: %v", err)
		}
		b, _ := io.ReadAll(v.Body)
		v.Body.Close()
		if string(b) != "%PDF-1.4" {
			t.Errorf("voucher through 3 redirects: %q", b)
		}
	})
	t.Run("same origin, 4 hops", func(t *testing.T) {
		t.Parallel()
		s := newSource(t, spec("/hop/4/actas?d={domain}", "/hop/4/boleta?i={infraction_id}"), p.Client())
		_, err := s.Lookup(context.Background(), domainQuery)
		checkRedirectError(t, err, http.StatusFound)
		_, err = s.Voucher(context.Background(), "Q-1")
		checkRedirectError(t, err, http.StatusFound)
	})

	foreign := []struct{ name, target string }{
		{"another port", "http://127.0.0.1:OTHER/x?d=" + plate},
		{"localhost, another port", "http://localhost:OTHER/x"},
		{"localhost, same port", "http://localhost:" + portalPort + "/hop/0/actas"},
		{"https, same host and port", "https://PORTAL/hop/0/actas"},
		{"protocol-relative", "//localhost:OTHER/x"},
	}
	for _, f := range foreign {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			to := "/to/x?u=" + url.QueryEscape(f.target) + "&d={domain}"
			s := newSource(t, spec(to, strings.Replace(to, "{domain}", "{infraction_id}", 1)), p.Client())
			_, err := s.Lookup(context.Background(), domainQuery)
			checkRedirectError(t, err, http.StatusMovedPermanently)
			_, err = s.Voucher(context.Background(), "Q-1")
			checkRedirectError(t, err, http.StatusMovedPermanently)
		})
	}

	// A sequential check once the parallel subtests are done.
	t.Cleanup(func() {
		if n := len(other.received()); n != 0 {
			t.Errorf("the other origin received %d requests, want none", n)
		}
		for _, r := range p.received() {
			if r.Host != strings.TrimPrefix(p.URL, "http://") {
				t.Errorf("the portal received a request for host %q", r.Host)
			}
			// Every request it did receive was on its own origin, and
			// carried the configured headers.
			if r.Header.Get("Authorization") != "Bearer portal-secret" || r.Header.Get("X-Api-Key") != "k-secret" {
				t.Errorf("a same-origin request to %s lacked the configured headers", r.URL.Path)
			}
		}
	})
}

func checkRedirectError(t *testing.T, err error, status int) {
	t.Helper()
	e := checkError(t, err, aggregator.Unreadable, status, 0)
	if !errors.Is(err, ErrRedirect) {
		t.Errorf("errors.Is(%v, ErrRedirect) is false", err)
	}
	for _, leak := range []string{"http", "127.0.0.1", "localhost", "secret"} {
		if strings.Contains(e.Error(), leak) {
			t.Errorf("error text %q holds %q", e, leak)
		}
	}
}

// The Source keeps its own copy of the client it is given: the caller's
// CheckRedirect is neither used nor changed, its Transport is shared.
func TestClientCopied(t *testing.T) {
	t.Parallel()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	shared := &http.Client{Transport: tr}
	s := newSource(t, testSpec("http://127.0.0.1:9"), shared)
	if shared.CheckRedirect != nil {
		t.Errorf("New changed the shared client's CheckRedirect")
	}
	if s.client == shared || s.client.Transport != tr || s.client.CheckRedirect == nil {
		t.Errorf("the source's client is not a copy of the shared one, same Transport, with its own CheckRedirect")
	}
}
