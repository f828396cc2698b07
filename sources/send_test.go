package sources

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator"
)

// seen is what a portal received of one request.
type seen struct {
	Method, URI, Host, Body string
	Header                  http.Header
}

// recorder is a real portal that remembers every request. Its paths:
// /hop/CODE/N redirects with CODE, N times, to a relative Location (then
// answers 200 with the method and the body it received); /to?u=URL
// redirects to URL with 302 (or with C, given as c=C), "SELF" in URL
// being the portal's host and port; /code/CODE answers CODE without a Location.
type recorder struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newRecorder(t *testing.T) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewServer(http.HandlerFunc(rec.serve))
	t.Cleanup(rec.Close)
	return rec
}

func (rec *recorder) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h := r.Header.Clone()
	rec.mu.Lock()
	rec.reqs = append(rec.reqs, seen{Method: r.Method, URI: r.RequestURI, Host: r.Host, Body: string(body), Header: h})
	rec.mu.Unlock()
	parts := strings.Split(r.URL.Path, "/")
	switch {
	case len(parts) == 4 && parts[1] == "hop":
		code, _ := strconv.Atoi(parts[2])
		n, _ := strconv.Atoi(parts[3])
		if n > 0 {
			w.Header().Set("Location", strconv.Itoa(n-1)+"?"+r.URL.RawQuery)
			w.WriteHeader(code)
			io.WriteString(w, "moved")
			return
		}
		fmt.Fprintf(w, "%s %s", r.Method, body)
	case r.URL.Path == "/to":
		w.Header().Set("Location", strings.Replace(r.URL.Query().Get("u"), "SELF", r.Host, 1))
		code := http.StatusFound
		if c, err := strconv.Atoi(r.URL.Query().Get("c")); err == nil {
			code = c
		}
		w.WriteHeader(code)
	case len(parts) == 3 && parts[1] == "code":
		code, _ := strconv.Atoi(parts[2])
		w.WriteHeader(code)
		io.WriteString(w, "no location")
	default:
		http.NotFound(w, r)
	}
}

// take returns the requests received so far and forgets them.
func (rec *recorder) take() []seen {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	reqs := rec.reqs
	rec.reqs = nil
	return reqs
}

// outcome is what a caller sees of a request: the answer's status and
// body, or the error as the source reports it.
type outcome struct {
	Status int
	Body   string
	Err    string
}

func outcomeOf(ctx context.Context, resp *http.Response, err error) outcome {
	var o outcome
	if resp != nil {
		o.Status = resp.StatusCode
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		o.Body = string(b)
	}
	if err != nil {
		e := transportError(ctx, err)
		o.Err = string(e.Outcome) + ": " + e.Err.Error()
	}
	return o
}

