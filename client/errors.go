package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/problem"
)

// Unavailable is the error of a query that no source answered: the 503
// no-source-available problem, with the sources member that says why,
// source by source. errors.Is(err, problem.NoSourceAvailable) reports it,
// and errors.As finds its *problem.Problem too.
type Unavailable struct {
	*problem.Problem
	// Sources are the entries of the query, as in a Result: each with the
	// problem that kept it from succeeding.
	Sources []aggregator.SourceResult `json:"sources"`
}

// Unwrap returns the problem, for errors.As.
func (u *Unavailable) Unwrap() error { return u.Problem }

// SourceErrors returns the problem of every source of r that did not
// succeed, by source id; nil when r is complete (or nil). Each is an error
// to branch on with errors.Is:
//
//	for id, p := range client.SourceErrors(res) {
//		switch {
//		case errors.Is(p, problem.CircuitOpen): // not consulted; see p.RetryAfter
//		case errors.Is(p, problem.SourceUnavailable):
//		}
//	}
func SourceErrors(r *aggregator.Result) map[string]*problem.Problem {
	if r == nil {
		return nil
	}
	var out map[string]*problem.Problem
	for _, e := range r.Sources {
		if e.Problem == nil {
			continue
		}
		if out == nil {
			out = make(map[string]*problem.Problem)
		}
		out[e.Source] = e.Problem
	}
	return out
}

// RetryAfter returns how long to wait before trying again when err is (or
// wraps) a problem that says so: its retry_after member, or the answer's
// Retry-After header. It works on the problems of SourceErrors as well.
func RetryAfter(err error) (time.Duration, bool) {
	var p *problem.Problem
	if !errors.As(err, &p) || p == nil || p.RetryAfter == nil {
		return 0, false
	}
	return time.Duration(*p.RetryAfter) * time.Second, true
}

// errorFrom turns an error answer into an error: a *problem.Problem, or an
// *Unavailable for no-source-available. An answer that is not a problem
// document (a proxy's HTML page, say) becomes a problem of slug Internal,
// type about:blank, with the answer's status.
func errorFrom(resp *http.Response) error {
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if err != nil {
		return foreign(resp, "Reading the answer failed: "+err.Error())
	}
	p, ok := decodeProblem(resp.Header.Get("Content-Type"), body)
	if !ok {
		ct := resp.Header.Get("Content-Type")
		if ct == "" {
			ct = "no content type"
		}
		return foreign(resp, fmt.Sprintf("The server answered %d with %s, not a problem document.", resp.StatusCode, ct))
	}
	if p.Status == 0 {
		p.Status = resp.StatusCode
	}
	if p.RetryAfter == nil {
		p.RetryAfter = retryAfterHeader(resp.Header.Get("Retry-After"), time.Now())
	}
	if p.Slug == problem.NoSourceAvailable {
		u := &Unavailable{Problem: p}
		var extra struct {
			Sources []aggregator.SourceResult `json:"sources"`
		}
		if json.Unmarshal(body, &extra) == nil {
			u.Sources = extra.Sources
			for i := range u.Sources {
				setSlug(u.Sources[i].Problem)
			}
		}
		return u
	}
	return p
}

// decodeProblem reads body as a problem document when its media type is
// JSON and it has a type or a title.
func decodeProblem(contentType string, body []byte) (*problem.Problem, bool) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || (mt != problem.ContentType && mt != "application/json") {
		return nil, false
	}
	var p problem.Problem
	if err := json.Unmarshal(body, &p); err != nil || (p.Type == "" && p.Title == "") {
		return nil, false
	}
	if p.Type == "" {
		p.Type = "about:blank" // RFC 9457 §4.2.1
	}
	setSlug(&p)
	return &p, true
}

// foreign is the problem standing for an answer that is not one.
func foreign(resp *http.Response, detail string) *problem.Problem {
	return &problem.Problem{
		Type:       "about:blank",
		Title:      http.StatusText(resp.StatusCode),
		Status:     resp.StatusCode,
		Detail:     detail,
		RetryAfter: retryAfterHeader(resp.Header.Get("Retry-After"), time.Now()),
		Slug:       problem.Internal,
	}
}

// setSlug fills in the Slug of a decoded problem from its type URI.
func setSlug(p *problem.Problem) {
	if p != nil && p.Slug == "" {
		p.Slug = problem.SlugOf(p.Type)
	}
}

// setSlugs fills in the Slug of every source problem of r.
func setSlugs(r *aggregator.Result) {
	for i := range r.Sources {
		setSlug(r.Sources[i].Problem)
	}
}

// retryAfterHeader reads a Retry-After field (delay-seconds or an HTTP
// date) as whole seconds from now; nil when absent or unreadable.
func retryAfterHeader(v string, now time.Time) *int {
	v = strings.TrimSpace(v)
	if v == "" {
		return nil
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return nil
		}
		return &n
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return nil
	}
	n := 0
	if d := t.Sub(now); d > 0 {
		n = problem.Seconds(d)
	}
	return &n
}
