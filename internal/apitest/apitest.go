// Package apitest checks HTTP responses against the OpenAPI document of
// package api (api/openapi.yaml), so that the server's tests catch any
// drift between what the server answers and what the contract says.
//
// Typical use, against an httptest server or a handler:
//
//	v := apitest.New(t)
//	resp, err := http.Get(srv.URL + "/v1/infractions?domain=AB123CD")
//	…
//	body := v.CheckResponse(t, resp) // reads and closes resp.Body
//
//	rec := httptest.NewRecorder()
//	handler.ServeHTTP(rec, req)
//	v.CheckRecorder(t, req, rec)
//
// A check fails (t.Errorf, the test goes on) when the request's method and
// path match no operation of the document, when the status is not
// documented for that operation, when a documented response header is
// missing or malformed, when the Content-Type is not one the document
// declares for that status, when a JSON body (application/json or any
// +json type) does not match the declared schema, or when a JSON answer
// lacks X-Content-Type-Options: nosniff (the document's description says
// every one has it). Bodies of other types (text/html, text/plain,
// application/pdf, application/yaml…) are checked for their content type
// only, but for the streams of GET /v1/infractions (text/event-stream,
// application/x-ndjson), whose events are checked one by one against the
// schema the document gives each (see Stream, which reads them as they
// arrive).
//
// Two answers need no operation of their own: a 404 for a path the document
// does not have, and a 405 for a path it has with another method. Both must
// be application/problem+json matching the Problem schema, and a 405 must
// carry an Allow header. Under /v1/admin/ and /debug/pprof/ such a request
// may instead get the 401 (with a Bearer challenge) or 403 of the admin
// routes, and any request may get the 503 overloaded (with Retry-After), as
// the document's description says.
//
// The request is only used to find the operation, by method and path alone:
// its host, scheme and query do not matter, and it is not itself validated,
// so tests can send deliberately invalid requests and check the 400.
package apitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/multas/aggregator/api"
)

// maxBodyInError bounds how much of a body a failure message quotes.
const maxBodyInError = 4 << 10

// Validator checks responses against the OpenAPI document. It is safe for
// concurrent use by parallel tests.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
}

// load parses and validates api.Spec once per test binary.
var load = sync.OnceValues(func() (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.Spec)
	if err != nil {
		return nil, fmt.Errorf("loading api/openapi.yaml: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("validating api/openapi.yaml: %w", err)
	}
	// The document's only server is relative ("/"); routing without servers
	// matches requests by path alone, whatever host the test server has.
	doc.Servers = nil
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("routing api/openapi.yaml: %w", err)
	}
	return &Validator{doc: doc, router: router}, nil
})

// New returns the Validator of api.Spec, loading the document on first use.
// It stops the test (t.Fatalf) if the document does not load or validate.
func New(t testing.TB) *Validator {
	t.Helper()
	v, err := load()
	if err != nil {
		t.Fatalf("apitest: %v", err)
	}
	return v
}

// Check reports with t.Errorf, quoting the body, every way in which a
// response of the given status, header and body to req departs from the
// document. header may be nil (no headers).
func (v *Validator) Check(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	if header == nil {
		header = http.Header{}
	}
	if err := v.check(req, status, header, body); err != nil {
		t.Errorf("apitest: %s %s answered %d (Content-Type %q) against api/openapi.yaml: %v\nbody: %s",
			req.Method, req.URL.RequestURI(), status, header.Get("Content-Type"), err, quote(body))
	}
}

// CheckResponse reads and closes resp.Body, checks the response against
// the request that produced it (resp.Request, as set by http.Client), and
// returns the body.
func (v *Validator) CheckResponse(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Errorf("apitest: reading the response body: %v", err)
	}
	if resp.Request == nil {
		t.Errorf("apitest: response without its request; use Check")
		return body
	}
	v.Check(t, resp.Request, resp.StatusCode, resp.Header, body)
	return body
}

// CheckRecorder checks what a handler wrote to rec in answer to req.
func (v *Validator) CheckRecorder(t testing.TB, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	res := rec.Result()
	v.Check(t, req, res.StatusCode, res.Header, rec.Body.Bytes())
}

