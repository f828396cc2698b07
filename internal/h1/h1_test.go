package h1_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/multas/aggregator/internal/h1"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counted is a test server that counts the connections it accepted.
type counted struct {
	*httptest.Server
	conns atomic.Int64
}

func newCounted(t *testing.T, h http.HandlerFunc) *counted {
	t.Helper()
	s := &counted{}
	s.Server = httptest.NewUnstartedServer(h)
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func get(t *testing.T, c *http.Client, u string) (string, *http.Response) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), resp
}

// Answers of every framing are read whole, and the connection serves the
// next call when the framing allows it.
func TestFramings(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 100<<10)
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
		conns   int64 // after three calls
	}{
		{"content-length", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "hello") }, "hello", 1},
		{"chunked", func(w http.ResponseWriter, _ *http.Request) {
			_, _ = io.WriteString(w, "hel")
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, "lo")
		}, "hello", 1},
		{"large chunked", func(w http.ResponseWriter, _ *http.Request) {
			w.(http.Flusher).Flush()
			_, _ = io.WriteString(w, big)
		}, big, 1},
		{"connection close", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Connection", "close")
			_, _ = io.WriteString(w, "bye")
		}, "bye", 3},
		{"no content", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }, "", 1},
		{"1xx first", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			_, _ = io.WriteString(w, "late")
		}, "late", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newCounted(t, tc.handler)
			tr := &h1.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			c := &http.Client{Transport: tr}
			for i := range 3 {
				if got, _ := get(t, c, s.URL); got != tc.want {
					t.Fatalf("call %d: %d bytes %.20q, want %d bytes", i, len(got), got, len(tc.want))
				}
			}
			if n := s.conns.Load(); n != tc.conns {
				t.Errorf("%d connections for three calls, want %d", n, tc.conns)
			}
		})
	}
}

// Requests reach the server as net/http's transport would send them.
func TestRequests(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, uri, host, ua, ae, body, te string
		cl                                  int64
		header                              http.Header
	}
	got := make(chan seen, 1)
	s := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, r.Host, r.UserAgent(), r.Header.Get("Accept-Encoding"), string(b),
			strings.Join(r.TransferEncoding, ","), r.ContentLength, r.Header}
	})
	tr := &h1.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	for _, tc := range []struct {
		name  string
		req   func() *http.Request
		check func(seen) string
	}{
		{"get", func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, s.URL+"/a%2Fb/c?d=AB123CD&x=%20", nil)
			r.Header.Set("X-Api-Key", "k")
			r.Header.Add("Accept", "a")
			r.Header.Add("Accept", "b")
			return r
		}, func(g seen) string {
			if g.method != "GET" || g.uri != "/a%2Fb/c?d=AB123CD&x=%20" || g.ua != "Go-http-client/1.1" || g.ae != "gzip" ||
				g.header.Get("X-Api-Key") != "k" || strings.Join(g.header.Values("Accept"), ",") != "a,b" {
				return fmt.Sprintf("%+v", g)
			}
			return ""
		}},
		{"post with length", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, s.URL+"/consulta", strings.NewReader("dominio=AB123CD"))
			r.Header.Set("User-Agent", "aggregator")
			r.Header.Set("Accept-Encoding", "identity")
			return r
		}, func(g seen) string {
			if g.method != "POST" || g.body != "dominio=AB123CD" || g.cl != 15 || g.ua != "aggregator" || g.ae != "identity" {
				return fmt.Sprintf("%+v", g)
			}
			return ""
		}},
		{"post of unknown length", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, s.URL+"/", io.MultiReader(strings.NewReader("a="), strings.NewReader("b")))
			return r
		}, func(g seen) string {
			if g.body != "a=b" || g.te != "chunked" {
				return fmt.Sprintf("%+v", g)
			}
			return ""
		}},
		{"post without body", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPost, s.URL+"/", nil)
			return r
		}, func(g seen) string {
			if g.cl != 0 || g.te != "" || g.body != "" {
				return fmt.Sprintf("%+v", g)
			}
			return ""
		}},
		{"host of its own", func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, s.URL+"/", nil)
			r.Host = "portal.example"
			return r
		}, func(g seen) string {
			if g.host != "portal.example" {
				return fmt.Sprintf("%+v", g)
			}
			return ""
		}},
	} {
		resp, err := c.Do(tc.req())
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if msg := tc.check(<-got); msg != "" {
			t.Errorf("%s: the server saw %s", tc.name, msg)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections for five calls, want 1", n)
	}
}

