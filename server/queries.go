package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/async"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/problem"
)

// AsyncQueries is what the asynchronous query and DLQ endpoints need;
// *async.Manager is one.
type AsyncQueries interface {
	// MaxWait is the largest max_wait a query may ask for.
	MaxWait() time.Duration
	// CheckCallback returns why a callback URL is refused, or "".
	CheckCallback(ctx context.Context, raw string) string
	Submit(ctx context.Context, r async.Request) (async.View, error)
	Get(ctx context.Context, id string) (async.View, error)
	DLQ(ctx context.Context) ([]async.DLQEntry, error)
	Redeliver(ctx context.Context, id string) error
	DeleteDLQ(ctx context.Context, id string) error
}

var _ AsyncQueries = (*async.Manager)(nil)

// asyncEnabled answers 404 when no asynchronous queries are configured.
func (s *Server) asyncEnabled(c *gin.Context) bool {
	if s.opts.Async == nil {
		s.failSlug(c, problem.NotFound, "Asynchronous queries are not enabled on this server.")
		return false
	}
	return true
}

// createQuery is POST /v1/queries (SPEC 3.4).
func (s *Server) createQuery(c *gin.Context) {
	if !s.asyncEnabled(c) {
		return
	}
	ctx := c.Request.Context()
	body, err := io.ReadAll(c.Request.Body) // in memory, bounded (readBody)
	var raw map[string]json.RawMessage
	if err != nil || json.Unmarshal(body, &raw) != nil || raw == nil {
		s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "body",
			Reason: fmt.Sprintf("must be a JSON object of at most %d KiB", MaxBodyBytes>>10)}), nil)
		return
	}
	var bad []problem.InvalidParam
	field := func(name string) (string, bool, bool) {
		v, ok := raw[name]
		if !ok || string(v) == "null" {
			return "", false, true
		}
		var str string
		if json.Unmarshal(v, &str) != nil {
			bad = append(bad, problem.InvalidParam{Name: name, Reason: "must be a string"})
			return "", true, false
		}
		return str, true, true
	}
	domain, hasDomain, okDomain := field("domain")
	id, hasID, okID := field("id")
	callback, hasCallback, okCallback := field("callback_url")
	maxWaitRaw, hasMaxWait, okMaxWait := field("max_wait")

	var q aggregator.Query
	validQuery := false
	if okDomain && okID {
		var qbad []problem.InvalidParam
		q, qbad = aggregator.NewQuery(domain, id, hasDomain, hasID)
		bad = append(bad, qbad...)
		validQuery = len(qbad) == 0
	}
	only, reason := asyncSources(raw["sources"])
	if reason != "" {
		bad = append(bad, problem.InvalidParam{Name: "sources", Reason: reason})
	}
	var set []fanout.Member
	if validQuery && reason == "" {
		var sbad []problem.InvalidParam
		set, sbad = s.opts.Engine.Select(q, only)
		bad = append(bad, sbad...)
		if len(sbad) == 0 && len(set) == 0 {
			name := "domain"
			if q.Domain == "" {
				name = "id"
			}
			bad = append(bad, problem.InvalidParam{Name: name, Reason: "no configured source can answer this query"})
		}
	}
	switch {
	case !okCallback:
	case !hasCallback || strings.TrimSpace(callback) == "":
		bad = append(bad, problem.InvalidParam{Name: "callback_url", Reason: "required: an absolute http or https URL"})
	default:
		if why := s.opts.Async.CheckCallback(ctx, callback); why != "" {
			bad = append(bad, problem.InvalidParam{Name: "callback_url", Reason: why})
		}
	}
	var maxWait time.Duration
	if okMaxWait && hasMaxWait {
		d, err := time.ParseDuration(strings.TrimSpace(maxWaitRaw))
		switch limit := s.opts.Async.MaxWait(); {
		case err != nil:
			bad = append(bad, problem.InvalidParam{Name: "max_wait", Reason: "not a Go duration such as 10m"})
		case d <= 0:
			bad = append(bad, problem.InvalidParam{Name: "max_wait", Reason: "must be positive"})
		case d > limit:
			bad = append(bad, problem.InvalidParam{Name: "max_wait", Reason: "must not exceed async.max_wait (" + limit.String() + ")"})
		default:
			maxWait = d
		}
	}
	directives, bad := cacheControl(c, bad)
	if len(bad) > 0 {
		s.fail(c, s.opts.Problems.Invalid(bad...), nil)
		return
	}
	v, err := s.opts.Async.Submit(ctx, async.Request{Query: q, Sources: set, CallbackURL: callback, MaxWait: maxWait, Directives: directives})
	if err != nil {
		s.opts.Logger.ErrorContext(c.Request.Context(), "accepting an asynchronous query", "err", err.Error())
		s.failSlug(c, problem.Internal, "")
		return
	}
	noStore(c)
	c.Header("Location", "/v1/queries/"+v.ID)
	writeJSON(c, http.StatusAccepted, v)
}

