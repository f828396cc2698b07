package sources

import (
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"golang.org/x/net/idna"
)

// send sends a portal request as the source's client would, redirects
// (SPEC 9) included. A client with no cookie jar and no timeout (the
// product's) is not used itself: the request goes to its transport, and
// follow does what Client.Do would. Client.Do costs ~6 allocations and
// ~5.7 KB on every request (a copy of its header, of its URL, its redirect
// bookkeeping) whether or not a redirect ever comes; a query asks up to
// every portal. A jar or a timeout (sessions have a jar; callers and tests
// may set a timeout) keeps Client.Do, which applies them.
func (s *Source) send(req *http.Request) (*http.Response, error) {
	c := s.client
	if c.Jar != nil || c.Timeout != 0 || c.CheckRedirect == nil {
		return c.Do(req)
	}
	rt := c.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	return follow(rt, c.CheckRedirect, req)
}

// follow sends ireq with rt, and follows the redirects that check allows
// as http.Client.Do does for a client without jar or timeout, so that a
// caller sees the same answers and errors: the redirect codes, methods and
// bodies of net/http's redirectBehavior, Location resolved against the
// request's URL, the first request's header fields copied to each next one
// (the sensitive ones dropped once the host name changes, those of the body
// once the body is), a Referer, and the previous answer drained (2 KB at
// most) and closed. A refused redirect returns its answer, its body closed,
// with the error. Errors are *url.Error without a URL (a URL may hold a
// plate), which transportError reads.
//
// ireq's header is not written to: it may be the source's own (see
// request.build). Each next request has a header of its own.
func follow(rt http.RoundTripper, check func(*http.Request, []*http.Request) error, ireq *http.Request) (*http.Response, error) {
	var (
		req            = ireq
		via            []*http.Request // the requests sent before the next one
		includeBody    = true          // false once a hop dropped the body
		stripSensitive = false
	)
	fail := func(err error) error {
		return &url.Error{Op: urlErrorOp(ireq.Method), Err: err}
	}
	for {
		resp, err := roundTrip(rt, req)
		if err != nil {
			return nil, fail(err)
		}
		method, redirect, withBody := redirectBehavior(req.Method, resp, ireq)
		if !redirect {
			return resp, nil
		}
		if !withBody {
			includeBody = false
		}
		closeBody(req)
		// A 3xx without a Location is the answer (net/http issues
		// #17773 and #49281).
		loc := resp.Header.Get("Location")
		if loc == "" {
			return resp, nil
		}
		u, err := req.URL.Parse(loc)
		if err != nil {
			// net/http's error here quotes the Location, which may hold
			// a plate; a redirect we cannot judge is not followed.
			resp.Body.Close()
			return resp, fail(errBadLocation)
		}
		via = append(via, req)

		next := &http.Request{Method: method, Response: resp, URL: u, Header: make(http.Header, len(ireq.Header)+1)}
		if req.Host != "" && req.Host != req.URL.Host {
			// A configured Host stays on a relative Location (net/http
			// issue #22233).
			if lu, _ := url.Parse(loc); lu != nil && !lu.IsAbs() {
				next.Host = req.Host
			}
		}
		next = next.WithContext(ireq.Context())
		if includeBody && ireq.GetBody != nil {
			body, err := ireq.GetBody()
			if err != nil {
				resp.Body.Close()
				return nil, fail(err)
			}
			next.Body, next.GetBody, next.ContentLength = body, ireq.GetBody, ireq.ContentLength
		}
		if !stripSensitive && via[0].URL.Host != u.Host && !shouldCopyHeaderOnRedirect(via[0].URL, u) {
			stripSensitive = true
		}
		copyHeader(next.Header, ireq.Header, stripSensitive, !includeBody)
		if ref := refererForURL(req.URL, u, next.Header.Get("Referer")); ref != "" {
			next.Header.Set("Referer", ref)
		}

		err = check(next, via)
		if err == http.ErrUseLastResponse {
			return resp, nil
		}
		// Read a little of the answer so that its connection is reused.
		const maxBodySlurpSize = 2 << 10
		if resp.ContentLength == -1 || resp.ContentLength <= maxBodySlurpSize {
			_, _ = io.CopyN(io.Discard, resp.Body, maxBodySlurpSize)
		}
		resp.Body.Close()
		if err != nil {
			// The answer goes with the error, as from Client.Do: its
			// status is the call's.
			return resp, fail(err)
		}
		req = next
	}
}

// errBadLocation is the cause of a redirect whose Location is not a URL.
var errBadLocation = &redirectError{"redirect to a Location that is not a URL not followed"}