// A request that could not be sent as it is is refused before any
// connection is made.
func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	s := newCounted(t, func(http.ResponseWriter, *http.Request) {})
	tr := &h1.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	for name, mutate := range map[string]func(*http.Request){
		"CR LF in a value": func(r *http.Request) { r.Header.Set("Authorization", "Bearer x\r\nX-Evil: 1") },
		"bad field name":   func(r *http.Request) { r.Header["Bad Name"] = []string{"v"} },
		"bad host":         func(r *http.Request) { r.Host = "a b" },
		"bad method":       func(r *http.Request) { r.Method = "GE T" },
		"ftp":              func(r *http.Request) { r.URL.Scheme = "ftp" },
	} {
		r, _ := http.NewRequest(http.MethodGet, s.URL, nil)
		mutate(r)
		if resp, err := tr.RoundTrip(r); err == nil {
			resp.Body.Close()
			t.Errorf("%s: sent", name)
		}
	}
	if n := s.conns.Load(); n != 0 {
		t.Errorf("%d connections made", n)
	}
}

// A gzip answer the transport asked for is decoded and its connection
// reused; one the caller asked for itself is left as it came.
func TestGzip(t *testing.T) {
	t.Parallel()
	var zipped bytes.Buffer
	zw := gzip.NewWriter(&zipped)
	_, _ = io.WriteString(zw, `{"items":[]}`)
	_ = zw.Close()
	s := newCounted(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept-Encoding") == "" {
			_, _ = io.WriteString(w, "asked for nothing")
			return
		}
		w.Header().Set("Content-Encoding", "gzip")
		_, _ = w.Write(zipped.Bytes())
	})
	tr := &h1.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	for i := range 3 {
		got, resp := get(t, c, s.URL)
		if got != `{"items":[]}` || !resp.Uncompressed || resp.Header.Get("Content-Encoding") != "" {
			t.Fatalf("call %d: %q, uncompressed %v", i, got, resp.Uncompressed)
		}
	}
	if n := s.conns.Load(); n != 1 {
		t.Errorf("%d connections for three gzip calls, want 1", n)
	}
	r, _ := http.NewRequest(http.MethodGet, s.URL, nil)
	r.Header.Set("Accept-Encoding", "gzip")
	resp, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Equal(b, zipped.Bytes()) || resp.Uncompressed {
		t.Errorf("a caller's own gzip was decoded: %q", b)
	}
	off := &h1.Transport{DisableCompression: true}
	t.Cleanup(off.CloseIdleConnections)
	if got, _ := get(t, &http.Client{Transport: off}, s.URL); got != "asked for nothing" {
		t.Errorf("DisableCompression: %q", got)
	}
}

// rawServer accepts connections and hands each to serve.
func rawServer(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	return "http://" + ln.Addr().String()
}

// A hostile portal cannot hold a call past its context nor fill memory
// with an answer's head.
func TestHostileAnswers(t *testing.T) {
	t.Parallel()
	readRequest := func(c net.Conn) *bufio.Reader {
		br := bufio.NewReader(c)
		_, _ = http.ReadRequest(br)
		return br
	}
	for _, tc := range []struct {
		name  string
		serve func(net.Conn)
		want  func(error) bool
	}{
		{"endless head", func(c net.Conn) {
			readRequest(c)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			line := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
			for range 2 * h1.MaxHeaderBytes / len(line) {
				if _, err := io.WriteString(c, line); err != nil {
					return
				}
			}
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "head is longer") }},
		{"endless 1xx", func(c net.Conn) {
			readRequest(c)
			for range 100 {
				if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\n\r\n"); err != nil {
					return
				}
			}
		}, func(err error) bool { return err != nil && strings.Contains(err.Error(), "1xx") }},
		{"silent", func(c net.Conn) {
			readRequest(c)
			time.Sleep(2 * time.Second)
		}, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{"slow body", func(c net.Conn) {
			readRequest(c)
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nabc")
			time.Sleep(2 * time.Second)
		}, func(err error) bool { return errors.Is(err, context.DeadlineExceeded) }},
		{"hang up", func(c net.Conn) { readRequest(c) }, func(err error) bool { return err != nil }},
		{"garbage", func(c net.Conn) {
			readRequest(c)
			_, _ = io.WriteString(c, "SSH-2.0-OpenSSH\r\n\r\n")
		}, func(err error) bool { return err != nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u := rawServer(t, tc.serve)
			tr := &h1.Transport{}
			t.Cleanup(tr.CloseIdleConnections)
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			r, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
			resp, err := tr.RoundTrip(r)
			if err == nil {
				_, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			if !tc.want(err) {
				t.Errorf("error %v", err)
			}
		})
	}
}

// A body closed before its end closes its connection: the next call
// takes another.
func TestEarlyClose(t *testing.T) {
	t.Parallel()
	s := newCounted(t, func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, strings.Repeat("x", 10000)) })
	tr := &h1.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	for range 2 {
		r, _ := http.NewRequest(http.MethodGet, s.URL, nil)
		resp, err := tr.RoundTrip(r)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = resp.Body.Read(make([]byte, 10))
		resp.Body.Close()
		if _, err := resp.Body.Read(make([]byte, 10)); err == nil {
			t.Error("read after close")
		}
	}
	if n := s.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// A connection the portal closed while idle costs no failure and no
