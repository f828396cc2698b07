package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/problem"
)

// adminAuth guards /v1/admin: without a configured token the surface is
// closed (403); otherwise a Bearer token compared in constant time.
func (s *Server) adminAuth(c *gin.Context) {
	if s.opts.AdminToken == "" {
		s.failSlug(c, problem.Forbidden, "The admin API is disabled: no admin token is configured.")
		return
	}
	// The scheme is case-insensitive (RFC 9110 §11.1).
	scheme, got, ok := strings.Cut(strings.TrimSpace(c.GetHeader("Authorization")), " ")
	ok = ok && strings.EqualFold(scheme, "Bearer")
	want := sha256.Sum256([]byte(s.opts.AdminToken))
	have := sha256.Sum256([]byte(strings.TrimSpace(got)))
	if !ok || subtle.ConstantTimeCompare(want[:], have[:]) != 1 {
		c.Header("WWW-Authenticate", `Bearer realm="aggregator-admin"`)
		s.failSlug(c, problem.Unauthorized, "A valid admin bearer token is required.")
		return
	}
	c.Next()
}

// breakerView is one breaker in GET /v1/admin/breakers.
type breakerView struct {
	BreakerKey       string               `json:"breaker_key"`
	Operation        aggregator.Operation `json:"operation"`
	Sources          []string             `json:"sources"`
	State            breaker.State        `json:"state"`
	Since            time.Time            `json:"since"`
	OpenUntil        *time.Time           `json:"open_until"`
	OpenSecondsTotal float64              `json:"open_seconds_total"`
	Window           windowView           `json:"window"`
	LastTransition   *breaker.Event       `json:"last_transition"`
	Settings         config.Breaker       `json:"settings"`
}

type windowView struct {
	Calls    int     `json:"calls"`
	Failures int     `json:"failures"`
	Ratio    float64 `json:"ratio"`
}

func (s *Server) listBreakers(c *gin.Context) {
	out := []breakerView{}
	for _, id := range s.opts.Breakers.IDs() {
		v, err := s.view(c.Request.Context(), id)
		if err != nil {
			s.failSlug(c, problem.Internal, "")
			return
		}
		out = append(out, v)
	}
	writeJSON(c, http.StatusOK, map[string]any{"breakers": out})
}

// view reads breaker id for the admin API.
func (s *Server) view(ctx context.Context, id breaker.ID) (breakerView, error) {
	st, err := s.opts.Breakers.Status(ctx, id)
	if err != nil {
		return breakerView{}, err
	}
	settings, _ := s.opts.Breakers.Settings(id)
	if st.Last == nil {
		// Never transitioned: in its state since the history began (the
		// start-up, or the shared store's start), as its strip says, not
		// since the store first read it.
		if _, from := s.opts.Breakers.Events().History(id, time.Time{}); !from.IsZero() && from.Before(st.Since) {
			st.Since = from
		}
	}
	var openUntil *time.Time
	if st.State == breaker.Open && !st.OpenUntil.IsZero() {
		openUntil = &st.OpenUntil // when its probe may go
	}
	return breakerView{
		BreakerKey: id.Key, Operation: id.Operation, Sources: s.opts.Breakers.Sources(id),
		State: st.State, Since: st.Since, OpenUntil: openUntil, OpenSecondsTotal: st.OpenTotal.Seconds(),
		Window:         windowView{Calls: st.Calls, Failures: st.Failures, Ratio: st.Ratio()},
		LastTransition: st.Last, Settings: ConfigBreaker(settings),
	}, nil
}

func (s *Server) breakerID(c *gin.Context) (breaker.ID, bool) {
	id := breaker.ID{Key: c.Param("key"), Operation: aggregator.Operation(c.Param("operation"))}
	if _, ok := s.opts.Breakers.Settings(id); !ok {
		s.failSlug(c, problem.NotFound, "No such breaker.")
		return id, false
	}
	return id, true
}

func (s *Server) resetBreaker(c *gin.Context) {
	s.adminAction(c, s.opts.Breakers.Reset)
}

func (s *Server) openBreaker(c *gin.Context) {
	s.adminAction(c, s.opts.Breakers.ForceOpen)
}

