package server

import (
	"math"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/metrics"
	"github.com/multas/aggregator/problem"
)

// The operators' views behind the dashboard (SPEC 10): each source's pause
// and recent calls, and each breaker's states over the last day.

// sourceOpsView is one source in GET /v1/admin/sources.
type sourceOpsView struct {
	ID           string `json:"id"`
	Jurisdiction string `json:"jurisdiction"`
	BreakerKey   string `json:"breaker_key"`
	// Pause is the portal's pause in force (SPEC 4.2), null when none.
	Pause *pauseView `json:"pause"`
	// Calls and Outcomes count this replica's calls over the window,
	// skipped ones included; CallsPerMinute is Calls over the window.
	Calls          int64            `json:"calls"`
	CallsPerMinute float64          `json:"calls_per_minute"`
	Outcomes       map[string]int64 `json:"outcomes"`
	// Latency is of the calls that reached the portal, null without any.
	Latency *latencyView `json:"latency_ms"`
	// Memory is what the source's remembered answers spared over the
	// window (SPEC 14); null when it does not remember.
	Memory *memoryView `json:"memory"`
	// Mapping is how the source's answers mapped over the last hour, as
	// this replica read them (SPEC 13).
	Mapping mappingView `json:"mapping"`
}

type mappingView struct {
	Items           int                       `json:"items"`
	Unmapped        map[string]map[string]int `json:"unmapped"`
	UnknownStatuses []statusView              `json:"unknown_statuses"`
	// ShapeChangedAt is when an answer last changed the source's shape
	// within the hour; null when none did.
	ShapeChangedAt *time.Time `json:"shape_changed_at"`
}

type statusView struct {
	Text     string    `json:"text"`
	Count    int       `json:"count"`
	LastSeen time.Time `json:"last_seen"`
}

// mapping is source id's mapping section.
func (s *Server) mapping(id string) mappingView {
	v := mappingView{Unmapped: map[string]map[string]int{}, UnknownStatuses: []statusView{}}
	if s.opts.Drift == nil {
		return v
	}
	r := s.opts.Drift.Report(id)
	v.Items, v.Unmapped = r.Items, r.Unmapped
	for _, st := range r.UnknownStatuses {
		v.UnknownStatuses = append(v.UnknownStatuses, statusView{Text: st.Text, Count: st.Count, LastSeen: st.LastSeen})
	}
	if !r.ShapeChangedAt.IsZero() {
		v.ShapeChangedAt = &r.ShapeChangedAt
	}
	return v
}

// memoryView counts a source's answers taken from memory over the window.
type memoryView struct {
	// Fresh answers were the source's entry, its portal not called;
	// Stale ones stood in for it when it failed or was skipped.
	Fresh int64 `json:"fresh"`
	Stale int64 `json:"stale"`
	// HitRatio is Fresh over Fresh and the calls: the share of the
	// source's lookups its memory answered; null without any.
	HitRatio *float64 `json:"hit_ratio"`
}

type pauseView struct {
	Until time.Time `json:"until"`
	// RetryAfter is the whole seconds left, rounded up.
	RetryAfter int64 `json:"retry_after"`
	// Reason is what the portal's answer said, "" when not known.
	Reason string `json:"reason"`
}

type latencyView struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
}

