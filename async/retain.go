package async

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
)

// retryCeiling bounds the wait between retention calls of a source whose
// breaker stays closed while its calls fail.
const retryCeiling = 30 * time.Second

// retain works on pending query id: it expires it, or calls again the
// sources that may be called, and completes it when all have succeeded.
func (m *Manager) retain(id string) {
	ctx := m.ctx
	q, err := m.store.Query(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return // gone, or unreadable: the store took it off the schedule
	}
	if err != nil {
		m.storeError("reading a query", err)
		return
	}
	if q.Status != Pending {
		return // finished by another replica
	}
	// No query waits longer than max_wait: a stored expiry further ahead
	// (garbage, or a max_wait since lowered) would keep calling portals.
	if limit := q.CreatedAt.Add(m.opts.MaxWait); q.ExpiresAt.After(limit) {
		q.ExpiresAt = limit
	}
	now := m.clock.Now()
	if now.Before(q.ExpiresAt) {
		set, idx := m.releasable(ctx, q, now)
		if len(set) > 0 {
			// The lookups start traces of their own, linked to the request
			// that created the query.
			res := m.opts.Engine.Query(q.Trace.link(ctx), q.Lookup(), set, m.opts.Budget)
			if ctx.Err() != nil {
				return // shutting down: the lease hands the query on
			}
			m.apply(ctx, q, idx, res, now, true)
			now = m.clock.Now()
		}
	}
	m.storeError("saving a query", m.settle(ctx, q, now))
}

// releasable picks the retained sources of q that may be called now: their
// wait is over or their breaker recovered since, the breaker lets calls
// through, the portal is not paused, and the source's release pace has a
// slot. It returns them with their part indexes.
func (m *Manager) releasable(ctx context.Context, q *Query, now time.Time) ([]fanout.Member, []int) {
	op := q.Lookup().Operation()
	var set []fanout.Member
	var idx []int
	for i := range q.Parts {
		p := &q.Parts[i]
		if p.Entry.Status == aggregator.EntrySucceeded {
			continue
		}
		mem, ok := m.opts.Engine.Member(p.Entry.Source)
		if !ok {
			continue // no longer configured: the query will expire
		}
		id := mem.BreakerID(op)
		if now.Before(p.NextTry) && !m.recoveredSince(id, p.LastTry) {
			continue
		}
		if st, err := m.opts.Breakers.Status(ctx, id); err == nil {
			switch st.State {
			case breaker.Open:
				p.NextTry, p.Slot = st.OpenUntil, time.Time{}
				continue
			case breaker.ForcedOpen:
				p.NextTry, p.Slot = now.Add(m.opts.Poll), time.Time{}
				continue
			}
		}
		if m.opts.Limiter != nil {
			if d := m.opts.Limiter.PausedFor(ctx, p.Entry.Source); d > 0 {
				p.NextTry, p.Slot = now.Add(d), time.Time{}
				continue
			}
		}
		if w := m.pace.admit("source\x00"+p.Entry.Source, &p.Slot, now); w > 0 {
			p.NextTry = p.Slot
			continue
		}
		set = append(set, mem)
		idx = append(idx, i)
	}
	return set, idx
}

