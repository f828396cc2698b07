package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/watch"
)

// Watches is what the watch endpoints need (SPEC 15); *watch.Manager is
// one.
type Watches interface {
	// MinInterval is the shortest interval a watch may ask for.
	MinInterval() time.Duration
	Create(ctx context.Context, r watch.Request) (watch.View, error)
	Get(ctx context.Context, owner, id string) (watch.View, error)
	List(ctx context.Context, owner, cursor string, limit int) (watch.Page, error)
	Delete(ctx context.Context, owner, id string) error
	// Forget deletes the watches of a subject (DELETE /v1/admin/memory).
	Forget(ctx context.Context, q aggregator.Query) error
	// Stats is the fleet's watches and backlog (GET /v1/admin/watches).
	Stats(ctx context.Context) (watch.Stats, error)
}

var _ Watches = (*watch.Manager)(nil)

// The page sizes of GET /v1/watches.
const (
	defaultWatchPage = 50
	maxWatchPage     = 100
)

// watchOwner answers 404 when watches are off, 401 when the request has
// no API key to own them; otherwise it returns the key's name.
func (s *Server) watchOwner(c *gin.Context) (string, bool) {
	if s.opts.Watches == nil {
		s.failSlug(c, problem.NotFound, "Watches are not enabled on this server.")
		return "", false
	}
	owner := keyName(c)
	if owner == "" {
		s.failSlug(c, problem.Unauthorized, "A watch belongs to an API key: send X-API-Key.")
		return "", false
	}
	return owner, true
}

// createWatch is POST /v1/watches (SPEC 15): the same validation as an
// asynchronous query's subject and callback, an interval of at least
// watches.min_interval, and the key's limit (409 watch-limit).
func (s *Server) createWatch(c *gin.Context) {
	owner, ok := s.watchOwner(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	b, ok := s.jsonBody(c)
	if !ok {
		return
	}
	sub := s.readSubject(ctx, b)
	var interval time.Duration
	if raw, has, ok := b.str("interval"); ok && has {
		d, err := time.ParseDuration(strings.TrimSpace(raw))
		switch least := s.opts.Watches.MinInterval(); {
		case err != nil:
			b.invalid("interval", "not a Go duration such as 24h")
		case d < least:
			b.invalid("interval", "must be at least watches.min_interval ("+least.String()+")")
		default:
			interval = d
		}
	}
	if len(b.bad) > 0 {
		s.fail(c, s.opts.Problems.Invalid(b.bad...), nil)
		return
	}
	v, err := s.opts.Watches.Create(ctx, watch.Request{Owner: owner, Query: sub.query, Sources: sub.only,
		CallbackURL: sub.callback, Interval: interval})
	switch {
	case errors.Is(err, watch.ErrLimit):
		s.failSlug(c, problem.WatchLimit, "This API key already has as many watches as watches.max_per_key allows.")
		return
	case err != nil:
		s.opts.Logger.ErrorContext(ctx, "creating a watch", "err", err.Error())
		s.failSlug(c, problem.Internal, "")
		return
	}
	noStore(c) // a watch names its subject
	c.Header("Location", "/v1/watches/"+v.WatchID)
	writeJSON(c, http.StatusCreated, v)
}

// getWatch is GET /v1/watches/{id}.
func (s *Server) getWatch(c *gin.Context) {
	owner, ok := s.watchOwner(c)
	if !ok {
		return
	}
	v, err := s.opts.Watches.Get(c.Request.Context(), owner, c.Param("wid"))
	if s.watchError(c, err, "reading a watch") {
		return
	}
	noStore(c)
	writeJSON(c, http.StatusOK, v)
}

// listWatches is GET /v1/watches?cursor=&limit=: the key's watches in the
// order they were made.
func (s *Server) listWatches(c *gin.Context) {
	owner, ok := s.watchOwner(c)
	if !ok {
		return
	}
	limit := defaultWatchPage
	if raw, has := c.GetQuery("limit"); has {
		n, err := strconv.Atoi(strings.TrimSpace(raw))
		switch {
		case err != nil || n < 1:
			s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "limit", Reason: "must be a whole number of at least 1"}), nil)
			return
		case n > maxWatchPage:
			n = maxWatchPage
		}
		limit = n
	}
	p, err := s.opts.Watches.List(c.Request.Context(), owner, c.Query("cursor"), limit)
	if errors.Is(err, watch.ErrCursor) {
		s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "cursor", Reason: "not a next_cursor this listing gave"}), nil)
		return
	}
	if s.watchError(c, err, "listing watches") {
		return
	}
	noStore(c)
	writeJSON(c, http.StatusOK, p)
}

// deleteWatch is DELETE /v1/watches/{id}: the watch, its last known
// infractions and its deliveries not gone yet.
func (s *Server) deleteWatch(c *gin.Context) {
	owner, ok := s.watchOwner(c)
	if !ok {
		return
	}
	err := s.opts.Watches.Delete(c.Request.Context(), owner, c.Param("wid"))
	if s.watchError(c, err, "deleting a watch") {
		return
	}
	c.Status(http.StatusNoContent)
	c.Writer.WriteHeaderNow()
}

// watchError answers err, if any: 404 for a watch not found (or
// another key's), else 500. It reports whether it answered.
func (s *Server) watchError(c *gin.Context, err error, what string) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, watch.ErrNotFound):
		s.failSlug(c, problem.NotFound, "No such watch.")
	default:
		s.opts.Logger.ErrorContext(c.Request.Context(), what, "err", err.Error())
		s.failSlug(c, problem.Internal, "")
	}
	return true
}

// watchStatsView is GET /v1/admin/watches: the fleet's watches and how
// late their checks start, for the dashboard.
type watchStatsView struct {
	Watches        int            `json:"watches"`
	BacklogSeconds float64        `json:"backlog_seconds"`
	Replica        watchesReplica `json:"replica"`
}

// watchesReplica is what this replica's checks did since it started.
type watchesReplica struct {
	ChecksStarted int64            `json:"checks_started"`
	LagSeconds    lagQuantiles     `json:"lag_seconds"`
	Checks        map[string]int64 `json:"checks"`
	Changes       int64            `json:"changes"`
}

type lagQuantiles struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
}

// watchStats is GET /v1/admin/watches; 404 without watches.
func (s *Server) watchStats(c *gin.Context) {
	if s.opts.Watches == nil {
		s.failSlug(c, problem.NotFound, "Watches are not enabled on this server.")
		return
	}
	st, err := s.opts.Watches.Stats(c.Request.Context())
	if err != nil {
		s.opts.Logger.ErrorContext(c.Request.Context(), "reading the watches' figures", "err", err.Error())
		s.failSlug(c, problem.Internal, "")
		return
	}
	v := watchStatsView{Watches: st.Watches, BacklogSeconds: st.Backlog.Seconds(),
		Replica: watchesReplica{Checks: map[string]int64{}}}
	for _, o := range watch.Outcomes {
		v.Replica.Checks[o] = 0
	}
	if m := s.opts.Metrics; m != nil {
		ws := m.WatchStats()
		for o, n := range ws.Checks {
			v.Replica.Checks[o] = n
		}
		v.Replica.ChecksStarted, v.Replica.Changes = ws.Started, ws.Changes
		v.Replica.LagSeconds = lagQuantiles{P50: ws.LagP50.Seconds(), P95: ws.LagP95.Seconds()}
	}
	writeJSON(c, http.StatusOK, v)
}
