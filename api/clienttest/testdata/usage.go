package client

import (
	"context"
	"time"
)

// Usage is copied next to the generated client by api/clients_test.go and
// built with it: it reads members of the answers with the Go types the
// contract gives them, so it compiles only while every one of them is
// concrete (no interface{}, no float32, nullable members as pointers).
func Usage(ctx context.Context, c *ClientWithResponses) error {
	res, err := c.GetInfractionsWithResponse(ctx, &GetInfractionsParams{Domain: ptr("AB123CD")})
	if err != nil {
		return err
	}
	if r := res.JSON200; r != nil {
		var domain *string = r.Query.Domain
		var total int64 = r.Summary.Total
		var amount *string = r.Infractions[0].Amount
		var status InfractionStatus = r.Infractions[0].Status
		var took *int64 = r.Sources[0].DurationMs
		var slug string = r.Sources[0].Problem.Type
		var retry *int64 = r.Sources[0].Problem.RetryAfter
		_, _, _, _, _, _, _ = domain, total, amount, status, took, slug, retry
	}
	if p := res.ApplicationproblemJSON400; p != nil {
		var name, reason string = p.InvalidParams[0].Name, p.InvalidParams[0].Reason
		var status int32 = p.Status
		_, _, _ = name, reason, status
	}
	if p := res.ApplicationproblemJSON503; p != nil {
		none, err := p.AsNoSourceAvailableProblem()
		if err != nil {
			return err
		}
		var slug string = none.Sources[0].Problem.Type
		var op Operation = none.Sources[0].Operation
		busy, err := p.AsOverloadedProblem()
		if err != nil {
			return err
		}
		var after int64 = busy.RetryAfter
		_, _, _ = slug, op, after
	}

	q, err := c.GetQueryWithResponse(ctx, "q1")
	if err != nil {
		return err
	}
	if v := q.JSON200; v != nil {
		var completed *time.Time = v.CompletedAt
		var result *Result = v.Result
		_, _ = completed, result
	}

	b, err := c.ListBreakersWithResponse(ctx)
	if err != nil {
		return err
	}
	if l := b.JSON200; l != nil {
		br := l.Breakers[0]
		var last *Event = br.LastTransition
		var open float64 = br.OpenSecondsTotal
		var ratio float64 = br.Window.Ratio
		var calls int64 = br.Window.Calls
		var failureRatio float64 = br.Settings.FailureRatio
		var statuses []HTTPStatus = br.Settings.FailureStatuses
		var openFor GoDuration = br.Settings.OpenFor
		var probe *time.Time = br.OpenUntil
		_, _, _, _, _, _, _, _ = last, open, ratio, calls, failureRatio, statuses, openFor, probe
	}

	sa, err := c.ListSourceActivityWithResponse(ctx)
	if err != nil {
		return err
	}
	if l := sa.JSON200; l != nil {
		s := l.Sources[0]
		var pause *SourcePause = s.Pause
		var latency *SourceLatency = s.LatencyMs
		var succeeded *int64 = s.Outcomes.Succeeded
		var perMinute float64 = s.CallsPerMinute
		var items int64 = s.Mapping.Items
		var changed *time.Time = s.Mapping.ShapeChangedAt
		var text string = s.Mapping.UnknownStatuses[0].Text
		var seen time.Time = s.Mapping.UnknownStatuses[0].LastSeen
		var missing *int64 = s.Mapping.Unmapped["amount"].Missing
		_, _, _, _, _, _, _, _, _ = pause, latency, succeeded, perMinute, items, changed, text, seen, missing
		if pause != nil {
			var until time.Time = pause.Until
			var reason string = pause.Reason
			_, _ = until, reason
		}
	}

	h, err := c.ListBreakerHistoryWithResponse(ctx, &ListBreakerHistoryParams{})
	if err != nil {
		return err
	}
	if l := h.JSON200; l != nil {
		bh := l.Breakers[0]
		var seg BreakerSegment = bh.Segments[0]
		var state BreakerState = seg.State
		var closed float64 = bh.Seconds.Closed
		_, _, _ = seg, state, closed
	}

	e, err := c.ListEventsWithResponse(ctx, &ListEventsParams{})
	if err != nil {
		return err
	}
	if l := e.JSON200; l != nil {
		ev := l.Events[0]
		var kind *EventKind = ev.Kind
		var from, to EventState = ev.From, ev.To
		var op EventOperation = ev.Operation
		var after *float64 = ev.Evidence.RetryAfter
		var failures *int64 = ev.Evidence.Failures
		var source *string = ev.Source
		var added *[]string = ev.Added
		var unmapped *UnmappedCounts = ev.Unmapped
		_, _, _, _, _, _, _, _, _ = kind, from, to, op, after, failures, source, added, unmapped
	}

	d, err := c.ListDLQWithResponse(ctx)
	if err != nil {
		return err
	}
	if l := d.JSON200; l != nil {
		var attempts int64 = l.Entries[0].Attempts
		var query, watch *string = l.Entries[0].QueryId, l.Entries[0].WatchId
		// The payload is a query's delivery or a watch's.
		if ev, err := l.Entries[0].Payload.AsWebhookEvent(); err == nil {
			var result Result = ev.Data.Result
			_ = result
		}
		if ev, err := l.Entries[0].Payload.AsWatchEvent(); err == nil {
			var added []Infraction = ev.Data.Changes.Added
			_ = added
		}
		_, _, _ = attempts, query, watch
	}

	w, err := c.CreateWatchWithResponse(ctx, CreateWatchJSONRequestBody{Domain: ptr("AB123CD"), CallbackUrl: "https://hooks.example.com/w", Interval: ptr("24h")})
	if err != nil {
		return err
	}
	if v := w.JSON201; v != nil {
		var id, interval string = v.WatchId, v.Interval
		var last *time.Time = v.LastCheckAt
		var success *time.Time = v.Sources[0].LastSuccessAt
		var problem *Problem = v.Sources[0].Problem
		var domain *string = v.Subject.Domain
		_, _, _, _, _, _ = id, interval, last, success, problem, domain
	}
	if p := w.ApplicationproblemJSON409; p != nil {
		var slug string = p.Type
		_ = slug
	}
	ws, err := c.ListWatchesWithResponse(ctx, &ListWatchesParams{Limit: ptr(int64(10))})
	if err != nil {
		return err
	}
	if l := ws.JSON200; l != nil {
		var next *string = l.NextCursor
		var first Watch = l.Watches[0]
		_, _ = next, first
	}

	s, err := c.ListSourcesWithResponse(ctx)
	if err != nil {
		return err
	}
	if cov := s.JSON200; cov != nil {
		var available bool = cov.Sources[0].Operations.ByDomain.Available
		_ = available
	}

	// A streamed answer's events (SPEC 14): an integrator decodes each
	// SSE data or NDJSON line into a StreamEvent and branches on its type.
	var ev StreamEvent
	if err := ev.UnmarshalJSON([]byte(`{"type": "summary"}`)); err != nil {
		return err
	}
	switch typ, err := ev.Discriminator(); {
	case err != nil:
		return err
	case typ == string(Source):
		se, err := ev.AsSourceEvent()
		if err != nil {
			return err
		}
		var infractions []Infraction = se.Infractions
		var status SourceEventStatus = se.Status
		var asOf *Remembered = se.Remembered
		_, _, _ = infractions, status, asOf
	case typ == string(SummaryEventTypeSummary):
		sum, err := ev.AsSummaryEvent()
		if err != nil {
			return err
		}
		var counts Summary = sum.Summary
		var complete bool = sum.Complete
		var why *StreamProblem = sum.Problem
		_, _, _ = counts, complete, why
	}

	r, err := c.GetAdminReadyzWithResponse(ctx)
	if err != nil {
		return err
	}
	if v := r.JSON200; v != nil {
		var detail *string = (*v.Checks)["redis"].Detail
		_ = detail
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
