// Package h1 is the transport of portal calls: HTTP/1.1 over pooled
// keep-alive connections, each round trip written and read on its caller's
// goroutine.
//
// http.Transport gives every connection a read loop and a write loop of
// its own and hands each request and answer between them and the caller
// over channels; for a fan-out of short calls that hand-off, the two
// goroutines' stacks and the per-request bookkeeping cost more CPU than
// the calls' own work. Here the caller writes the request with one write,
// reads the answer's head itself (with a parser of our own, as net/http's
// ReadResponse but with a fraction of its allocations: chunked and sized
// bodies, 1xx answers; head.go) and returns the connection to the pool
// when the body has been read to its end. A request is never sent twice: a
// pooled connection the portal closed while idle is found before anything
// is written on it (Stale); one lost after the request was written ends
// the call with ErrNotReplayed.
//
// What it does not do it leaves to Fallback: requests through a proxy
// (Proxy) go there whole.
package h1

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

// ErrNotReplayed is the error of a call whose pooled connection was lost
// after the whole request was sent, before any answer: the portal may have
// received it, so it is not sent again behind the breaker's back.
var ErrNotReplayed = errors.New("connection lost after the request was sent (not replayed: the portal may have received it)")

// MaxHeaderBytes bounds an answer's status line and header fields: a
// portal that sends more ends its call with an error, however fast it
// sends.
const MaxHeaderBytes = 1 << 20

// max1xx is how many informational answers may come before the final
// one (as net/http).
const max1xx = 5

// Transport is an http.RoundTripper for HTTP/1.1 calls. Its zero value
// works; set its fields before its first call.
type Transport struct {
	// DialContext opens TCP connections; a net.Dialer's (5 s, keep-alive
	// 30 s) when nil.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSClientConfig is cloned for each https connection; it speaks
	// HTTP/1.1 whatever NextProtos says.
	TLSClientConfig     *tls.Config
	TLSHandshakeTimeout time.Duration // 5 s when zero
	// MaxIdleConnsPerHost is how many idle connections are kept per
	// scheme and host (128 when zero); IdleConnTimeout how long one is
	// kept (90 s when zero).
	MaxIdleConnsPerHost int
	IdleConnTimeout     time.Duration
	// DisableCompression leaves Accept-Encoding to the caller; otherwise a
	// request without one asks for gzip, and a gzip answer is decoded.
	DisableCompression bool
	// Proxy chooses a proxy for a request, as http.Transport's; requests
	// it sends through one go to Fallback.
	Proxy    func(*http.Request) (*url.URL, error)
	Fallback http.RoundTripper

	mu     sync.Mutex
	idle   map[poolKey][]*conn
	direct map[poolKey]bool // the hosts Proxy leaves alone
}

type poolKey struct {
	https bool
	host  string // as the URL has it
}

// RoundTrip sends req and returns the answer's head; its body reads the
// rest from the connection.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	u := req.URL
	if u == nil {
		closeBody(req)
		return nil, errors.New("h1: request without a URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		closeBody(req)
		return nil, fmt.Errorf("h1: unsupported protocol scheme %q", u.Scheme)
	}
	if u.Host == "" {
		closeBody(req)
		return nil, errors.New("h1: no host in the request URL")
	}
	key := poolKey{https: u.Scheme == "https", host: u.Host}
	if proxied, err := t.proxied(key, req); err != nil || proxied {
		if err != nil || t.Fallback == nil {
			closeBody(req)
			return nil, cmp.Or(err, errors.New("h1: a proxy is configured and there is no fallback transport"))
		}
		return t.Fallback.RoundTrip(req)
	}
	if err := validate(req); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	for retried := false; ; retried = true {
		c, err := t.conn(ctx, key, u)
		if err != nil {
			closeBody(req)
			return nil, err
		}
		resp, err := c.roundTrip(ctx, req, t.gzip(req))
		if err == nil {
			return resp, nil
		}
		// Nothing reached a reused connection: the portal had closed it
		// after Stale looked. Sending the request on another one is no
		// replay, if its body can be had again.
		if c.reused && c.nwritten == 0 && !retried && ctx.Err() == nil {
			if body, ok := rewind(req); ok {
				r := *req
				r.Body = body
				req = &r
				continue
			}
		}
		closeBody(req)
		return nil, err
	}
}