// roundTrip sends one request as net/http's send does for a client without
// jar or timeout: the URL's user info as Basic authentication unless the
// request has an Authorization, a nil answer without error refused, a nil
// body made empty.
func roundTrip(rt http.RoundTripper, req *http.Request) (*http.Response, error) {
	if u := req.URL.User; u != nil && req.Header.Get("Authorization") == "" {
		password, _ := u.Password()
		fork := *req
		fork.Header = req.Header.Clone() // never the source's own
		if fork.Header == nil {
			fork.Header = make(http.Header)
		}
		fork.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+password)))
		req = &fork
	}
	if req.Header == nil {
		// A transport may count on a header (net/http guarantees one).
		fork := *req
		fork.Header = make(http.Header)
		req = &fork
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		// The transport closed the request's body. A response that
		// came with the error is ignored, as net/http does.
		if tlsErr, ok := err.(tls.RecordHeaderError); ok && string(tlsErr.RecordHeader[:]) == "HTTP/" {
			err = http.ErrSchemeMismatch
		}
		return nil, err
	}
	if resp == nil {
		closeBody(req)
		return nil, fmt.Errorf("http: RoundTripper implementation (%T) returned a nil *Response with a nil error", rt)
	}
	if resp.Body == nil {
		if resp.ContentLength > 0 && req.Method != http.MethodHead {
			return nil, fmt.Errorf("http: RoundTripper implementation (%T) returned a *Response with content length %d but a nil Body", rt, resp.ContentLength)
		}
		resp.Body = http.NoBody
	}
	return resp, nil
}

// redirectBehavior is net/http's: whether the answer to a request of
// reqMethod is a redirect to follow, with which method, and whether the
// body goes along. 301, 302 and 303 turn anything but GET and HEAD into a
// GET without body; 307 and 308 keep method and body, and are the answer
// when the body cannot be had again (no GetBody).
func redirectBehavior(reqMethod string, resp *http.Response, ireq *http.Request) (method string, redirect, includeBody bool) {
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther:
		method = reqMethod
		if reqMethod != http.MethodGet && reqMethod != http.MethodHead {
			method = http.MethodGet
		}
		return method, true, false
	case http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		if ireq.GetBody == nil && outgoingLength(ireq) != 0 {
			return reqMethod, false, true
		}
		return reqMethod, true, true
	}
	return "", false, false
}

// outgoingLength is net/http's Request.outgoingLength: the body's length,
// -1 when unknown, 0 without a body.
func outgoingLength(r *http.Request) int64 {
	if r.Body == nil || r.Body == http.NoBody {
		return 0
	}
	if r.ContentLength != 0 {
		return r.ContentLength
	}
	return -1
}

// copyHeader copies the first request's fields src to dst, as net/http's
// header copier does for a client without jar: without Authorization,
// cookies and their kin when stripSensitive, without the fields of the body
// when stripBody. The values are shared, as there: nothing writes into
// them.
func copyHeader(dst, src http.Header, stripSensitive, stripBody bool) {
	for k, vv := range src {
		switch http.CanonicalHeaderKey(k) {
		case "Authorization", "Www-Authenticate", "Cookie", "Cookie2", "Proxy-Authorization", "Proxy-Authenticate":
			if stripSensitive {
				continue
			}
		case "Content-Encoding", "Content-Language", "Content-Location", "Content-Type":
			if stripBody {
				continue
			}
		}
		dst[k] = vv
	}
}

// shouldCopyHeaderOnRedirect is net/http's: sensitive fields go on to the
// same host name or a subdomain of it, compared in their IDNA ASCII form
// but otherwise as written (so a change of case drops them).
func shouldCopyHeaderOnRedirect(initial, dest *url.URL) bool {
	ihost, dhost := idnaHost(initial), idnaHost(dest)
	if dhost == ihost {
		return true
	}
	if strings.ContainsAny(dhost, ":%") {
		return false
	}
	return strings.HasSuffix(dhost, ihost) && dhost[len(dhost)-len(ihost)-1] == '.'
}

// idnaHost is u's host name in IDNA ASCII form, or as written when it has
// none.
func idnaHost(u *url.URL) string {
	host := u.Hostname()
	for i := 0; i < len(host); i++ {
		if host[i] >= 0x80 {
			if v, err := idna.Lookup.ToASCII(host); err == nil {
				return v
			}
			return host
		}
	}
	return host
}

// refererForURL is net/http's: the previous URL without its user info,
// unless the request already has a Referer, and none from https to http.
func refererForURL(last, next *url.URL, explicit string) string {
	if last.Scheme == "https" && next.Scheme == "http" {
		return ""
	}
	if explicit != "" {
		return explicit
	}
	ref := last.String()
	if last.User != nil {
		ref = strings.Replace(ref, last.User.String()+"@", "", 1)
	}
	return ref
}

// urlErrorOp is net/http's (*url.Error).Op for a request method: "Get"
// for GET (and an empty method), "Post" for POST.
func urlErrorOp(method string) string {
	if method == "" {
		return "Get"
	}
	return method[:1] + strings.ToLower(method[1:])
}

// closeBody closes a request's body, if it has one.
func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}