func (v *Validator) check(req *http.Request, status int, header http.Header, body []byte) error {
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	head := method == http.MethodHead
	if head {
		method = http.MethodGet // HEAD answers like GET, without a body
	}
	mediaType := mediaTypeOf(header)
	if isJSON(mediaType) && header.Get("X-Content-Type-Options") != "nosniff" {
		return fmt.Errorf("a %s answer without X-Content-Type-Options: nosniff", mediaType)
	}
	route, params, err := v.find(method, req.URL)
	if err != nil {
		return v.checkUnrouted(method, req.URL, status, header, body)
	}

	rvi := &openapi3filter.RequestValidationInput{
		Request:    routingRequest(method, req.URL),
		PathParams: params,
		Route:      route,
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: rvi,
		Status:                 status,
		Header:                 header,
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			ExcludeResponseBody:   head || !isJSON(mediaType),
			MultiError:            true,
		},
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return err
	}

	// ValidateResponse checked the content type of JSON bodies; check it
	// for the others, whose bodies it was told to skip.
	ref := route.Operation.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return nil // undocumented statuses were rejected above
	}
	content := ref.Value.Content
	if len(content) == 0 {
		if len(body) > 0 {
			return fmt.Errorf("status %d of %s %s documents no body, but the answer has one", status, route.Method, route.Path)
		}
		return nil
	}
	if content.Get(header.Get("Content-Type")) == nil {
		return fmt.Errorf("Content-Type %q is not declared for status %d of %s %s (declared: %s)",
			header.Get("Content-Type"), status, route.Method, route.Path, strings.Join(keys(content), ", "))
	}
	if isStream(mediaType) && !head && body != nil {
		return v.checkStream(req, status, mediaType, body)
	}
	return nil
}

// checkUnrouted accepts the two answers a request the document has no
// operation for may get: 404 for an unknown path, 405 for a known path with
// another method. Both are problems.
func (v *Validator) checkUnrouted(method string, u *url.URL, status int, header http.Header, body []byte) error {
	known := v.pathKnown(u)
	admin := u.Path == "/v1/admin" || strings.HasPrefix(u.Path, "/v1/admin/") ||
		u.Path == "/debug/pprof" || strings.HasPrefix(u.Path, "/debug/pprof/")
	switch {
	case admin && status == http.StatusUnauthorized:
		if !strings.HasPrefix(header.Get("WWW-Authenticate"), "Bearer") {
			return errors.New("a 401 answer without a Bearer challenge")
		}
	case admin && status == http.StatusForbidden:
	case status == http.StatusServiceUnavailable:
		if header.Get("Retry-After") != "1" {
			return errors.New("a 503 overloaded answer without Retry-After: 1")
		}
	case status == http.StatusNotFound && !known:
	case status == http.StatusMethodNotAllowed && known:
		if header.Get("Allow") == "" {
			return errors.New("a 405 answer without an Allow header")
		}
	case known:
		return fmt.Errorf("the document has no %s operation for this path (only a 405 may answer it)", method)
	default:
		return errors.New("the document has no such path (only a 404 may answer it)")
	}
	if mt := mediaTypeOf(header); mt != "application/problem+json" {
		return fmt.Errorf("a %d answer must be application/problem+json, not %q", status, mt)
	}
	schema := v.doc.Components.Schemas["Problem"]
	if schema == nil || schema.Value == nil {
		return errors.New("the document has no Problem schema")
	}
	value, err := openapi3filter.JSONBodyDecoder(bytes.NewReader(body), header, schema, nil)
	if err != nil {
		return fmt.Errorf("a %d answer is not JSON: %w", status, err)
	}
	opts := []openapi3.SchemaValidationOption{openapi3.VisitAsResponse(), openapi3.MultiErrors()}
	if v.doc.IsOpenAPI31OrLater() {
		opts = append(opts, openapi3.EnableJSONSchema2020())
	}
	if err := schema.Value.VisitJSON(value, opts...); err != nil {
		return fmt.Errorf("a %d answer does not match the Problem schema: %w", status, err)
	}
	return nil
}

// find returns the operation of method and u's path.
func (v *Validator) find(method string, u *url.URL) (*routers.Route, map[string]string, error) {
	return v.router.FindRoute(routingRequest(method, u))
}

// pathKnown reports whether the document has u's path for some method.
func (v *Validator) pathKnown(u *url.URL) bool {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if _, _, err := v.find(m, u); err == nil {
			return true
		}
	}
	return false
}

// routingRequest is a host-independent request for method and u's path.
// The path stays escaped, so that an escaped "/" inside a path parameter
// (an infraction id, say) does not split it.
func routingRequest(method string, u *url.URL) *http.Request {
	return &http.Request{
		Method: method,
		URL:    &url.URL{Path: u.EscapedPath(), RawQuery: u.RawQuery},
		Header: http.Header{},
	}
}

func mediaTypeOf(h http.Header) string {
	ct := h.Get("Content-Type")
	if ct == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(ct))
	}
	return mt
}

func isJSON(mediaType string) bool {
	return mediaType == "application/json" || strings.HasSuffix(mediaType, "+json")
}

func keys(c openapi3.Content) []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// quote renders a body for a failure message, bounded.
func quote(body []byte) string {
	if len(body) == 0 {
		return "(empty)"
	}
	s := string(bytes.ToValidUTF8(body, []byte("\uFFFD")))
	if len(s) > maxBodyInError {
		s = s[:maxBodyInError] + fmt.Sprintf("… (%d bytes in all)", len(body))
	}
	return s
}