// follow must do what http.Client.Do does for a client without jar or
// timeout: every case is sent both ways to a real portal, which must
// receive the same requests (methods, URIs, hosts, bodies, every header
// field), and the caller must see the same answer or error.
func TestFollowAsClientDo(t *testing.T) {
	t.Parallel()
	type request struct {
		method, path, body string
		noGetBody          bool   // a body that cannot be had again
		host               string // a configured Host
		header             map[string]string
		userinfo           string
		hostname           string // instead of 127.0.0.1 (in the request, not the base)
	}
	tests := []struct {
		name string
		req  request
		want outcome // of follow, which the client's must match
	}{
		{"GET 301", request{method: "GET", path: "/hop/301/1?d=" + plate}, outcome{Status: 200, Body: "GET "}},
		{"GET 302", request{method: "GET", path: "/hop/302/1"}, outcome{Status: 200, Body: "GET "}},
		{"GET 303", request{method: "GET", path: "/hop/303/1"}, outcome{Status: 200, Body: "GET "}},
		{"GET 307", request{method: "GET", path: "/hop/307/1"}, outcome{Status: 200, Body: "GET "}},
		{"GET 308", request{method: "GET", path: "/hop/308/1"}, outcome{Status: 200, Body: "GET "}},
		{"HEAD 302 stays HEAD", request{method: "HEAD", path: "/hop/302/1"}, outcome{Status: 200}},
		{"POST 301 becomes GET", request{method: "POST", path: "/hop/301/1", body: "d=1"}, outcome{Status: 200, Body: "GET "}},
		{"POST 302 becomes GET", request{method: "POST", path: "/hop/302/1", body: "d=1"}, outcome{Status: 200, Body: "GET "}},
		{"POST 303 becomes GET", request{method: "POST", path: "/hop/303/1", body: "d=1"}, outcome{Status: 200, Body: "GET "}},
		{"POST 307 resends", request{method: "POST", path: "/hop/307/2", body: "d=1"}, outcome{Status: 200, Body: "POST d=1"}},
		{"POST 308 resends", request{method: "POST", path: "/hop/308/2", body: "d=1"}, outcome{Status: 200, Body: "POST d=1"}},
		{"PUT 302 becomes GET", request{method: "PUT", path: "/hop/302/1", body: "d=1"}, outcome{Status: 200, Body: "GET "}},
		{"POST 307 then 302 drops the body", request{method: "POST", path: "/to?c=307&u=" + url.QueryEscape("/hop/302/1"), body: "d=1"},
			outcome{Status: 200, Body: "GET "}},
		{"POST 302 then 307 sends no body", request{method: "POST", path: "/to?c=302&u=" + url.QueryEscape("/hop/307/1"), body: "d=1"},
			outcome{Status: 200, Body: "GET "}},
		{"POST 307 without GetBody is the answer", request{method: "POST", path: "/hop/307/1", body: "d=1", noGetBody: true},
			outcome{Status: 307, Body: "moved"}},
		{"POST 302 without GetBody", request{method: "POST", path: "/hop/302/1", body: "d=1", noGetBody: true},
			outcome{Status: 200, Body: "GET "}},
		{"3 hops", request{method: "GET", path: "/hop/302/3?d=" + plate}, outcome{Status: 200, Body: "GET "}},
		{"4 hops refused", request{method: "GET", path: "/hop/302/4?d=" + plate},
			outcome{Status: 302, Body: "", Err: "error: more than 3 redirects"}},
		{"4 hops of 307 POST refused", request{method: "POST", path: "/hop/307/4", body: "d=1"},
			outcome{Status: 307, Body: "", Err: "error: more than 3 redirects"}},
		{"absolute, same origin", request{method: "GET", path: "/to?u=" + url.QueryEscape("http://SELF/hop/302/0")},
			outcome{Status: 200, Body: "GET "}},
		{"foreign origin refused", request{method: "GET", path: "/to?u=" + url.QueryEscape("http://localhost:1/x?d="+plate)},
			outcome{Status: 302, Err: "error: redirect to another origin not followed"}},
		{"relative with dot segments", request{method: "GET", path: "/to?u=" + url.QueryEscape("../hop/302/0")},
			outcome{Status: 200, Body: "GET "}},
		{"missing Location is the answer", request{method: "GET", path: "/code/302"}, outcome{Status: 302, Body: "no location"}},
		{"missing Location on 307", request{method: "POST", path: "/code/307", body: "x"}, outcome{Status: 307, Body: "no location"}},
		{"300 is no redirect", request{method: "GET", path: "/code/300"}, outcome{Status: 300, Body: "no location"}},
		{"headers copied, Content-Type dropped with the body", request{method: "POST", path: "/hop/302/2", body: "d=1",
			header: map[string]string{"Authorization": "Bearer s", "X-Api-Key": "k", "Content-Type": "application/x-www-form-urlencoded", "Content-Language": "es"}},
			outcome{Status: 200, Body: "GET "}},
		{"headers copied, Content-Type kept with the body", request{method: "POST", path: "/hop/307/2", body: "d=1",
			header: map[string]string{"Authorization": "Bearer s", "Content-Type": "application/x-www-form-urlencoded"}},
			outcome{Status: 200, Body: "POST d=1"}},
		{"GET's Content-Type dropped on 302", request{method: "GET", path: "/hop/302/1", header: map[string]string{"Content-Type": "text/plain"}},
			outcome{Status: 200, Body: "GET "}},
		{"configured Referer kept", request{method: "GET", path: "/hop/302/2", header: map[string]string{"Referer": "https://portal.example/"}},
			outcome{Status: 200, Body: "GET "}},
		{"configured Host kept on a relative Location", request{method: "GET", path: "/hop/302/2", host: "portal.example"},
			outcome{Status: 200, Body: "GET "}},
		{"configured Host dropped on an absolute one", request{method: "GET", path: "/to?u=" + url.QueryEscape("http://127.0.0.1:PORT/hop/302/1"), host: "portal.example"},
			outcome{Status: 200, Body: "GET "}},
		{"user info is Basic authentication, not in the Referer", request{method: "GET", path: "/hop/302/2", userinfo: "user:pw"},
			outcome{Status: 200, Body: "GET "}},
		{"user info under an Authorization", request{method: "GET", path: "/hop/302/1", userinfo: "user:pw", header: map[string]string{"Authorization": "Bearer s"}},
			outcome{Status: 200, Body: "GET "}},
		{"another case of the host name drops Authorization", request{method: "GET", hostname: "localhost",
			path:   "/to?u=" + url.QueryEscape("http://LOCALHOST:PORT/hop/302/1"),
			header: map[string]string{"Authorization": "Bearer s", "Cookie": "a=b", "X-Api-Key": "k"}},
			outcome{Status: 200, Body: "GET "}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t)
			_, port, _ := strings.Cut(strings.TrimPrefix(rec.URL, "http://"), ":")
			hostname := cmp.Or(tt.req.hostname, "127.0.0.1")
			base, _ := url.Parse("http://" + hostname + ":" + port)
			check := checkRedirect(base)
			newReq := func() *http.Request {
				t.Helper()
				u := "http://" + hostname + ":" + port + strings.Replace(tt.req.path, "PORT", port, 1)
				if tt.req.userinfo != "" {
					u = "http://" + tt.req.userinfo + "@" + hostname + ":" + port + tt.req.path
				}
				var body io.Reader
				if tt.req.body != "" {
					body = strings.NewReader(tt.req.body)
					if tt.req.noGetBody {
						body = io.NopCloser(body) // NewRequest knows no length, nor how to read it again
					}
				}
				req, err := http.NewRequestWithContext(context.Background(), tt.req.method, u, body)
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tt.req.header {
					req.Header.Set(k, v)
				}
				req.Host = tt.req.host
				return req
			}

			req := newReq()
			h := req.Header.Clone()
			resp, err := follow(rec.Client().Transport, check, req)
			got := outcomeOf(req.Context(), resp, err)
			gotReqs := rec.take()
			if !reflect.DeepEqual(req.Header, h) {
				t.Errorf("follow changed the request's header: %v, was %v", req.Header, h)
			}

			client := &http.Client{Transport: rec.Client().Transport, CheckRedirect: check}
			req = newReq()
			resp, err = client.Do(req)
			want := outcomeOf(req.Context(), resp, err)
			wantReqs := rec.take()

			if got != want {
				t.Errorf("follow: %+v\nClient.Do: %+v", got, want)
			}
			if got != tt.want {
				t.Errorf("follow: %+v, want %+v", got, tt.want)
			}
			if !reflect.DeepEqual(gotReqs, wantReqs) {
				t.Errorf("the portal received from follow:\n%v\nfrom Client.Do:\n%v", gotReqs, wantReqs)
			}
			if strings.Contains(got.Err, plate) {
				t.Errorf("error %q reveals the plate", got.Err)
			}
		})
	}
}

