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
	b, ok := s.jsonBody(c)
	if !ok {
		return
	}
	sub := s.readSubject(ctx, b)
	maxWaitRaw, hasMaxWait, okMaxWait := b.str("max_wait")
	var maxWait time.Duration
	if okMaxWait && hasMaxWait {
		d, err := time.ParseDuration(strings.TrimSpace(maxWaitRaw))
		switch limit := s.opts.Async.MaxWait(); {
		case err != nil:
			b.invalid("max_wait", "not a Go duration such as 10m")
		case d <= 0:
			b.invalid("max_wait", "must be positive")
		case d > limit:
			b.invalid("max_wait", "must not exceed async.max_wait ("+limit.String()+")")
		default:
			maxWait = d
		}
	}
	directives, bad := cacheControl(c, b.bad)
	if len(bad) > 0 {
		s.fail(c, s.opts.Problems.Invalid(bad...), nil)
		return
	}
	v, err := s.opts.Async.Submit(ctx, async.Request{Query: sub.query, Sources: sub.set, CallbackURL: sub.callback,
		MaxWait: maxWait, Directives: directives, Signer: keyName(c)})
	if err != nil {
		s.opts.Logger.ErrorContext(c.Request.Context(), "accepting an asynchronous query", "err", err.Error())
		s.failSlug(c, problem.Internal, "")
		return
	}
	noStore(c)
	c.Header("Location", "/v1/queries/"+v.ID)
	writeJSON(c, http.StatusAccepted, v)
}

// body is a request's JSON object, and the problems found in it so far.
type body struct {
	raw map[string]json.RawMessage
	bad []problem.InvalidParam
}

// jsonBody reads the request's body as a JSON object; when it is not one,
// it answers 400 and reports false.
func (s *Server) jsonBody(c *gin.Context) (*body, bool) {
	data, err := io.ReadAll(c.Request.Body) // in memory, bounded (readBody)
	var raw map[string]json.RawMessage
	if err != nil || json.Unmarshal(data, &raw) != nil || raw == nil {
		s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "body",
			Reason: fmt.Sprintf("must be a JSON object of at most %d KiB", MaxBodyBytes>>10)}), nil)
		return nil, false
	}
	return &body{raw: raw}, true
}

func (b *body) invalid(name, reason string) {
	b.bad = append(b.bad, problem.InvalidParam{Name: name, Reason: reason})
}

// str reads member name as a string: its value, whether it is present
// (null is absent), and whether it is a string (or absent).
func (b *body) str(name string) (v string, has, ok bool) {
	raw, present := b.raw[name]
	if !present || string(raw) == "null" {
		return "", false, true
	}
	if json.Unmarshal(raw, &v) != nil {
		b.invalid(name, "must be a string")
		return "", true, false
	}
	return v, true, true
}

// subject is what an asynchronous query and a watch have in common: the
// lookup, the sources that answer it, and where to deliver.
type subject struct {
	query aggregator.Query
	// only are the source ids asked for (nil: all); set the members that
	// answer query among them.
	only     []string
	set      []fanout.Member
	callback string
}

// readSubject reads and validates `domain` or `id`, `sources` and
// `callback_url` (SPEC 3.1, 3.4, 9), the same for queries and watches;
// its problems go to b.
func (s *Server) readSubject(ctx context.Context, b *body) subject {
	var sub subject
	domain, hasDomain, okDomain := b.str("domain")
	id, hasID, okID := b.str("id")
	callback, hasCallback, okCallback := b.str("callback_url")
	validQuery := false
	if okDomain && okID {
		var qbad []problem.InvalidParam
		sub.query, qbad = aggregator.NewQuery(domain, id, hasDomain, hasID)
		b.bad = append(b.bad, qbad...)
		validQuery = len(qbad) == 0
	}
	only, reason := asyncSources(b.raw["sources"])
	if reason != "" {
		b.invalid("sources", reason)
	}
	sub.only = only
	if validQuery && reason == "" {
		var sbad []problem.InvalidParam
		sub.set, sbad = s.opts.Engine.Select(sub.query, only)
		b.bad = append(b.bad, sbad...)
		if len(sbad) == 0 && len(sub.set) == 0 {
			name := "domain"
			if sub.query.Domain == "" {
				name = "id"
			}
			b.invalid(name, "no configured source can answer this query")
		}
	}
	switch {
	case !okCallback:
	case !hasCallback || strings.TrimSpace(callback) == "":
		b.invalid("callback_url", "required: an absolute http or https URL")
	case s.opts.Async != nil:
		if why := s.opts.Async.CheckCallback(ctx, callback); why != "" {
			b.invalid("callback_url", why)
		}
	}
	sub.callback = callback
	return sub
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
