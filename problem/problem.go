// Package problem implements RFC 9457 problem details: the catalogue of the
// problem types this service answers with, and their JSON form.
//
// A Problem is an error. Integrators (and our own code) branch on its slug
// with errors.Is, never on its prose:
//
//	if errors.Is(err, problem.CircuitOpen) { … }
package problem

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/multas/aggregator/correlation"
)

// Slug names a problem type; the type URI is the configured base followed by
// the slug. A Slug is an error so that errors.Is(err, problem.NotFound) works
// on any error wrapping a *Problem of that type.
type Slug string

func (s Slug) Error() string { return string(s) }

// The problem types of SPEC 5 (watch-limit: SPEC 15).
const (
	CircuitOpen       Slug = "circuit-open"
	RateLimited       Slug = "rate-limited"
	SourceTimeout     Slug = "source-timeout"
	SourceUnavailable Slug = "source-unavailable"
	SourceRejected    Slug = "source-rejected"
	SourceError       Slug = "source-error"
	DeadlineExceeded  Slug = "deadline-exceeded"
	NoSourceAvailable Slug = "no-source-available"
	InvalidQuery      Slug = "invalid-query"
	Unauthorized      Slug = "unauthorized"
	Forbidden         Slug = "forbidden"
	NotFound          Slug = "not-found"
	MethodNotAllowed  Slug = "method-not-allowed"
	RequestTimeout    Slug = "request-timeout"
	PayloadTooLarge   Slug = "payload-too-large"
	WatchLimit        Slug = "watch-limit"
	TooManyRequests   Slug = "too-many-requests"
	Overloaded        Slug = "overloaded"
	Internal          Slug = "internal"
)

// Kind describes one problem type: its title, usual HTTP status, and the
// prose of its documentation page.
type Kind struct {
	Slug   Slug
	Title  string
	Status int
	About  string
}

// Catalogue lists every problem type the service can answer with.
var Catalogue = []Kind{
	{CircuitOpen, "Source not consulted: circuit open", http.StatusServiceUnavailable,
		"The source was not consulted because its circuit breaker is open (recent calls failed), forced open by an operator, or its single half-open probe is in flight. retry_after says when the breaker lets calls through again."},
	{RateLimited, "Source rate limit reached", http.StatusServiceUnavailable,
		"The portal's rate limit (its Retry-After pause or our budget for it) kept the call from going, or the portal answered 429. This is not an outage and never opens a breaker. retry_after says when to try again."},
	{SourceTimeout, "Source timed out", http.StatusGatewayTimeout,
		"The source was consulted but did not answer within its own configured timeout."},
	{SourceUnavailable, "Source unavailable", http.StatusBadGateway,
		"The source was consulted but the connection failed or the portal answered with a server error (5xx)."},
	{SourceRejected, "Source rejected the request", http.StatusBadGateway,
		"The portal refused the request with a client error (4xx other than 404 and 429)."},
	{SourceError, "Source answer unreadable", http.StatusBadGateway,
		"The portal answered, but the answer could not be read: invalid JSON, larger than the configured limit, or not matching the configured mapping."},
	{DeadlineExceeded, "Query deadline exceeded", http.StatusGatewayTimeout,
		"The query's own time budget ran out before this source answered. The source is not at fault; a longer timeout may help."},
	{NoSourceAvailable, "No source available", http.StatusServiceUnavailable,
		"No source answered the query. The sources member lists why, source by source."},
	{InvalidQuery, "Invalid query", http.StatusBadRequest,
		"The request is malformed. invalid_params names each bad parameter and why."},
	{Unauthorized, "Unauthorized", http.StatusUnauthorized,
		"Credentials are missing or not recognised."},
	{Forbidden, "Forbidden", http.StatusForbidden,
		"The credentials do not allow this, or this surface is disabled by configuration."},
	{NotFound, "Not found", http.StatusNotFound,
		"No such route, source, query, dead-letter entry or watch (a watch of another API key is not found either)."},
	{MethodNotAllowed, "Method not allowed", http.StatusMethodNotAllowed,
		"The route exists but does not accept this HTTP method; the Allow header lists those it does."},
	{RequestTimeout, "Request timeout", http.StatusRequestTimeout,
		"The request's body did not arrive within server.read_timeout of the request's start, so it was not served; the connection is closed. Send the whole request at once, and again if it was cut off."},
	{PayloadTooLarge, "Payload too large", http.StatusRequestEntityTooLarge,
		"The request's body is over 64 KiB, the most any endpoint takes; a Content-Length over it is refused before the body is read. The connection is closed."},
	{WatchLimit, "Watch limit reached", http.StatusConflict,
		"The API key already has as many watches as watches.max_per_key allows. Delete watches it no longer needs (DELETE /v1/watches/{id}) before creating others."},
	{TooManyRequests, "Too many requests", http.StatusTooManyRequests,
		"The client's own request budget is spent. Retry-After says when it refills."},
	{Overloaded, "Overloaded", http.StatusServiceUnavailable,
		"This replica is already serving as many requests as server.max_in_flight allows, so it answered at once without doing the work. Retry-After (1 second) says when to try again; another replica may have room now."},
	{Internal, "Internal error", http.StatusInternalServerError,
		"Something went wrong inside the service. Nothing more is disclosed; the operators have the details in their logs."},
}