// trackedBody is a request body that counts its closes.
type trackedBody struct {
	io.Reader
	closes atomic.Int32
}

func (b *trackedBody) Close() error {
	b.closes.Add(1)
	return nil
}

// roundTripFunc is a RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// On every way a request fails, its body is closed, as Client.Do closes
// it, and the error is what Client.Do's would be.
func TestFollowClosesBodyOnError(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	rec := newRecorder(t)
	base, _ := url.Parse(rec.URL)

	tests := []struct {
		name    string
		url     string
		rt      http.RoundTripper
		outcome aggregator.Outcome
		status  int
		text    string
	}{
		{"connection refused", closed.URL + "/x", http.DefaultTransport, aggregator.Unavailable, 0, "Post request: dial tcp"},
		{"nil answer without error", rec.URL + "/x", roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, nil }),
			aggregator.Unavailable, 0, "Post request: http: RoundTripper implementation (sources.roundTripFunc) returned a nil *Response with a nil error"},
		{"foreign redirect", rec.URL + "/to?u=" + url.QueryEscape("http://localhost:1/x"), rec.Client().Transport,
			aggregator.Unreadable, http.StatusFound, "redirect to another origin not followed"},
		{"too many redirects", rec.URL + "/hop/307/4", rec.Client().Transport,
			aggregator.Unreadable, http.StatusTemporaryRedirect, "more than 3 redirects"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			body := &trackedBody{Reader: strings.NewReader("d=1")}
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, tt.url, body)
			if err != nil {
				t.Fatal(err)
			}
			req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("d=1")), nil }
			resp, err := follow(tt.rt, checkRedirect(base), req)
			if err == nil {
				t.Fatalf("follow = %d, want an error", resp.StatusCode)
			}
			if body.closes.Load() == 0 {
				t.Errorf("the request's body was not closed")
			}
			e := transportError(req.Context(), err)
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			if e.Outcome != tt.outcome || status != tt.status || !strings.HasPrefix(e.Err.Error(), tt.text) {
				t.Errorf("follow = %d, %s: %v; want %d, %s: %s…", status, e.Outcome, e.Err, tt.status, tt.outcome, tt.text)
			}
		})
	}
}