// CloseIdleConnections closes every pooled connection not in use.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			_ = c.nc.Close()
		}
	}
	if fb, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		fb.CloseIdleConnections()
	}
}

// proxied reports whether Proxy sends requests to key's host through a
// proxy; the answer is kept for hosts it leaves alone.
func (t *Transport) proxied(key poolKey, req *http.Request) (bool, error) {
	if t.Proxy == nil {
		return false, nil
	}
	t.mu.Lock()
	direct := t.direct[key]
	t.mu.Unlock()
	if direct {
		return false, nil
	}
	p, err := t.Proxy(req)
	if err != nil || p != nil {
		return true, err
	}
	t.mu.Lock()
	if t.direct == nil {
		t.direct = make(map[poolKey]bool)
	}
	t.direct[key] = true
	t.mu.Unlock()
	return false, nil
}

// gzip reports whether the transport asks for a gzip answer to req.
func (t *Transport) gzip(req *http.Request) bool {
	return !t.DisableCompression && req.Method != http.MethodHead &&
		req.Header.Get("Accept-Encoding") == "" && req.Header.Get("Range") == ""
}

// conn takes the most recently used idle connection to key's host that is
// still fit, or dials one.
func (t *Transport) conn(ctx context.Context, key poolKey, u *url.URL) (*conn, error) {
	now := time.Now()
	for {
		t.mu.Lock()
		cs := t.idle[key]
		if len(cs) == 0 {
			t.mu.Unlock()
			break
		}
		c := cs[len(cs)-1]
		cs[len(cs)-1] = nil
		t.idle[key] = cs[:len(cs)-1]
		t.mu.Unlock()
		if now.Sub(c.idleSince) < t.idleTimeout() && !c.peek.stale() {
			c.reused = true
			return c, nil
		}
		_ = c.nc.Close()
	}
	return t.dial(ctx, key, u)
}

func (t *Transport) dial(ctx context.Context, key poolKey, u *url.URL) (*conn, error) {
	port := u.Port()
	if port == "" {
		port = "80"
		if key.https {
			port = "443"
		}
	}
	addr := net.JoinHostPort(u.Hostname(), port)
	dial := t.DialContext
	if dial == nil {
		dial = defaultDialer.DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if key.https {
		cfg := &tls.Config{}
		if t.TLSClientConfig != nil {
			cfg = t.TLSClientConfig.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(nc, cfg)
		hctx, cancel := context.WithTimeout(ctx, cmp.Or(t.TLSHandshakeTimeout, 5*time.Second))
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			_ = nc.Close()
			return nil, err
		}
		nc = tc
	}
	c := &conn{t: t, key: key, nc: nc, peek: newPeeker(nc)}
	c.abort = func() { _ = c.nc.SetDeadline(aLongTimeAgo) }
	c.br = bufio.NewReaderSize(countedReader{c}, 4<<10)
	c.bw = bufio.NewWriterSize(countedWriter{c}, 4<<10)
	return c, nil
}

var defaultDialer = &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}

func (t *Transport) idleTimeout() time.Duration { return cmp.Or(t.IdleConnTimeout, 90*time.Second) }

// put pools c for its host's next call, dropping the connections idle too
// long; it closes c when the pool is full.
func (t *Transport) put(c *conn) {
	now := time.Now()
	c.idleSince = now
	t.mu.Lock()
	if t.idle == nil {
		t.idle = make(map[poolKey][]*conn)
	}
	cs := t.idle[c.key]
	var expired []*conn
	for len(cs) > 0 && now.Sub(cs[0].idleSince) >= t.idleTimeout() {
		expired = append(expired, cs[0])
		cs = cs[1:]
	}
	full := len(cs) >= cmp.Or(t.MaxIdleConnsPerHost, 128)
	if !full {
		cs = append(cs, c)
	}
	t.idle[c.key] = cs
	t.mu.Unlock()
	for _, e := range expired {
		_ = e.nc.Close()
	}
	if full {
		_ = c.nc.Close()
	}
}

