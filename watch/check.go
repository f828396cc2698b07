package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/async"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/ratelimit"
)

// retryCeiling bounds the wait between the calls of a retained source
// whose breaker stays closed while its calls fail (as in async).
const retryCeiling = 30 * time.Second

// work is one turn on claimed watch c: it hands over a delivery left by a
// previous turn, starts the check that is due, calls the sources that may
// be called, and ends the check when every source succeeded or its time
// is up. Every write presents c's token: a turn whose lease was taken
// over writes nothing.
func (m *Manager) work(c *Claim) {
	ctx := m.ctx
	w := &c.Watch
	if c.Out != nil {
		if !m.handOver(ctx, c, c.Out) {
			return
		}
		c.Out = nil
	}
	now := m.clock.Now()
	q, err := openSubject(m.opts.Keys, w.ID, c.Subject)
	if err != nil {
		// Sealed under a key no longer configured, or corrupt: nothing to
		// check, ever; the watch stays for its owner to see and delete.
		m.opts.Logger.Warn("watch subject cannot be opened: check skipped", "watch_id", w.ID)
		w.Check = nil
		if !now.Before(w.NextCheckAt) {
			w.NextCheckAt = nextCheck(w.NextCheckAt, w.Interval, now)
			m.observe(OutcomeFailed, 0)
		}
		m.save(ctx, c, &Update{Watch: *w, Due: w.NextCheckAt})
		return
	}
	if w.Check == nil {
		if now.Before(w.NextCheckAt) {
			m.save(ctx, c, &Update{Watch: *w, Due: w.NextCheckAt})
			return
		}
		m.begin(w, q, now)
	}
	held := Infractions{}
	if c.Held != nil {
		if held, err = openInfractions(m.opts.Keys, w.ID, partHeld, c.Held); err != nil {
			held = Infractions{} // its sources are called again
		}
	}
	for i := range w.Check.Parts {
		p := &w.Check.Parts[i]
		if _, ok := held[p.Source]; p.Done && !ok {
			p.Done = false
		}
	}
	set, idx := m.releasable(ctx, w, q.Operation(), now)
	if len(set) > 0 {
		res := m.opts.Engine.Query(ctx, q, set, m.opts.Budget)
		if ctx.Err() != nil {
			return // shutting down: the lease hands the check on
		}
		m.apply(ctx, w, q.Operation(), held, idx, res, now)
		now = m.clock.Now()
	}
	if w.Check.done() || !now.Before(w.Check.Until) {
		m.finish(ctx, c, q, held, now)
		return
	}
	var sealed []byte
	if len(held) > 0 {
		if sealed, err = sealInfractions(m.opts.Keys, w.ID, partHeld, held); err != nil {
			m.storeError("sealing a check", err)
			return
		}
	}
	m.save(ctx, c, &Update{Watch: *w, Held: sealed, Due: w.Check.due(now)})
}

// save writes u for claim c; a write refused (the lease was taken over, or
// the watch deleted) is the other's turn.
func (m *Manager) save(ctx context.Context, c *Claim, u *Update) bool {
	ok, err := m.store.Save(ctx, c.Watch.ID, c.Token, u)
	m.storeError("saving a watch", err)
	return ok
}

// begin starts the check of w that is due at w.NextCheckAt, and schedules
// the next one an interval later.
func (m *Manager) begin(w *Watch, q aggregator.Query, now time.Time) {
	due := w.NextCheckAt
	if m.opts.Observer != nil {
		m.opts.Observer.WatchLag(max(now.Sub(due), 0))
	}
	w.NextCheckAt = nextCheck(due, w.Interval, now)
	until := now.Add(min(m.opts.MaxWait, w.Interval))
	if until.After(w.NextCheckAt) {
		until = w.NextCheckAt
	}
	c := &Check{Due: due, Started: now, Until: until, Parts: []Part{}}
	for _, mem := range m.selection(w, q) {
		c.Parts = append(c.Parts, Part{Source: mem.Source.ID(), NextTry: now})
	}
	w.Check = c
}