// A Location that is not a URL is a redirect not followed (source-error,
// with its status), whose error does not quote the Location; Client.Do's
// quoted it, as a connection failure.
func TestFollowBadLocation(t *testing.T) {
	t.Parallel()
	srv := portal(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", "http://127.0.0.1:bad/"+plate)
		w.WriteHeader(http.StatusFound)
	})
	s := newSource(t, testSpec(srv.URL), srv.Client())
	_, err := s.Lookup(context.Background(), domainQuery)
	checkRedirectError(t, err, http.StatusFound)
}

// Through a Source: a POST's body goes again on a 307 or 308, not on a
// 303; every same-origin request carries the configured headers and the
// previous URL as Referer, and the source's own header gets none of it.
func TestSourceRedirectsPOST(t *testing.T) {
	t.Parallel()
	tests := []struct {
		code       int
		wantMethod string
		wantBody   string
	}{
		{http.StatusMovedPermanently, "GET", ""},
		{http.StatusFound, "GET", ""},
		{http.StatusSeeOther, "GET", ""},
		{http.StatusTemporaryRedirect, "POST", "dominio=" + plate},
		{http.StatusPermanentRedirect, "POST", "dominio=" + plate},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.code), func(t *testing.T) {
			t.Parallel()
			rec := newRecorder(t)
			spec := testSpec(rec.URL)
			spec.Headers = map[string]string{"X-Api-Key": "k-secret"}
			// Two hops, then the answer.
			spec.Operations = map[aggregator.Operation]OperationSpec{
				aggregator.ByDomain: {Method: "POST", Path: "/hop/" + strconv.Itoa(tt.code) + "/2",
					Body: Body{Form: map[string]string{"dominio": "{domain}"}}},
			}
			s := newSource(t, spec, rec.Client())
			_, err := s.Lookup(context.Background(), domainQuery)
			// The last answer ("METHOD body") is no JSON document.
			checkError(t, err, aggregator.Unreadable, http.StatusOK, 0)
			reqs := rec.take()
			if len(reqs) != 3 {
				t.Fatalf("the portal received %d requests, want 3", len(reqs))
			}
			for i, r := range reqs[1:] {
				if r.Method != tt.wantMethod || r.Body != tt.wantBody {
					t.Errorf("request %d after %d: %s %q, want %s %q", i+2, tt.code, r.Method, r.Body, tt.wantMethod, tt.wantBody)
				}
				if got := r.Header.Get("X-Api-Key"); got != "k-secret" {
					t.Errorf("request %d: X-Api-Key %q, want the configured one", i+2, got)
				}
				wantRef := rec.URL + reqs[i].URI
				if got := r.Header.Get("Referer"); got != wantRef {
					t.Errorf("request %d: Referer %q, want %q", i+2, got, wantRef)
				}
				if tt.wantBody == "" && r.Header.Get("Content-Type") != "" {
					t.Errorf("request %d: Content-Type %q without a body", i+2, r.Header.Get("Content-Type"))
				}
			}
			if _, ok := s.lookupH["Referer"]; ok {
				t.Errorf("the source's own header got a Referer")
			}
		})
	}
}