// conn is one connection to a portal, used by one call at a time.
type conn struct {
	t         *Transport
	key       poolKey
	nc        net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
	reused    bool
	peek      *peeker
	abort     func() // fails every pending read and write at once

	nwritten int64  // bytes of the current request written to nc
	nread    int64  // bytes of the current answer read from nc
	readMax  int64  // bound on nread while the head is read; 0: none
	head     []byte // the scratch space of answers' heads, kept between calls
}

type countedReader struct{ c *conn }

func (r countedReader) Read(p []byte) (int, error) {
	c := r.c
	if c.readMax > 0 {
		left := c.readMax - c.nread
		if left <= 0 {
			return 0, errHeadTooLong
		}
		if int64(len(p)) > left {
			p = p[:left]
		}
	}
	n, err := c.nc.Read(p)
	c.nread += int64(n)
	return n, err
}

type countedWriter struct{ c *conn }

func (w countedWriter) Write(p []byte) (int, error) {
	n, err := w.c.nc.Write(p)
	w.c.nwritten += int64(n)
	return n, err
}

var errHeadTooLong = fmt.Errorf("h1: the answer's head is longer than %d bytes", MaxHeaderBytes)

// aLongTimeAgo is a deadline that makes every pending read and write on a
// connection fail at once.
var aLongTimeAgo = time.Unix(1, 0)

func (c *conn) roundTrip(ctx context.Context, req *http.Request, gz bool) (*http.Response, error) {
	c.nwritten, c.nread = 0, 0
	// A call cancelled, or past its deadline, stops at once whatever it
	// waits for: the connection's deadline is set in the past.
	stop := context.AfterFunc(ctx, c.abort)
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = c.nc.Close()
		if ctx.Err() != nil {
			return nil, context.Cause(ctx)
		}
		return nil, err
	}
	if err := c.write(req, gz); err != nil {
		return fail(err)
	}
	c.readMax = MaxHeaderBytes
	a, err := readAnswer(c.br, req, &c.head)
	c.readMax = 0
	if cap(c.head) > 64<<10 {
		c.head = nil // a head that large is no reason to keep as much for every call
	}
	if err != nil {
		if c.reused && c.nread == 0 && !errors.Is(err, errHeadTooLong) {
			err = ErrNotReplayed
		}
		return fail(err)
	}
	resp := &a.resp
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return fail(errors.New("h1: the portal switched protocols"))
	}
	if tc, ok := c.nc.(*tls.Conn); ok {
		st := tc.ConnectionState()
		resp.TLS = &st
	}
	b := &a.body
	b.c, b.ctx, b.stop, b.keep = c, ctx, stop, !resp.Close && !req.Close
	if resp.Body == http.NoBody {
		// Nothing more to read: the connection is free at once.
		b.release(true)
		return resp, nil
	}
	resp.Body = b
	if gz && strings.EqualFold(resp.Header.Get("Content-Encoding"), "gzip") {
		resp.Body = &gzipBody{body: b}
		resp.Header.Del("Content-Encoding")
		resp.Header.Del("Content-Length")
		resp.ContentLength = -1
		resp.Uncompressed = true
	}
	return resp, nil
}