// nextCheck is the first due time after now in due's phase: due plus
// whole intervals.
func nextCheck(due time.Time, interval time.Duration, now time.Time) time.Time {
	next := due.Add(interval)
	if !next.After(now) {
		next = due.Add(interval * (now.Sub(due)/interval + 1))
	}
	return next
}

// done reports whether every source of c has succeeded.
func (c *Check) done() bool {
	for _, p := range c.Parts {
		if !p.Done {
			return false
		}
	}
	return true
}

// due is when c is next looked at: its first retained source's next try
// (a breaker's reopening, a pause's end, a backoff), never after the check
// ends. Retained checks are not polled: an outage that retains every
// watch's check costs no work until the source may be called again.
func (c *Check) due(now time.Time) time.Time {
	due := c.Until
	for _, p := range c.Parts {
		if !p.Done && p.NextTry.Before(due) {
			due = p.NextTry
		}
	}
	if due.Before(now) {
		return now
	}
	return due
}

// releasable picks the sources of w's check that may be called now: their
// wait is over or their breaker recovered since, the breaker lets calls
// through, the portal is not paused, and the watches' share of the
// source's budget has a token. A source that may not is given its next
// try: when the breaker reopens, the pause ends, the share refills.
func (m *Manager) releasable(ctx context.Context, w *Watch, op aggregator.Operation, now time.Time) ([]fanout.Member, []int) {
	var set []fanout.Member
	var idx []int
	for i := range w.Check.Parts {
		p := &w.Check.Parts[i]
		if p.Done {
			continue
		}
		mem, ok := m.opts.Engine.Member(p.Source)
		if !ok {
			p.NextTry = w.Check.Until // no longer configured: it fails the check
			continue
		}
		id := mem.BreakerID(op)
		if now.Before(p.NextTry) && !m.recoveredSince(id, p.LastTry) {
			continue
		}
		if st, err := m.opts.Breakers.Status(ctx, id); err == nil {
			switch st.State {
			case breaker.Open:
				p.NextTry = st.OpenUntil
				continue
			case breaker.ForcedOpen:
				p.NextTry = now.Add(m.opts.Poll)
				continue
			}
		}
		if m.opts.Limiter != nil {
			if d := m.opts.Limiter.PausedFor(ctx, p.Source); d > 0 {
				p.NextTry = now.Add(d)
				continue
			}
		}
		if m.opts.Budgets != nil {
			_, err := m.opts.Budgets.Decide(ctx, BudgetKey(p.Source), 0)
			var le *ratelimit.LimitedError
			if errors.As(err, &le) {
				p.NextTry = now.Add(max(le.RetryAfter, time.Millisecond))
				continue
			}
			if err != nil {
				continue // shutting down
			}
		}
		set = append(set, mem)
		idx = append(idx, i)
	}
	return set, idx
}

// apply records the answers of res, whose sources are the check's parts
// idx, in order: a source that succeeded is done and its infractions held;
// one that did not is retained until its next try.
func (m *Manager) apply(ctx context.Context, w *Watch, op aggregator.Operation, held Infractions, idx []int, res aggregator.Result, at time.Time) {
	found := make(map[string][]aggregator.Infraction)
	for _, in := range res.Infractions {
		found[in.Source] = append(found[in.Source], in)
	}
	for k, i := range idx {
		if k >= len(res.Sources) {
			break
		}
		p := &w.Check.Parts[i]
		e := res.Sources[k]
		p.Tries++
		p.LastTry = at
		st := statusOf(w, p.Source)
		if st == nil {
			w.Status = append(w.Status, SourceStatus{Source: p.Source})
			st = &w.Status[len(w.Status)-1]
		}
		if e.Status == aggregator.EntrySucceeded {
			p.Done = true
			held[p.Source] = Read{AsOf: at, Infractions: unique(found[p.Source])}
			t := at
			st.LastSuccessAt, st.Problem = &t, nil
			continue
		}
		if e.Problem != nil {
			pr := *e.Problem
			pr.Instance, pr.RequestID = "", ""
			st.Problem = &pr
		}
		wait := min(m.opts.Poll<<min(p.Tries, 16), retryCeiling)
		if e.Problem != nil && e.Problem.RetryAfter != nil {
			ra := time.Duration(*e.Problem.RetryAfter) * time.Second
			if e.Outcome.Skipped() {
				wait = max(ra, m.opts.Poll) // not consulted: go again when the breaker or pause says
			} else {
				wait = max(wait, ra)
			}
		}
		p.NextTry = at.Add(wait)
		if mem, ok := m.opts.Engine.Member(p.Source); ok {
			if st, err := m.opts.Breakers.Status(ctx, mem.BreakerID(op)); err == nil && st.State == breaker.Open && st.OpenUntil.Before(p.NextTry) {
				// The failure tripped the breaker (or was its probe): its
				// pause says when to go again.
				p.NextTry = st.OpenUntil
			}
		}
	}
}

