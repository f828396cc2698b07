package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/sources"
)

// infractions is GET /v1/infractions (SPEC 3.1), answered as JSON or, when
// the request's Accept prefers one, as a stream of events (SPEC 14).
func (s *Server) infractions(c *gin.Context) {
	start := s.opts.Now()
	m := negotiate(c.Request.Header.Values("Accept"))
	if m == mediaEventStream && reconnecting(c.Request) {
		// The stream this EventSource read has ended: a 204 stops it, so
		// that the query does not run again.
		noStore(c)
		c.Status(http.StatusNoContent)
		c.Writer.WriteHeaderNow()
		return
	}
	values := c.Request.URL.Query()
	_, hasDomain := values["domain"]
	_, hasID := values["id"]
	q, bad := aggregator.NewQuery(values.Get("domain"), values.Get("id"), hasDomain, hasID)
	budget, reason := s.budget(values.Get("timeout"), values.Has("timeout"))
	if reason != "" {
		bad = append(bad, problem.InvalidParam{Name: "timeout", Reason: reason})
	}
	only, reason := splitSources(values["sources"])
	if reason != "" {
		bad = append(bad, problem.InvalidParam{Name: "sources", Reason: reason})
	}
	directives, bad := cacheControl(c, bad)
	if len(bad) == 0 {
		var set []fanout.Member
		if set, bad = s.opts.Engine.Select(q, only); len(bad) == 0 {
			if m == mediaJSON {
				s.answer(c, q, set, budget, directives, start)
			} else {
				s.stream(c, m, q, set, budget, directives, start)
			}
			return
		}
	}
	s.observeInvalid(hasDomain, hasID)
	s.fail(c, s.opts.Problems.Invalid(bad...), nil)
}

// observeInvalid counts a refused query under the operation it asked for,
// the one of the parameter given (its Query is empty when that parameter
// was the bad one). With both parameters or neither it asked for no
// operation, and is counted only by aggregator_http_requests_total.
func (s *Server) observeInvalid(hasDomain, hasID bool) {
	if s.opts.Metrics == nil || hasDomain == hasID {
		return
	}
	op := aggregator.ByID
	if hasDomain {
		op = aggregator.ByDomain
	}
	s.opts.Metrics.Query(context.Background(), op, "invalid", 0)
}

// unavailable is the 503 no-source-available document: the problem with
// the sources array as an extension member.
type unavailable struct {
	*problem.Problem
	Sources []aggregator.SourceResult `json:"sources"`
}

// cacheControl reads the request's Cache-Control directives (SPEC 14); a
// malformed one is added to bad, named as the header.
func cacheControl(c *gin.Context, bad []problem.InvalidParam) (memory.Directives, []problem.InvalidParam) {
	d, err := memory.ParseDirectives(c.Request.Header.Values("Cache-Control"))
	if err != nil {
		bad = append(bad, problem.InvalidParam{Name: "Cache-Control", Reason: err.Error()})
	}
	return d, bad
}

// answer runs the query and answers it: 200 when at least one source
// succeeded or had a remembered answer stand in for it (SPEC 14), else the
// 503 no-source-available.
func (s *Server) answer(c *gin.Context, q aggregator.Query, set []fanout.Member, budget time.Duration, d memory.Directives, start time.Time) {
	res := s.opts.Engine.Answer(c.Request.Context(), q, set, budget, d)
	noStore(c)
	outcome := queryOutcome(res)
	s.observeQuery(c.Request.Context(), q, outcome, s.opts.Now().Sub(start))
	if outcome != "unavailable" {
		writeJSON(c, http.StatusOK, res)
		return
	}
	p := s.unanswered(res, "No source answered; sources lists why, one by one.")
	s.fail(c, p, unavailable{Problem: p, Sources: res.Sources})
}

// shortestRetry is the smallest retry_after when every source was skipped.
func shortestRetry(entries []aggregator.SourceResult) (int, bool) {
	best := 0
	for _, e := range entries {
		if e.Status != aggregator.EntrySkipped || e.Problem == nil || e.Problem.RetryAfter == nil {
			return 0, false
		}
		if best == 0 || *e.Problem.RetryAfter < best {
			best = *e.Problem.RetryAfter
		}
	}
	return best, len(entries) > 0
}