// replay: it is found before anything is written on it.
func TestIdleClosedByPortal(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	closed := make(chan struct{}, 10)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	srv.Config.IdleTimeout = 50 * time.Millisecond
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateClosed {
			closed <- struct{}{}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	tr := &h1.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	for i := range 3 {
		get(t, &http.Client{Transport: tr}, srv.URL)
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatal("the server never closed the idle connection")
		}
		_ = i
	}
	if n := requests.Load(); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
}

// A portal that reads a request on a reused connection and hangs up gets
// it once: the call fails with ErrNotReplayed.
func TestNoReplay(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	var hangUp atomic.Bool
	s := newCounted(t, func(w http.ResponseWriter, _ *http.Request) {
		requests.Add(1)
		if hangUp.Load() {
			c, _, _ := http.NewResponseController(w).Hijack()
			_ = c.Close()
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	tr := &h1.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	get(t, c, s.URL)
	hangUp.Store(true)
	_, err := c.Get(s.URL)
	if !errors.Is(err, h1.ErrNotReplayed) {
		t.Errorf("error %v, want ErrNotReplayed", err)
	}
	if n := requests.Load(); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}

// WithTLS configures a copy's TLS connections: a private CA and a server
// name of their own.
func TestTLS(t *testing.T) {
	t.Parallel()
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, "%s %d", r.Proto, r.TLS.Version)
	}))
	t.Cleanup(s.Close)
	roots := s.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	base := &h1.Transport{}
	if _, err := (&http.Client{Transport: base}).Get(s.URL); err == nil {
		t.Error("a certificate of an unknown CA was accepted")
	}
	rt, ok := h1.WithTLS(base, func(c *tls.Config) { c.RootCAs = roots; c.ServerName = "example.com" })
	if !ok {
		t.Fatal("not configurable")
	}
	defer rt.(*h1.Transport).CloseIdleConnections()
	got, resp := get(t, &http.Client{Transport: rt}, s.URL)
	if got != fmt.Sprintf("HTTP/1.1 %d", tls.VersionTLS13) || resp.TLS == nil {
		t.Errorf("%q", got)
	}
	if base.TLSClientConfig != nil {
		t.Error("WithTLS changed its original")
	}
}

// Requests the proxy settings send through a proxy go to the fallback.
func TestProxyToFallback(t *testing.T) {
	t.Parallel()
	var fell atomic.Int64
	tr := &h1.Transport{
		Proxy: func(r *http.Request) (*url.URL, error) {
			if r.URL.Hostname() == "proxied.example" {
				return url.Parse("http://proxy.example:3128")
			}
			return nil, nil
		},
		Fallback: roundTripFunc(func(*http.Request) (*http.Response, error) {
			fell.Add(1)
			return nil, errors.New("fallback")
		}),
	}
	t.Cleanup(tr.CloseIdleConnections)
	s := newCounted(t, func(http.ResponseWriter, *http.Request) {})
	for _, u := range []string{s.URL, "http://proxied.example/", s.URL} {
		r, _ := http.NewRequest(http.MethodGet, u, nil)
		if resp, err := tr.RoundTrip(r); err == nil {
			resp.Body.Close()
		}
	}
	if fell.Load() != 1 || s.conns.Load() != 1 {
		t.Errorf("%d to the fallback, %d connections", fell.Load(), s.conns.Load())
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Many calls at once share the pool without a race.
func TestConcurrentCalls(t *testing.T) {
	t.Parallel()
	s := newCounted(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.URL.Query().Get("i")) })
	tr := &h1.Transport{MaxIdleConnsPerHost: 4}
	t.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 50 {
				want := fmt.Sprint(g*1000 + i)
				resp, err := c.Get(s.URL + "/?i=" + want)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != want {
					t.Errorf("got %q, want %q", b, want)
				}
			}
		})
	}
	wg.Wait()
}

// Whatever a portal sends back, a call ends, with an answer or an error,
// within its deadline and without a panic.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil the end",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		tr := &h1.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
			client, server := net.Pipe()
			go func() {
				defer server.Close()
				_, _ = http.ReadRequest(bufio.NewReader(server))
				_, _ = server.Write(answer)
			}()
			return client, nil
		}}
		defer tr.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://portal.test/", nil)
		resp, err := tr.RoundTrip(r)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
	})
}

// Bytes a portal sends after an answer's end belong to no answer: the
// connection holding them is not used again.
func TestBytesAfterTheAnswer(t *testing.T) {
	t.Parallel()
	var conns atomic.Int64
	u := rawServer(t, func(c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			if _, err := http.ReadRequest(br); err != nil {
				return
			}
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nforged"); err != nil {
				return
			}
		}
	})
	tr := &h1.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	for i := range 2 {
		if got, _ := get(t, &http.Client{Transport: tr}, u); got != "ok" {
			t.Fatalf("call %d: %q", i, got)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}