// write sends req's head and body with one write when they fit the buffer.
func (c *conn) write(req *http.Request, gz bool) error {
	w := c.bw
	method := cmp.Or(req.Method, http.MethodGet)
	host := cmp.Or(req.Host, req.URL.Host)
	_, _ = w.WriteString(method)
	_ = w.WriteByte(' ')
	if u := req.URL; u.Opaque != "" {
		_, _ = w.WriteString(u.RequestURI())
	} else {
		path := u.EscapedPath()
		if path == "" {
			path = "/"
		}
		_, _ = w.WriteString(path)
		if u.ForceQuery || u.RawQuery != "" {
			_ = w.WriteByte('?')
			_, _ = w.WriteString(u.RawQuery)
		}
	}
	_, _ = w.WriteString(" HTTP/1.1\r\nHost: ")
	_, _ = w.WriteString(host)
	_, _ = w.WriteString("\r\n")
	ua := "Go-http-client/1.1"
	if v, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(v) > 0 {
			ua = v[0]
		}
	}
	if ua != "" {
		_, _ = w.WriteString("User-Agent: ")
		_, _ = w.WriteString(ua)
		_, _ = w.WriteString("\r\n")
	}
	for k, vs := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // written above or below, as net/http does
		}
		for _, v := range vs {
			_, _ = w.WriteString(k)
			_, _ = w.WriteString(": ")
			_, _ = w.WriteString(strings.TrimSpace(v))
			_, _ = w.WriteString("\r\n")
		}
	}
	if req.Close && req.Header.Get("Connection") == "" {
		_, _ = w.WriteString("Connection: close\r\n")
	}
	if gz {
		_, _ = w.WriteString("Accept-Encoding: gzip\r\n")
	}
	hasBody := req.Body != nil && req.Body != http.NoBody
	chunked := hasBody && req.ContentLength <= 0
	switch {
	case chunked:
		_, _ = w.WriteString("Transfer-Encoding: chunked\r\n")
	case hasBody:
		_, _ = w.WriteString("Content-Length: ")
		_, _ = w.WriteString(strconv.FormatInt(req.ContentLength, 10))
		_, _ = w.WriteString("\r\n")
	case method == http.MethodPost || method == http.MethodPut || method == http.MethodPatch:
		_, _ = w.WriteString("Content-Length: 0\r\n")
	}
	_, _ = w.WriteString("\r\n")
	if hasBody {
		if err := writeBody(w, req, chunked); err != nil {
			return err
		}
	}
	return w.Flush()
}

func writeBody(w *bufio.Writer, req *http.Request, chunked bool) error {
	defer req.Body.Close()
	if chunked {
		cw := httputil.NewChunkedWriter(w)
		if _, err := io.Copy(cw, req.Body); err != nil {
			return err
		}
		if err := cw.Close(); err != nil {
			return err
		}
		_, err := w.WriteString("\r\n")
		return err
	}
	n, err := io.Copy(w, io.LimitReader(req.Body, req.ContentLength))
	if err != nil {
		return err
	}
	if n != req.ContentLength {
		return fmt.Errorf("h1: ContentLength=%d with a body of %d bytes", req.ContentLength, n)
	}
	return nil
}

// validate refuses, before anything is dialed, a request whose header
// fields could not be sent as they are.
func validate(req *http.Request) error {
	if !httpguts.ValidHostHeader(cmp.Or(req.Host, req.URL.Host)) {
		return errors.New("h1: invalid Host header")
	}
	for k, vs := range req.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return fmt.Errorf("h1: invalid header field name %q", k)
		}
		for _, v := range vs {
			if !httpguts.ValidHeaderFieldValue(v) {
				return fmt.Errorf("h1: invalid header field value for %q", k)
			}
		}
	}
	if !validMethod(cmp.Or(req.Method, http.MethodGet)) {
		return fmt.Errorf("h1: invalid method %q", req.Method)
	}
	return nil
}

func validMethod(m string) bool {
	return len(m) > 0 && strings.IndexFunc(m, func(r rune) bool { return !httpguts.IsTokenRune(r) }) < 0
}