// asyncSources reads the optional `sources` member: an array of source ids.
func asyncSources(raw json.RawMessage) ([]string, string) {
	if raw == nil || string(raw) == "null" {
		return nil, ""
	}
	var ids []string
	if json.Unmarshal(raw, &ids) != nil {
		return nil, "must be an array of source ids"
	}
	return splitSources([]string{strings.Join(ids, ",")})
}

// getQuery is GET /v1/queries/{qid}.
func (s *Server) getQuery(c *gin.Context) {
	if !s.asyncEnabled(c) {
		return
	}
	v, err := s.opts.Async.Get(c.Request.Context(), c.Param("qid"))
	noStore(c)
	switch {
	case errors.Is(err, async.ErrNotFound):
		s.failSlug(c, problem.NotFound, "No such query (or it finished too long ago).")
	case err != nil:
		s.opts.Logger.ErrorContext(c.Request.Context(), "reading an asynchronous query", "err", err.Error())
		s.failSlug(c, problem.Internal, "")
	default:
		writeJSON(c, http.StatusOK, v)
	}
}

// listDLQ is GET /v1/admin/dlq.
func (s *Server) listDLQ(c *gin.Context) {
	if !s.asyncEnabled(c) {
		return
	}
	entries, err := s.opts.Async.DLQ(c.Request.Context())
	if err != nil {
		s.opts.Logger.ErrorContext(c.Request.Context(), "reading the DLQ", "err", err.Error())
		s.failSlug(c, problem.Internal, "")
		return
	}
	if entries == nil {
		entries = []async.DLQEntry{}
	}
	noStore(c) // payloads hold query data
	writeJSON(c, http.StatusOK, map[string]any{"entries": entries})
}

// redeliverDLQ is POST /v1/admin/dlq/{id}/redeliver.
func (s *Server) redeliverDLQ(c *gin.Context) {
	s.dlqAction(c, func(ctx context.Context, id string) error { return s.opts.Async.Redeliver(ctx, id) }, http.StatusAccepted)
}

// deleteDLQ is DELETE /v1/admin/dlq/{id}.
func (s *Server) deleteDLQ(c *gin.Context) {
	s.dlqAction(c, func(ctx context.Context, id string) error { return s.opts.Async.DeleteDLQ(ctx, id) }, http.StatusNoContent)
}

func (s *Server) dlqAction(c *gin.Context, act func(context.Context, string) error, status int) {
	if !s.asyncEnabled(c) {
		return
	}
	err := act(c.Request.Context(), c.Param("id"))
	switch {
	case errors.Is(err, async.ErrNotFound):
		s.failSlug(c, problem.NotFound, "No such dead letter queue entry.")
	case err != nil:
		s.opts.Logger.ErrorContext(c.Request.Context(), "acting on the DLQ", "err", err.Error())
		s.failSlug(c, problem.Internal, "")
	default:
		c.Status(status)
		c.Writer.WriteHeaderNow()
	}
}