// adminAction applies act to the breaker of the route and answers its
// state afterwards.
func (s *Server) adminAction(c *gin.Context, act func(context.Context, breaker.ID) error) {
	id, ok := s.breakerID(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	if err := act(ctx, id); err != nil {
		s.failSlug(c, problem.Internal, "")
		return
	}
	v, err := s.view(ctx, id)
	if err != nil {
		s.failSlug(c, problem.Internal, "")
		return
	}
	writeJSON(c, http.StatusOK, v)
}

// eventKinds are the values of GET /v1/admin/events?kind=, by the Kind
// of the events they select.
var eventKinds = map[string]string{"breaker": "", breaker.KindStore: breaker.KindStore, breaker.KindMapping: breaker.KindMapping}

// latestEvents is how many events GET /v1/admin/events answers without
// since.
const latestEvents = 100

// events is GET /v1/admin/events?since=RFC3339&kind=: all events, or those
// of one kind (breaker transitions, store or mapping events).
func (s *Server) events(c *gin.Context) {
	log := s.opts.Breakers.Events()
	var params []problem.InvalidParam
	rawKind, filter := c.GetQuery("kind")
	kind, known := eventKinds[rawKind]
	if filter && !known {
		params = append(params, problem.InvalidParam{Name: "kind", Reason: "want breaker, store or mapping"})
	}
	raw, bounded := c.GetQuery("since")
	since, err := time.Parse(time.RFC3339Nano, raw)
	if bounded && err != nil {
		params = append(params, problem.InvalidParam{Name: "since", Reason: "not an RFC 3339 time"})
	}
	if len(params) > 0 {
		s.fail(c, s.opts.Problems.Invalid(params...), nil)
		return
	}
	var events []breaker.Event
	switch {
	case bounded:
		events = log.Since(since)
	case filter:
		events = log.Since(time.Time{}) // every event kept: the latest of one kind are among them
	default:
		events = log.Latest(latestEvents)
	}
	if filter {
		events = slices.DeleteFunc(events, func(e breaker.Event) bool { return e.Kind != kind })
		if !bounded && len(events) > latestEvents {
			events = events[len(events)-latestEvents:]
		}
	}
	writeJSON(c, http.StatusOK, map[string]any{"events": nonNil(events)})
}

func nonNil(e []breaker.Event) []breaker.Event {
	if e == nil {
		return []breaker.Event{}
	}
	return e
}

// updateBreaker is PUT /v1/admin/sources/{id}/breaker: a partial breaker
// block, validated like the config, applied to every source of the key.
func (s *Server) updateBreaker(c *gin.Context) {
	m, ok := s.opts.Engine.Member(c.Param("id"))
	if !ok {
		s.failSlug(c, problem.NotFound, "No such source.")
		return
	}
	body, err := io.ReadAll(c.Request.Body) // in memory, bounded (readBody)
	if err != nil {
		s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "body", Reason: "unreadable"}), nil)
		return
	}
	patch, err := config.DecodeBreakerPatch(body)
	if err != nil {
		s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "body", Reason: err.Error()}), nil)
		return
	}
	var current breaker.Settings
	for _, op := range aggregator.Operations {
		if st, ok := s.opts.Breakers.Settings(m.BreakerID(op)); ok {
			current = st
			break
		}
	}
	next := patch.Apply(ConfigBreaker(current))
	if errs := next.Validate(""); len(errs) > 0 {
		params := make([]problem.InvalidParam, len(errs))
		for i, e := range errs {
			params[i] = problem.InvalidParam{Name: strings.TrimPrefix(e.Key, "."), Reason: e.Msg}
		}
		s.fail(c, s.opts.Problems.Invalid(params...), nil)
		return
	}
	settings := BreakerSettings(next, current.ProbeLease)
	for _, op := range aggregator.Operations {
		id := m.BreakerID(op)
		if s.opts.Breakers.SetSettings(id, settings) && s.opts.ShareSettings != nil {
			if err := s.opts.ShareSettings(c.Request.Context(), id, settings); err != nil {
				s.opts.Logger.WarnContext(c.Request.Context(), "sharing breaker settings", "breaker", id.String(), "err", err.Error())
			}
		}
	}
	writeJSON(c, http.StatusOK, next)
}

// BreakerSettings turns a config breaker block into breaker settings.
func BreakerSettings(b config.Breaker, lease time.Duration) breaker.Settings {
	return breaker.Settings{
		Window: time.Duration(b.Window), MinCalls: b.MinCalls, FailureRatio: b.FailureRatio,
		ConsecutiveFailures: b.ConsecutiveFailures, OpenFor: time.Duration(b.OpenFor),
		SlowCall: time.Duration(b.SlowCall), FailureStatuses: append([]int(nil), b.FailureStatuses...),
		ProbeLease: lease,
	}
}

// ConfigBreaker is the inverse of BreakerSettings: the config block that
// the admin API shows.
func ConfigBreaker(s breaker.Settings) config.Breaker {
	return config.Breaker{
		Window: config.Duration(s.Window), MinCalls: s.MinCalls, FailureRatio: s.FailureRatio,
		ConsecutiveFailures: s.ConsecutiveFailures, OpenFor: config.Duration(s.OpenFor),
		SlowCall: config.Duration(s.SlowCall), FailureStatuses: append([]int(nil), s.FailureStatuses...),
	}
}
