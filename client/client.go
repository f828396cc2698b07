// Package client is the Go client of the infractions aggregator's REST API
// (api/openapi.yaml): synchronous queries, answered whole or streamed source
// by source, vouchers, asynchronous queries, and the verification of their
// webhook deliveries.
//
// Results are the typed documents of package aggregator. Every error answer
// of the server is a *problem.Problem (reachable with errors.As), so code
// branches on the problem's slug with errors.Is, never on prose:
//
//	res, err := c.ByDomain(ctx, "AB123CD")
//	switch {
//	case errors.Is(err, problem.NoSourceAvailable): // every source failed or was skipped
//	case errors.Is(err, problem.InvalidQuery):      // bad input; see Problem.InvalidParams
//	case err != nil:
//	}
//	for source, p := range client.SourceErrors(res) {
//		if errors.Is(p, problem.CircuitOpen) { … }
//	}
//
// A Client is safe for concurrent use.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// DefaultUserAgent is the User-Agent of a Client without WithUserAgent.
const DefaultUserAgent = "aggregator-go-client/1"

// Client calls one aggregator.
type Client struct {
	base      string // scheme://host[/prefix], without a trailing '/'
	http      *http.Client
	apiKey    string
	userAgent string
	// streamFormat is the media type streamed queries ask for
	// (WithStreamFormat); NDJSON when empty.
	streamFormat string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient sends the requests with hc instead of http.DefaultClient.
// Bound each call with its context rather than hc.Timeout: a query's own
// budget (WithTimeout) is spent on the server.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) {
		if hc != nil {
			c.http = hc
		}
	}
}

// WithAPIKey sends key as X-API-Key on every request, as an aggregator
// configured with server.api_keys requires.
func WithAPIKey(key string) Option {
	return func(c *Client) { c.apiKey = key }
}

// WithUserAgent sets the User-Agent of every request.
func WithUserAgent(ua string) Option {
	return func(c *Client) { c.userAgent = ua }
}

// New returns a client of the aggregator at baseURL, an absolute http or
// https URL ("http://127.0.0.1:8080"), possibly with a path prefix when the
// API is served below one.
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("client: base URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q: want an absolute http or https URL", baseURL)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("client: base URL %q: want no query, fragment or user info", baseURL)
	}
	c := &Client{
		base:      strings.TrimSuffix(u.String(), "/"),
		http:      http.DefaultClient,
		userAgent: DefaultUserAgent,
	}
	for _, opt := range opts {
		opt(c)
	}
	return c, nil
}

// maxErrorBody bounds how much of an error answer is read: a problem, even
// no-source-available with every source, is far smaller.
const maxErrorBody = 1 << 20

// newRequest builds a request for path (already escaped, starting with
// '/') and query, with a JSON body when body is not nil.
func (c *Client) newRequest(ctx context.Context, method, path string, query url.Values, body any) (*http.Request, error) {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("client: encoding the request: %w", err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	if c.userAgent != "" {
		req.Header.Set("User-Agent", c.userAgent)
	}
	if c.apiKey != "" {
		req.Header.Set("X-API-Key", c.apiKey)
	}
	return req, nil
}

// do sends req. An answer with status want is returned to the caller, who
// closes its body; any other is read, closed and returned as an error
// (see errorFrom).
func (c *Client) do(req *http.Request, want int) (*http.Response, error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err // *url.Error; wraps the context's error when it ended
	}
	if resp.StatusCode == want {
		return resp, nil
	}
	defer resp.Body.Close()
	return nil, errorFrom(resp)
}

// doJSON sends req and decodes an answer of status want into v.
func (c *Client) doJSON(req *http.Request, want int, v any) (*http.Response, error) {
	resp, err := c.do(req, want)
	if err != nil {
		return nil, err
	}
	defer func() {
		// Drain the trailing newline, so the connection can be reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
	}()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return nil, fmt.Errorf("client: decoding the answer of %s %s: %w", req.Method, req.URL.Path, err)
	}
	return resp, nil
}