// apply records the answers of res (whose sources are q.Parts[idx...], in
// order) in q. retry says whether these were retention calls.
func (m *Manager) apply(ctx context.Context, q *Query, idx []int, res aggregator.Result, at time.Time, retry bool) {
	found := make(map[string][]aggregator.Infraction)
	for _, in := range res.Infractions {
		found[in.Source] = append(found[in.Source], in)
	}
	for k, i := range idx {
		if k >= len(res.Sources) {
			break
		}
		p := &q.Parts[i]
		e := res.Sources[k]
		if retry {
			p.Tries++
		}
		p.LastTry = at
		stood := p.Entry.StoodIn() // a remembered answer stood in before
		before := p.Entry.Remembered
		p.Entry = e
		if e.Status == aggregator.EntrySucceeded {
			p.Infractions = found[e.Source]
			p.NextTry = time.Time{}
			continue
		}
		switch {
		case e.StoodIn():
			p.Infractions = found[e.Source] // marked stale (SPEC 14)
		case stood:
			// A retry never reads memory: what stood in on the first run
			// stays until the source succeeds.
			p.Entry.Remembered = before
		default:
			p.Infractions = nil
		}
		wait := min(m.opts.Poll<<min(p.Tries, 16), retryCeiling)
		if e.Problem != nil && e.Problem.RetryAfter != nil {
			wait = max(wait, time.Duration(*e.Problem.RetryAfter)*time.Second)
		}
		if e.Outcome == aggregator.SkippedOpen || e.Outcome == aggregator.SkippedRateLimited {
			// Not consulted: go again when the breaker or pause says.
			if e.Problem != nil && e.Problem.RetryAfter != nil {
				wait = time.Duration(*e.Problem.RetryAfter) * time.Second
			}
		}
		p.NextTry = at.Add(wait)
		if until, ok := m.openUntil(ctx, e.Source, q.Lookup().Operation()); ok && until.Before(p.NextTry) {
			// The failure tripped the source's breaker, or was its probe:
			// the breaker's pause, not the backoff, says when to go again,
			// so that the call is ready when the portal recovers.
			p.NextTry = until
		}
	}
}

// openUntil is when the open breaker of source's operation lets calls
// through again (false when it is not open, or forced open).
func (m *Manager) openUntil(ctx context.Context, source string, op aggregator.Operation) (time.Time, bool) {
	mem, ok := m.opts.Engine.Member(source)
	if !ok {
		return time.Time{}, false
	}
	st, err := m.opts.Breakers.Status(ctx, mem.BreakerID(op))
	if err != nil || st.State != breaker.Open {
		return time.Time{}, false
	}
	return st.OpenUntil, true
}

// settle stores q after work on it: completed when every source has
// succeeded, expired when max_wait has passed (both delivered), else
// pending and due when its next source may go.
func (m *Manager) settle(ctx context.Context, q *Query, now time.Time) error {
	switch {
	case q.done():
		return m.finish(ctx, q, Completed, now)
	case !now.Before(q.ExpiresAt):
		return m.finish(ctx, q, Expired, now)
	}
	due := now.Add(m.opts.Poll)
	if q.ExpiresAt.Before(due) {
		due = q.ExpiresAt
	}
	for _, p := range q.Parts {
		if p.Entry.Status != aggregator.EntrySucceeded && p.NextTry.Before(due) {
			due = p.NextTry
		}
	}
	_, err := m.store.SaveQuery(ctx, q, due)
	return err
}

// finish ends q with status and schedules its delivery.
func (m *Manager) finish(ctx context.Context, q *Query, status Status, now time.Time) error {
	q.Status = status
	at := now
	q.CompletedAt = &at
	typ := EventCompleted
	if status == Expired {
		typ = EventExpired
	}
	payload, err := json.Marshal(Event{Type: typ, Timestamp: now, Data: EventData{ID: q.ID, Status: status, Result: q.Result()}})
	if err != nil {
		return err
	}
	d := &Delivery{ID: newID("dlv_"), MessageID: "msg_" + q.ID, QueryID: q.ID, CallbackURL: q.CallbackURL,
		Signer: q.Signer, Payload: payload, CreatedAt: now, Due: now, Trace: q.Trace}
	ok, err := m.store.FinishQuery(ctx, q, d, m.opts.Keep)
	if err != nil {
		return err
	}
	if !ok {
		return nil // finished by another replica meanwhile
	}
	m.opts.Logger.Info("asynchronous query finished", "query_id", q.ID, "status", string(status),
		"succeeded", q.Result().Summary.Succeeded, "total", len(q.Parts))
	m.poke()
	return nil
}