// finish ends the check of claim c: each source that succeeded is
// compared with its last known infractions (a source with none is its
// baseline); when anything differs, the new last known infractions and
// the delivery that reports them are written at once, by compare-and-set
// on their version, and the delivery is handed over.
func (m *Manager) finish(ctx context.Context, c *Claim, q aggregator.Query, held Infractions, now time.Time) {
	w := &c.Watch
	known := Infractions{}
	if c.Known != nil {
		k, err := openInfractions(m.opts.Keys, w.ID, partKnown, c.Known)
		if err != nil {
			// Sealed under a key no longer configured, or corrupt: every
			// source is read as for the first time.
			m.opts.Logger.Warn("watch's last known infractions cannot be opened: its sources are baselined again", "watch_id", w.ID)
		} else {
			known = k
		}
	}
	configured := map[string]bool{}
	for _, mem := range m.selection(w, q) {
		configured[mem.Source.ID()] = true
	}
	next := Infractions{}
	for source, r := range known {
		if configured[source] {
			next[source] = r // a source no longer asked for is forgotten
		}
	}
	changes := empty()
	baseline := []string{}
	changed, succeeded := 0, 0
	for _, p := range w.Check.Parts {
		if !p.Done {
			continue // a source that failed keeps what was known of it
		}
		succeeded++
		r := held[p.Source]
		old, ok := known[p.Source]
		if !ok {
			baseline = append(baseline, p.Source)
			changes.Added = append(changes.Added, r.Infractions...)
			next[p.Source] = r
			continue
		}
		d := Diff(old.Infractions, r.Infractions)
		changes.add(d)
		changed += d.Len()
		if !sameInfractions(old.Infractions, r.Infractions) {
			next[p.Source] = r
		}
	}
	outcome := OutcomeUnchanged
	switch deliver := len(baseline) > 0 || changed > 0; {
	case succeeded == 0:
		outcome = OutcomeFailed
	case deliver:
		outcome = OutcomeChanged
	case succeeded < len(w.Check.Parts):
		outcome = OutcomePartial
	}
	w.Check = nil
	end := now
	w.LastCheckAt = &end
	u := &Update{Watch: *w, Due: w.NextCheckAt}
	if outcome == OutcomeChanged {
		// Until the delivery is handed over, the watch is due again when
		// this turn's lease ends: a replica that dies in between leaves the
		// delivery to the next within the lease.
		u.Due = now.Add(m.opts.Lease)
	}
	var out []byte
	if outcome == OutcomeChanged || len(next) != len(known) || !sameKnown(known, next) {
		sealed, err := sealInfractions(m.opts.Keys, w.ID, partKnown, next)
		if err != nil {
			m.storeError("sealing a watch", err)
			return
		}
		u.Known, u.Version = sealed, c.Version+1
		if outcome == OutcomeChanged {
			payload, err := json.Marshal(Event{Type: EventChanged, Timestamp: now, Data: EventData{
				WatchID: w.ID, Subject: subjectOf(q), CheckedAt: now,
				Baseline: changed == 0, BaselineSources: baseline, Changes: changes,
			}})
			if err == nil {
				out, err = sealOut(m.opts.Keys, w.ID, outbox{Version: u.Version, Payload: payload})
			}
			if err != nil {
				m.storeError("sealing a delivery", err)
				return
			}
			u.Out = out
		}
	}
	if !m.save(ctx, c, u) {
		return // taken over, or deleted: the other turn reports
	}
	m.observe(outcome, changed)
	level := slog.LevelInfo
	if outcome == OutcomeUnchanged {
		level = slog.LevelDebug // the common case, at every interval of every watch
	}
	m.opts.Logger.Log(ctx, level, "watch checked", "watch_id", w.ID, "outcome", outcome, "changes", changed,
		"baseline_sources", len(baseline), "sources", len(configured))
	if out != nil {
		c.Version = u.Version
		m.handOver(ctx, c, out)
	}
}