// The source's header, shared with requests that add nothing to it, is
// left as it was by redirects (Referer goes on a copy).
func TestSourceHeaderUntouchedByRedirects(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	spec := testSpec(rec.URL)
	spec.Headers = map[string]string{"X-Api-Key": "k-secret"}
	spec.Operations = map[aggregator.Operation]OperationSpec{aggregator.ByDomain: {Path: "/hop/302/3?d={domain}"}}
	s := newSource(t, spec, rec.Client())
	before := s.lookupH.Clone()
	_, err := s.Lookup(context.Background(), domainQuery)
	checkError(t, err, aggregator.Unreadable, http.StatusOK, 0)
	if !reflect.DeepEqual(s.lookupH, before) {
		t.Errorf("the source's header is %v after redirects, was %v", s.lookupH, before)
	}
	if reqs := rec.take(); len(reqs) != 4 || reqs[3].Header.Get("Referer") == "" {
		t.Errorf("the portal received %d requests, the last without Referer; want 4 with", len(reqs))
	}
}

// A call whose context ends between two hops is a Timeout that wraps the
// context's error, like any other.
func TestRedirectCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := portal(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" {
			http.Redirect(w, r, "/second", http.StatusFound)
			return
		}
		cancel() // the caller gives up while the portal works on the second hop
		<-r.Context().Done()
	})
	spec := testSpec(srv.URL)
	spec.Operations = map[aggregator.Operation]OperationSpec{aggregator.ByDomain: {Path: "/first?d={domain}"}}
	s := newSource(t, spec, srv.Client())
	_, err := s.Lookup(ctx, domainQuery)
	checkError(t, err, aggregator.Timeout, 0, 0)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("errors.Is(%v, context.Canceled) is false", err)
	}
}

// A client with a timeout (or a jar) is used as it is: its timeout still
// cuts a redirect chain short.
func TestClientTimeoutKept(t *testing.T) {
	t.Parallel()
	srv := portal(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" {
			http.Redirect(w, r, "/second", http.StatusFound)
			return
		}
		<-r.Context().Done()
	})
	spec := testSpec(srv.URL)
	spec.Operations = map[aggregator.Operation]OperationSpec{aggregator.ByDomain: {Path: "/first?d={domain}"}}
	client := srv.Client()
	client.Timeout = 50 * time.Millisecond
	s := newSource(t, spec, client)
	_, err := s.Lookup(context.Background(), domainQuery)
	checkError(t, err, aggregator.Timeout, 0, 0)
}