// rewind returns req's body anew, when it can be had again.
func rewind(req *http.Request) (io.ReadCloser, bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return req.Body, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	b, err := req.GetBody()
	return b, err == nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// body is an answer's body: read to its end, it gives its connection back
// to the pool; closed earlier, it closes it.
type body struct {
	c    *conn
	ctx  context.Context
	stop func() bool
	src  framing
	keep bool // the answer allows the connection's reuse
	done bool
	err  error
}

func (b *body) Read(p []byte) (int, error) {
	if b.done {
		return 0, cmp.Or(b.err, io.EOF)
	}
	n, err := b.src.Read(p)
	switch {
	case err == io.EOF:
		b.release(true)
	case err != nil:
		if b.ctx.Err() != nil {
			err = context.Cause(b.ctx)
		}
		b.err = err
		b.release(false)
	}
	return n, err
}

func (b *body) Close() error {
	if !b.done {
		b.err = errClosed
		b.release(false)
	}
	return nil
}

// release ends the call: the connection goes back to the pool when the
// answer was read whole, allows it and the call's context never fired.
func (b *body) release(whole bool) {
	if b.done {
		return
	}
	b.done = true
	// Bytes after the answer's end are no part of any answer: a
	// connection holding some is not reused.
	if b.stop() && whole && b.keep && b.c.br.Buffered() == 0 {
		b.c.t.put(b.c)
		return
	}
	_ = b.c.nc.Close()
}

// gzipBody decodes a gzip answer with a pooled decoder.
type gzipBody struct {
	body *body
	zr   *gzip.Reader
	err  error
}

var gzipReaders sync.Pool

func (g *gzipBody) Read(p []byte) (int, error) {
	if g.err != nil {
		return 0, g.err
	}
	if g.zr == nil {
		zr, _ := gzipReaders.Get().(*gzip.Reader)
		var err error
		if zr == nil {
			zr, err = gzip.NewReader(g.body)
		} else {
			err = zr.Reset(g.body)
		}
		if err != nil {
			g.err = err
			return 0, err
		}
		g.zr = zr
	}
	n, err := g.zr.Read(p)
	if err == io.EOF {
		// The gzip stream ended: what follows it, up to the body's end,
		// is read so that the connection can go back to the pool.
		if _, derr := io.CopyN(io.Discard, g.body, 512); derr != io.EOF {
			g.body.release(false)
		}
	}
	if err != nil {
		g.err = err
	}
	return n, err
}

func (g *gzipBody) Close() error {
	if g.zr != nil {
		gzipReaders.Put(g.zr)
		g.zr = nil
	}
	if g.err == nil {
		g.err = errClosed
	}
	return g.body.Close()
}

// TLSConfigurable is a transport that can make a copy of itself whose TLS
// connections are configured by apply (a CA of its own, a client
// certificate, another server name), keeping every other setting.
type TLSConfigurable interface {
	WithTLS(apply func(*tls.Config)) http.RoundTripper
}

// WithTLS returns a copy of rt whose TLS connections apply sets up, or
// false when rt cannot be configured: rt is a TLSConfigurable or an
// *http.Transport.
func WithTLS(rt http.RoundTripper, apply func(*tls.Config)) (http.RoundTripper, bool) {
	switch t := rt.(type) {
	case TLSConfigurable:
		return t.WithTLS(apply), true
	case *http.Transport:
		c := t.Clone()
		c.TLSClientConfig = configured(c.TLSClientConfig, apply)
		return c, true
	}
	return nil, false
}

// WithTLS is a transport with t's settings, a pool of its own and TLS
// connections configured by apply.
func (t *Transport) WithTLS(apply func(*tls.Config)) http.RoundTripper {
	c := &Transport{
		DialContext:         t.DialContext,
		TLSClientConfig:     configured(t.TLSClientConfig, apply),
		TLSHandshakeTimeout: t.TLSHandshakeTimeout,
		MaxIdleConnsPerHost: t.MaxIdleConnsPerHost,
		IdleConnTimeout:     t.IdleConnTimeout,
		DisableCompression:  t.DisableCompression,
		Proxy:               t.Proxy,
		Fallback:            t.Fallback,
	}
	if t.Fallback != nil {
		if fb, ok := WithTLS(t.Fallback, apply); ok {
			c.Fallback = fb
		}
	}
	return c
}

// configured is a clone of cfg (an empty one when nil) set up by apply.
func configured(cfg *tls.Config, apply func(*tls.Config)) *tls.Config {
	if cfg == nil {
		cfg = &tls.Config{}
	} else {
		cfg = cfg.Clone()
	}
	apply(cfg)
	return cfg
}