// adminSources is GET /v1/admin/sources.
func (s *Server) adminSources(c *gin.Context) {
	ctx := c.Request.Context()
	now := s.opts.Now()
	var recent metrics.Recent
	if s.opts.Metrics != nil {
		recent = s.opts.Metrics.Recent(now)
	}
	window := recent.Window
	out := []sourceOpsView{}
	for _, m := range s.opts.Engine.Members() {
		id := m.Source.ID()
		v := sourceOpsView{ID: id, Jurisdiction: m.Source.Jurisdiction(), BreakerKey: m.BreakerKey, Outcomes: map[string]int64{},
			Mapping: s.mapping(id)}
		if s.opts.Limiter != nil {
			if ps := s.opts.Limiter.PauseStatus(ctx, id); ps.Until.After(now) {
				v.Pause = &pauseView{Until: ps.Until, RetryAfter: ceilSeconds(ps.Until.Sub(now)), Reason: ps.Reason}
			}
		}
		if r, ok := recent.Sources[id]; ok {
			v.Calls = r.Calls
			if r.Outcomes != nil {
				v.Outcomes = r.Outcomes
			}
			if window >= time.Second {
				v.CallsPerMinute = math.Round(float64(r.Calls)/window.Minutes()*100) / 100
			}
			if r.Timed > 0 {
				v.Latency = &latencyView{P50: millis(r.P50), P95: millis(r.P95)}
			}
		}
		if m.Memory.Remembers() {
			r := recent.Sources[id]
			mv := &memoryView{Fresh: r.Remembered[memory.HitFresh], Stale: r.Remembered[memory.HitStale]}
			if n := mv.Fresh + r.Calls; n > 0 {
				ratio := math.Round(float64(mv.Fresh)/float64(n)*1000) / 1000
				mv.HitRatio = &ratio
			}
			v.Memory = mv
		}
		out = append(out, v)
	}
	writeJSON(c, http.StatusOK, map[string]any{"window_seconds": math.Round(window.Seconds()*10) / 10, "sources": out})
}

func ceilSeconds(d time.Duration) int64 { return int64(math.Ceil(d.Seconds())) }

func millis(d time.Duration) float64 { return math.Round(d.Seconds()*1e5) / 100 }

// historyView is one breaker in GET /v1/admin/history.
type historyView struct {
	BreakerKey string               `json:"breaker_key"`
	Operation  aggregator.Operation `json:"operation"`
	State      breaker.State        `json:"state"`
	// KnownFrom is where the segments start: the window's start, or later
	// when the history begins later (a replica without shared state knows
	// only its own lifetime).
	KnownFrom time.Time                 `json:"known_from"`
	Segments  []breaker.Segment         `json:"segments"`
	Seconds   map[breaker.State]float64 `json:"seconds"`
}

// history is GET /v1/admin/history?since=RFC3339: every breaker's states
// from since (at most, and by default, breaker.HistoryFor ago) to now.
func (s *Server) history(c *gin.Context) {
	now := s.opts.Now()
	from := now.Add(-breaker.HistoryFor)
	if raw, ok := c.GetQuery("since"); ok {
		since, err := time.Parse(time.RFC3339Nano, raw)
		if err != nil {
			s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "since", Reason: "not an RFC 3339 time"}), nil)
			return
		}
		if since.After(now) {
			s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "since", Reason: "in the future"}), nil)
			return
		}
		if since.After(from) {
			from = since
		}
	}
	ctx := c.Request.Context()
	log := s.opts.Breakers.Events()
	out := []historyView{}
	for _, id := range s.opts.Breakers.IDs() {
		st, err := s.opts.Breakers.Status(ctx, id)
		if err != nil {
			s.failSlug(c, problem.Internal, "")
			return
		}
		events, known := log.History(id, from)
		if known.After(now) {
			known = now
		}
		segments := breaker.Timeline(events, st.State, known, now)
		secs := map[breaker.State]float64{breaker.Closed: 0, breaker.HalfOpen: 0, breaker.Open: 0, breaker.ForcedOpen: 0}
		for _, seg := range segments {
			secs[seg.State] += seg.End.Sub(seg.Start).Seconds()
		}
		for k, v := range secs {
			secs[k] = math.Round(v*1000) / 1000
		}
		out = append(out, historyView{
			BreakerKey: id.Key, Operation: id.Operation, State: st.State,
			KnownFrom: known, Segments: segments, Seconds: secs,
		})
	}
	writeJSON(c, http.StatusOK, map[string]any{"from": from, "to": now, "breakers": out})
}