// sameInfractions reports whether two reads of a source say the same.
func sameInfractions(a, b []aggregator.Infraction) bool {
	ea, errA := json.Marshal(a)
	eb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ea, eb)
}

// sameKnown reports whether a and b hold the same reads (the same
// sources, each with the same infractions as of the same time).
func sameKnown(a, b Infractions) bool {
	if len(a) != len(b) {
		return false
	}
	for source, r := range a {
		o, ok := b[source]
		if !ok || !o.AsOf.Equal(r.AsOf) || !sameInfractions(r.Infractions, o.Infractions) {
			return false
		}
	}
	return true
}

// handOver gives the delivery sealed in out to the deliveries, then
// forgets it in the watch. The delivery's id and webhook-id derive from
// the watch and the version it reports: handed over twice (a replica died
// in between), it is one delivery, one message. When the watch was
// deleted meanwhile, the delivery is cancelled. It reports whether the
// turn may go on.
func (m *Manager) handOver(ctx context.Context, c *Claim, out []byte) bool {
	w := &c.Watch
	o, err := openOut(m.opts.Keys, w.ID, out)
	if err == nil && o.Version != c.Version {
		err = errUnopenable // not the delivery of the version it is kept with
	}
	if err != nil {
		m.opts.Logger.Warn("watch delivery cannot be opened: dropped", "watch_id", w.ID)
		_, err := m.store.ClearOut(ctx, w.ID, c.Token, c.Version, w.NextCheckAt)
		m.storeError("dropping a delivery", err)
		return true
	}
	id, msg := async.WatchMessage(w.ID, o.Version)
	err = m.opts.Deliveries.Send(ctx, async.Delivery{ID: id, MessageID: msg, WatchID: w.ID, Signer: w.Owner,
		CallbackURL: w.CallbackURL, Payload: o.Payload})
	if err != nil {
		m.storeError("handing a delivery over", err)
		return false // the next claim hands it over
	}
	cleared, err := m.store.ClearOut(ctx, w.ID, c.Token, o.Version, m.dueAfter(w, m.clock.Now()))
	if err != nil {
		m.storeError("forgetting a delivery handed over", err)
		return true
	}
	if !cleared {
		if _, err := m.store.Get(ctx, w.ID); errors.Is(err, ErrNotFound) {
			// Deleted (or forgotten) while its check ended: the delivery
			// must not go.
			m.storeError("cancelling a delivery", m.opts.Deliveries.CancelWatch(ctx, w.ID))
		}
		return false
	}
	return true
}

// dueAfter is when w is due once its delivery is handed over: its check in
// progress's next turn, or its next check.
func (m *Manager) dueAfter(w *Watch, now time.Time) time.Time {
	if w.Check != nil {
		return w.Check.due(now)
	}
	return w.NextCheckAt
}

func (m *Manager) observe(outcome string, changes int) {
	if m.opts.Observer != nil {
		m.opts.Observer.WatchChecked(outcome, changes)
	}
}
