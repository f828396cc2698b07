package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/apitest"
	"github.com/multas/aggregator/server"
)

// Slow clients cannot take the service from others (SPEC 9): what a client
// sends must arrive within server.read_timeout, at most 64 KiB of body,
// and a request counts toward server.max_in_flight only once its body has
// arrived.

// healthyApp is a replica with one source whose portal answers one
// infraction at once, configured with the members of the server block
// given (YAML flow members after a comma, "" for none), served by
// server.HTTPServer with its server.read_timeout on a loopback port until
// the test ends. change, when not nil, is applied to the http.Server
// first.
func healthyApp(tb testing.TB, serverMembers string, change func(*http.Server)) (*app.App, string) {
	tb.Helper()
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"actas": [{"nro": "A-1"}]}`)
	}))
	tb.Cleanup(portal.Close)
	cfg, err := config.Parse([]byte(`server: {admin_token: "`+fuzzAdminToken+`"`+serverMembers+`}
problems: {base_uri: "`+fuzzBase+`"}
webhooks: {allow_private: true}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: `+portal.URL+`
    operations:
      by_domain: {path: "/actas?dominio={domain}"}
    response: {items: /actas, fields: {id: /nro}}
`), "healthy.yaml", nil)
	if err != nil {
		tb.Fatal(err)
	}
	a, err := app.New(cfg, app.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = a.Close() })
	return a, serve(tb, a.Server, time.Duration(cfg.Server.ReadTimeout), change)
}

// asyncBody is a valid POST /v1/queries body for healthyApp.
const asyncBody = `{"domain": "AB123CD", "callback_url": "http://127.0.0.1:1/hook"}`

// bodyRequest is the head of a request to one of the two endpoints that
// take a body, alternately, announcing a body of n bytes.
func bodyRequest(i, n int, extra string) string {
	if i%2 == 0 {
		return fmt.Sprintf("POST /v1/queries HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n", n, extra)
	}
	return fmt.Sprintf("PUT /v1/admin/sources/caba/breaker HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n%s\r\n", fuzzAdminToken, n, extra)
}

// drip writes text to c one byte every period, from its start again at its
// end, until stop is closed or a write fails.
func drip(c net.Conn, text string, period time.Duration, stop <-chan struct{}) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		case <-tick.C:
			if _, err := c.Write([]byte{text[i%len(text)]}); err != nil {
				return
			}
		}
	}
}

// dripping runs drip in the background until the stop it returns, which
// waits for it, is called.
func dripping(c net.Conn, text string, period time.Duration) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		drip(c, text, period, quit)
	}()
	return func() {
		close(quit)
		<-done
	}
}

// dialSlow dials addr and writes head, the connection's deadline limit
// after begin, which is taken before the dial, so before the server can
// start its clock.
func dialSlow(addr, head string, limit time.Duration) (c net.Conn, begin time.Time, err error) {
	begin = time.Now()
	c, err = net.Dial("tcp", addr)
	if err != nil {
		return nil, begin, err
	}
	_ = c.SetDeadline(begin.Add(limit))
	if _, err := io.WriteString(c, head); err != nil {
		c.Close()
		return nil, begin, err
	}
	return c, begin, nil
}

// slowAnswer is how the server treated one slow client.
type slowAnswer struct {
	i      int
	resp   *http.Response // nil when the server hung up without a word
	body   []byte
	took   time.Duration // from the first byte sent to the answer or the hang-up
	failed error         // the client's own failure (not the server's hang-up)
}

// slowBody sends request i of bodyRequest with Expect: 100-continue and,
// once the server asks for the body (it is reading it), reports on
// reading and drips the body until the server answers, which it returns.
// Nothing arriving within limit is a failure; closing quit ends it sooner.
func slowBody(addr string, i int, limit time.Duration, reading chan<- int, quit <-chan struct{}) slowAnswer {
	c, begin, err := dialSlow(addr, bodyRequest(i, 1000, "Expect: 100-continue\r\n"), limit)
	if err != nil {
		return slowAnswer{i: i, failed: err}
	}
	defer c.Close()
	closed := make(chan struct{})
	defer close(closed)
	go func() {
		select {
		case <-quit:
			c.Close()
		case <-closed:
		}
	}()
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return slowAnswer{i: i, took: time.Since(begin), failed: fmt.Errorf("waiting for 100 Continue: %w", err)}
	}
	if resp.StatusCode != http.StatusContinue {
		body, _ := io.ReadAll(resp.Body)
		return slowAnswer{i: i, resp: resp, body: body, took: time.Since(begin),
			failed: errors.New("answered before its body was asked for")}
	}
	reading <- i
	defer dripping(c, `{"domain": "AB123CD"}`, 100*time.Millisecond)()
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		return slowAnswer{i: i, took: time.Since(begin), failed: fmt.Errorf("waiting for the answer: %w", err)}
	}
	body, err := io.ReadAll(resp.Body)
	return slowAnswer{i: i, resp: resp, body: body, took: time.Since(begin), failed: err}
}

// slowHeaders drips the headers of a request until the server hangs up,
// which it must do without answering, within limit.
func slowHeaders(addr string, i int, limit time.Duration) slowAnswer {
	c, begin, err := dialSlow(addr, "POST /v1/queries HTTP/1.1\r\nHost: x\r\nX-Slow: ", limit)
	if err != nil {
		return slowAnswer{i: i, failed: err}
	}
	defer c.Close()
	defer dripping(c, "abcdefgh", 100*time.Millisecond)()
	b, err := io.ReadAll(c)
	a := slowAnswer{i: i, took: time.Since(begin)}
	var ne net.Error
	switch {
	case len(b) > 0:
		a.resp, _ = http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
		a.body = b
		a.failed = errors.New("answered instead of hung up on")
	case errors.As(err, &ne) && ne.Timeout():
		a.failed = fmt.Errorf("still listened to after %v", limit)
	}
	return a // a hang-up: EOF (nil) or a reset
}

func (a slowAnswer) String() string {
	s := fmt.Sprintf("slow client %d after %v", a.i, a.took.Round(time.Millisecond))
	if a.resp != nil {
		s += fmt.Sprintf(": %d %s", a.resp.StatusCode, a.body)
	}
	if a.failed != nil {
		s += fmt.Sprintf(" (%v)", a.failed)
	}
	return s
}

// A body in transit takes no slot of server.max_in_flight: with 4 slots
// and 250 clients dripping their bodies (each has been asked for its body
// with 100 Continue, so the server is reading it), a query, an
// asynchronous query and an admin change are served at once, 200, 202 and
// 200, while none of the slow clients has been answered yet (read_timeout
// is long here, so that this holds on a loaded machine).
func TestBodiesInTransitTakeNoSlot(t *testing.T) {
	t.Parallel()
	const slow = 250
	_, addr := healthyApp(t, ", max_in_flight: 4, read_timeout: 2m", nil)
	v := apitest.New(t)
	const limit = time.Minute
	reading := make(chan int, slow)
	answers := make(chan slowAnswer, slow)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(quit)
	for i := range slow {
		wg.Go(func() { answers <- slowBody(addr, i, limit, reading, quit) })
	}
	for range slow {
		select {
		case <-reading:
		case a := <-answers:
			t.Fatalf("%s; want its body to be read, whatever the in-flight count", a)
		}
	}

	client := &http.Client{Timeout: limit}
	t.Cleanup(client.CloseIdleConnections)
	for _, tt := range []struct {
		method, path, body string
		want               int
	}{
		{http.MethodGet, "/v1/infractions?domain=AB123CD", "", http.StatusOK},
		{http.MethodPost, "/v1/queries", asyncBody, http.StatusAccepted},
		{http.MethodPut, "/v1/admin/sources/caba/breaker", `{"open_for": "30s"}`, http.StatusOK},
	} {
		req, err := http.NewRequest(tt.method, "http://"+addr+tt.path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+fuzzAdminToken)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s while %d bodies are in transit: %v", tt.method, tt.path, slow, err)
		}
		if body := v.CheckResponse(t, resp); resp.StatusCode != tt.want {
			t.Errorf("%s %s while %d bodies are in transit: got %d %s, want %d", tt.method, tt.path, slow, resp.StatusCode, body, tt.want)
		}
	}
	if n := len(answers); n > 0 {
		t.Errorf("%d slow clients were answered before read_timeout: %s", n, <-answers)
	}
}

// The slow clients themselves (SPEC 9): 220 clients dripping a body to
// the two endpoints that take one each get a 408 request-timeout problem
// once read_timeout has passed since their first byte, never before; 30
// dripping their headers are hung up on without a word, also after
// read_timeout. Meanwhile a query is served (max_in_flight is 4).
func TestSlowClientsCutOffAtReadTimeout(t *testing.T) {
	t.Parallel()
	const bodies, heads = 220, 30
	a, addr := healthyApp(t, ", max_in_flight: 4, read_timeout: 1s", nil)
	readTimeout := time.Duration(a.Config.Server.ReadTimeout)
	v := apitest.New(t)
	// Far more than the timeout: a server that forgets a slow client fails
	// the test rather than hang it; not a bound on how late the cut comes.
	limit := readTimeout + 30*time.Second
	reading := make(chan int, bodies)
	answers := make(chan slowAnswer, bodies+heads)
	var wg sync.WaitGroup
	for i := range bodies + heads {
		wg.Go(func() {
			if i < bodies {
				answers <- slowBody(addr, i, limit, reading, nil)
			} else {
				answers <- slowHeaders(addr, i, limit)
			}
		})
	}

	client := &http.Client{Timeout: limit}
	t.Cleanup(client.CloseIdleConnections)
	resp, err := client.Get("http://" + addr + "/v1/infractions?domain=AB123CD")
	if err != nil {
		t.Fatal(err)
	}
	if body := v.CheckResponse(t, resp); resp.StatusCode != http.StatusOK {
		t.Errorf("a query among %d slow clients: got %d %s, want 200", bodies+heads, resp.StatusCode, body)
	}

	wg.Wait()
	close(answers)
	for a := range answers {
		if a.failed != nil {
			t.Errorf("%s", a)
			continue
		}
		if a.took < readTimeout {
			t.Errorf("%s, before read_timeout (%v)", a, readTimeout)
		}
		if a.i >= bodies {
			continue // hung up on, as it should be
		}
		if a.resp == nil {
			t.Errorf("%s: hung up on, want a 408", a)
			continue
		}
		req := httptest.NewRequest(http.MethodPost, "/v1/queries", nil)
		if a.i%2 == 1 {
			req = httptest.NewRequest(http.MethodPut, "/v1/admin/sources/caba/breaker", nil)
		}
		v.Check(t, req, a.resp.StatusCode, a.resp.Header, a.body)
		var p struct{ Type string }
		_ = json.Unmarshal(a.body, &p)
		if a.resp.StatusCode != http.StatusRequestTimeout || p.Type != fuzzBase+"request-timeout" || !a.resp.Close {
			t.Errorf("%s; want a 408 request-timeout problem, the connection closed", a)
		}
	}
}

// Slowloris on the aggregator itself: a client that sends its headers one
// byte at a time is cut off once read_timeout has passed (5s in
// production; 300ms here), however steadily it keeps sending.
func TestSlowHeadersCutOff(t *testing.T) {
	t.Parallel()
	const timeout = 300 * time.Millisecond
	addr := serve(t, server.New(server.Options{}), timeout, nil)
	a := slowHeaders(addr, 0, 5*time.Second)
	if a.failed != nil || a.took < timeout || a.took > timeout+time.Second {
		t.Errorf("%s; want hung up on just after %v", a, timeout)
	}
}

// HTTPServer bounds headers and body together by read_timeout (net/http
// counts ReadTimeout from the request's first byte), and lets a write take
// the body's time and the longest query's.
func TestHTTPServerTimeouts(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		read, maxDeadline, wantRead, wantWrite time.Duration
	}{
		{0, 10 * time.Second, server.DefaultReadTimeout, 25 * time.Second},
		{2 * time.Second, 10 * time.Second, 2 * time.Second, 22 * time.Second},
		{30 * time.Second, time.Second, 30 * time.Second, 41 * time.Second},
	} {
		s := server.HTTPServer("", nil, tt.read, tt.maxDeadline)
		if s.ReadHeaderTimeout != tt.wantRead || s.ReadTimeout != tt.wantRead || s.WriteTimeout != tt.wantWrite {
			t.Errorf("HTTPServer(%v, %v): ReadHeaderTimeout %v, ReadTimeout %v, WriteTimeout %v; want %v, %v, %v",
				tt.read, tt.maxDeadline, s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, tt.wantRead, tt.wantRead, tt.wantWrite)
		}
	}
}

// Every endpoint that takes a body reads at most 64 KiB of it: a body of
// exactly that gets the route's own answer; one byte more, announced or
// sent chunked, is a 413 payload-too-large problem.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	_, addr := healthyApp(t, "", nil)
	v := apitest.New(t)
	pad := func(doc string, n int) string { return doc + strings.Repeat(" ", n-len(doc)) }
	const limit = server.MaxBodyBytes
	routes := []struct {
		method, path, doc string
		want              int // with a body of exactly the limit
	}{
		{http.MethodPost, "/v1/queries", asyncBody, http.StatusAccepted},
		{http.MethodPut, "/v1/admin/sources/caba/breaker", `{"open_for": "30s"}`, http.StatusOK},
		{http.MethodPost, "/v1/admin/breakers/caba/by_domain/open", `{}`, http.StatusOK},
		{http.MethodPost, "/v1/admin/breakers/caba/by_domain/reset", `{}`, http.StatusOK},
		{http.MethodPost, "/v1/admin/dlq/d_1/redeliver", `{}`, http.StatusNotFound},
		{http.MethodDelete, "/v1/admin/dlq/d_1", `{}`, http.StatusNotFound},
	}
	bodies := []struct {
		name    string
		size    int
		chunked bool
		want    int // 0: the route's own answer
	}{
		{"64 KiB", limit, false, 0},
		{"64 KiB chunked", limit, true, 0},
		{"64 KiB + 1", limit + 1, false, http.StatusRequestEntityTooLarge},
		{"65 KiB chunked", limit + 1<<10, true, http.StatusRequestEntityTooLarge},
		{"1 MiB", 1 << 20, false, http.StatusRequestEntityTooLarge},
	}
	client := &http.Client{Timeout: time.Minute}
	t.Cleanup(client.CloseIdleConnections)
	for _, r := range routes {
		for _, b := range bodies {
			t.Run(r.method+" "+r.path+" "+b.name, func(t *testing.T) {
				var body io.Reader = strings.NewReader(pad(r.doc, b.size))
				if b.chunked {
					body = io.MultiReader(body) // no length known: sent chunked
				}
				req, err := http.NewRequest(r.method, "http://"+addr+r.path, body)
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+fuzzAdminToken)
				req.Header.Set("Content-Type", "application/json")
				if !b.chunked && b.want != 0 {
					// As curl does for a large body: the refusal comes before
					// the body is sent, so the client reads it rather than
					// meeting a connection the server closed mid-body.
					req.Header.Set("Expect", "100-continue")
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				got := v.CheckResponse(t, resp)
				want := b.want
				if want == 0 {
					want = r.want
				}
				if resp.StatusCode != want {
					t.Errorf("got %d %s, want %d", resp.StatusCode, got, want)
				}
				var p struct{ Type string }
				_ = json.Unmarshal(got, &p)
				if want == http.StatusRequestEntityTooLarge && (p.Type != fuzzBase+"payload-too-large" || !resp.Close) {
					t.Errorf("got %s, Connection: %q; want a payload-too-large problem, the connection closed", got, resp.Header.Get("Connection"))
				}
			})
		}
	}
}

// A Content-Length over the limit is refused before a byte of the body is
// read: the client sends none, and is answered 413 at once rather than
// 408 at read_timeout (a minute here); asked to, the server does not say
// 100 Continue.
func TestOversizedBodyRefusedUnread(t *testing.T) {
	t.Parallel()
	_, addr := healthyApp(t, ", read_timeout: 1m", nil)
	v := apitest.New(t)
	for i, expect := range []string{"", "Expect: 100-continue\r\n"} {
		t.Run(fmt.Sprintf("expect=%t", expect != ""), func(t *testing.T) {
			t.Parallel()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // less than read_timeout
			if _, err := io.WriteString(c, bodyRequest(i, server.MaxBodyBytes+1, expect)); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer without the body: %v", err)
			}
			body, _ := io.ReadAll(resp.Body)
			req := httptest.NewRequest(http.MethodPost, "/v1/queries", nil)
			if i == 1 {
				req = httptest.NewRequest(http.MethodPut, "/v1/admin/sources/caba/breaker", nil)
			}
			v.Check(t, req, resp.StatusCode, resp.Header, body)
			if resp.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("got %d %s, want 413 before the body", resp.StatusCode, body)
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
				t.Errorf("after the 413: %q, %v; want the connection closed", rest, err)
			}
		})
	}
}

// Every JSON answer, application/json and application/problem+json, says
// X-Content-Type-Options: nosniff (SPEC 9): results, listings, health,
// and problems of every origin (validation, routing, authentication, a
// refused body). apitest checks it on every answer it validates too.
func TestJSONAnswersNotSniffed(t *testing.T) {
	t.Parallel()
	_, addr := healthyApp(t, "", nil)
	client := &http.Client{Timeout: time.Minute}
	t.Cleanup(client.CloseIdleConnections)
	for _, tt := range []struct {
		method, path, auth, body string
		status                   int
	}{
		{http.MethodGet, "/v1/infractions?domain=AB123CD", "", "", http.StatusOK},
		{http.MethodGet, "/v1/infractions?domain=nope", "", "", http.StatusBadRequest},
		{http.MethodGet, "/v1/sources", "", "", http.StatusOK},
		{http.MethodPost, "/v1/queries", "", asyncBody, http.StatusAccepted},
		{http.MethodGet, "/v1/queries/nope", "", "", http.StatusNotFound},
		{http.MethodGet, "/v1/admin/breakers", "", "", http.StatusUnauthorized},
		{http.MethodGet, "/v1/admin/breakers", fuzzAdminToken, "", http.StatusOK},
		{http.MethodPost, "/v1/queries", "", strings.Repeat(" ", server.MaxBodyBytes+1), http.StatusRequestEntityTooLarge},
		{http.MethodGet, "/healthz", "", "", http.StatusOK},
		{http.MethodGet, "/readyz", "", "", http.StatusOK},
		{http.MethodGet, "/nowhere", "", "", http.StatusNotFound},
		{http.MethodDelete, "/v1/sources", "", "", http.StatusMethodNotAllowed},
	} {
		req, err := http.NewRequest(tt.method, "http://"+addr+tt.path, strings.NewReader(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		if tt.auth != "" {
			req.Header.Set("Authorization", "Bearer "+tt.auth)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status {
			t.Errorf("%s %s: got %d, want %d", tt.method, tt.path, resp.StatusCode, tt.status)
		}
		if ct, ns := resp.Header.Get("Content-Type"), resp.Header.Get("X-Content-Type-Options"); ns != "nosniff" {
			t.Errorf("%s %s: %d %s with X-Content-Type-Options %q, want nosniff", tt.method, tt.path, resp.StatusCode, ct, ns)
		}
	}
}