func (s *Server) observeQuery(ctx context.Context, q aggregator.Query, outcome string, d time.Duration) {
	if s.opts.Metrics != nil {
		s.opts.Metrics.Query(ctx, q.Operation(), outcome, d)
	}
}

// budget reads the `timeout` parameter: a positive Go duration, clamped to
// the maximum; the default deadline without it.
func (s *Server) budget(raw string, present bool) (time.Duration, string) {
	if !present {
		return s.opts.Deadline, ""
	}
	d, err := time.ParseDuration(strings.TrimSpace(raw))
	if err != nil {
		return 0, "not a Go duration such as 2.5s"
	}
	if d <= 0 {
		return 0, "must be positive"
	}
	return min(d, s.opts.MaxDeadline), ""
}

// splitSources reads `sources=caba,cordoba` (repeatable).
func splitSources(raw []string) ([]string, string) {
	var out []string
	seen := map[string]bool{}
	for _, r := range raw {
		for _, id := range strings.Split(r, ",") {
			id = strings.TrimSpace(id)
			if id == "" || seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, id)
		}
	}
	if len(raw) > 0 && len(out) == 0 {
		return nil, "must name at least one source"
	}
	return out, ""
}

// coverageOp is one operation of a source in GET /v1/sources.
type coverageOp struct {
	Available bool `json:"available"`
}

type coverageSource struct {
	ID           string                              `json:"id"`
	Jurisdiction string                              `json:"jurisdiction"`
	Operations   map[aggregator.Operation]coverageOp `json:"operations"`
}

// coverage is GET /v1/sources (SPEC 3.3).
func (s *Server) coverage(c *gin.Context) {
	ctx := c.Request.Context()
	out := []coverageSource{}
	for _, m := range s.opts.Engine.Members() {
		id := m.Source.ID()
		paused := s.opts.Limiter != nil && s.opts.Limiter.PausedFor(ctx, id) > 0
		cs := coverageSource{ID: id, Jurisdiction: m.Source.Jurisdiction(), Operations: map[aggregator.Operation]coverageOp{}}
		for _, op := range aggregator.Operations {
			if !m.Source.Supports(op, "") {
				continue
			}
			available := !paused
			if st, err := s.opts.Breakers.Status(ctx, m.BreakerID(op)); err == nil &&
				(st.State == breaker.Open || st.State == breaker.ForcedOpen) {
				available = false
			}
			cs.Operations[op] = coverageOp{Available: available}
		}
		out = append(out, cs)
	}
	writeJSON(c, http.StatusOK, map[string]any{"sources": out})
}

// voucher is GET /v1/sources/{source}/infractions/{infraction_id}/voucher
// (SPEC 3.2): the portal's voucher streamed through, with the headers that
// keep a browser from running it (SPEC 9, voucherHeaders).
func (s *Server) voucher(c *gin.Context) {
	source, id := c.Param("source"), c.Param("infraction_id")
	v, p := s.opts.Engine.Voucher(c.Request.Context(), source, id, s.opts.MaxDeadline)
	noStore(c)
	if p != nil {
		s.fail(c, p, nil)
		return
	}
	defer v.Body.Close()
	voucherHeaders(c.Writer.Header(), source, id, v)
	c.Status(http.StatusOK)
	if n, err := io.Copy(c.Writer, v.Body); err != nil {
		if n == 0 && !c.Writer.Written() {
			// Nothing is out yet: answer as for a call that failed.
			slug, detail := problem.SourceUnavailable, "The portal broke off its voucher."
			switch {
			case errors.Is(err, sources.ErrVoucherTooLarge):
				slug, detail = problem.SourceError, "The voucher is larger than the source's voucher_max_bytes."
			case errors.Is(err, context.DeadlineExceeded):
				slug = problem.SourceTimeout
			}
			clearVoucherHeaders(c.Writer.Header())
			s.failSlug(c, slug, detail)
			return
		}
		// The status is out: abort the response (as httputil.ReverseProxy
		// does), so that the client sees a broken transfer, never a
		// partial voucher that looks whole.
		panic(http.ErrAbortHandler)
	}
}