// Lookup returns the catalogue entry of slug.
func Lookup(slug Slug) (Kind, bool) {
	for _, k := range Catalogue {
		if k.Slug == slug {
			return k, true
		}
	}
	return Kind{}, false
}

// InvalidParam names one bad input parameter (RFC 9457 §3 example extension).
type InvalidParam struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Problem is an RFC 9457 problem details object.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`

	// RetryAfter, in whole seconds, tells when the condition may clear.
	RetryAfter *int `json:"retry_after,omitempty"`
	// InvalidParams lists the bad inputs of an invalid-query problem.
	InvalidParams []InvalidParam `json:"invalid_params,omitempty"`
	// RequestID is the X-Request-Id of the answer that carries the problem
	// as its document (SPEC 10); Write fills it in. A problem inside a
	// result (a source's entry) has none.
	RequestID string `json:"request_id,omitempty"`

	// Slug is the problem's type without the base URI.
	Slug Slug `json:"-"`
}

func (p *Problem) Error() string {
	if p.Detail != "" {
		return p.Title + ": " + p.Detail
	}
	return p.Title
}

// Is reports whether target is the problem's slug. A problem decoded from
// JSON, whose Slug is not set, is matched by the slug its Type ends with.
func (p *Problem) Is(target error) bool {
	s, ok := target.(Slug)
	return ok && s != "" && s == p.slug()
}

func (p *Problem) slug() Slug {
	if p == nil {
		return ""
	}
	if p.Slug != "" {
		return p.Slug
	}
	return SlugOf(p.Type)
}

// SlugOf returns the slug a problem type URI ends with: the text after its
// last '/', whatever the base URI ("https://x.example/problems/circuit-open"
// is CircuitOpen). It is how a client, which does not know the server's
// problems.base_uri, reads the Slug of a decoded Problem.
func SlugOf(typeURI string) Slug {
	return Slug(typeURI[strings.LastIndexByte(typeURI, '/')+1:])
}

// SetRetryAfter sets RetryAfter to d rounded up to whole seconds, at least 1.
func (p *Problem) SetRetryAfter(d time.Duration) {
	s := Seconds(d)
	p.RetryAfter = &s
}

// Seconds rounds d up to whole seconds, never below 1: the form of a
// Retry-After delay.
func Seconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return s
}

// Catalog makes problems whose type URIs start with Base.
type Catalog struct {
	Base string
}

// New returns a problem of type slug with the catalogue's title and status.
func (c Catalog) New(slug Slug, detail string) *Problem {
	k, ok := Lookup(slug)
	if !ok {
		k = Kind{Slug: slug, Title: string(slug), Status: http.StatusInternalServerError}
	}
	return &Problem{Type: c.Base + string(slug), Title: k.Title, Status: k.Status, Detail: detail, Slug: slug}
}

// Newf is New with a formatted detail.
func (c Catalog) Newf(slug Slug, format string, args ...any) *Problem {
	return c.New(slug, fmt.Sprintf(format, args...))
}

// Invalid returns an invalid-query problem naming each bad parameter.
func (c Catalog) Invalid(params ...InvalidParam) *Problem {
	p := c.New(InvalidQuery, "")
	p.InvalidParams = params
	switch len(params) {
	case 0:
		p.Detail = "The request is invalid."
	case 1:
		p.Detail = "Invalid parameter " + params[0].Name + ": " + params[0].Reason + "."
	default:
		p.Detail = strconv.Itoa(len(params)) + " parameters are invalid."
	}
	return p
}

// ContentType is the media type of a problem document.
const ContentType = "application/problem+json"

// Write sends p as the response, with its status, X-Content-Type-Options:
// nosniff (SPEC 9: every JSON answer) and, when RetryAfter is set, a
// Retry-After header. extra, when not nil, is encoded in place of p
// (a struct embedding *Problem with extension members). When the answer
// already has an X-Request-Id header and p no RequestID, p takes it, so
// that every problem document carries the id of its answer.
func Write(w http.ResponseWriter, p *Problem, extra any) {
	h := w.Header()
	if p.RequestID == "" {
		p.RequestID = h.Get(correlation.Header)
	}
	h.Set("Content-Type", ContentType)
	h.Set("X-Content-Type-Options", "nosniff")
	if p.RetryAfter != nil {
		h.Set("Retry-After", strconv.Itoa(*p.RetryAfter))
	}
	w.WriteHeader(p.Status)
	var v any = p
	if extra != nil {
		v = extra
	}
	_ = json.NewEncoder(w).Encode(v)
}
