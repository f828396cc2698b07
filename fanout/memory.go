package fanout

import (
	"context"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/memory"
)

// recall reads, in one read of the memory, what each member of set that
// may serve a fresh answer under d remembers of q (SPEC 14); with d nil,
// nothing.
func (e *Engine) recall(ctx context.Context, q aggregator.Query, set []Member, d *memory.Directives) recalled {
	if e.opts.Memory == nil || d == nil {
		return nil
	}
	var wants []memory.Want
	var idx []int
	for i, m := range set {
		if d.MayServeFresh(m.Memory) {
			wants = append(wants, memory.Want{Source: m.Source.ID(), Policy: m.Memory})
			idx = append(idx, i)
		}
	}
	if len(wants) == 0 {
		return nil
	}
	out := make(recalled, len(set))
	for j, r := range e.opts.Memory.RecallAll(ctx, q, wants) {
		out[idx[j]] = r
	}
	return out
}

// recalled is what recall found for each member of a set; nil when
// nothing was looked for.
type recalled []memory.Recalled

// at is what was found for member i, nothing when nothing was looked for.
func (r recalled) at(i int) memory.Recalled {
	if r == nil {
		return memory.Recalled{}
	}
	return r[i]
}

// part is one member's share of a query, with its memory (SPEC 14): a
// remembered answer r fresh enough under d is the entry, without a portal
// call (no limiter, no breaker, no budget spent); otherwise the portal is
// called, and, when that fails and d allows it, a recent remembered answer
// stands in. With d nil nothing remembered is used.
func (e *Engine) part(ctx context.Context, m Member, q aggregator.Query, d *memory.Directives, r memory.Recalled) aggregator.Part {
	mem := e.opts.Memory
	if mem == nil || !m.Memory.Remembers() {
		return e.shared(ctx, m, q, memory.Ticket{})
	}
	id := m.Source.ID()
	if now := e.opts.Now(); r.Found && d != nil && d.Fresh(m.Memory, r.Answer.Age(now)) {
		e.memoryHit(id, memory.HitFresh)
		return e.remembered(m, q.Operation(), r.Answer)
	}
	return e.standIn(ctx, m, q, d, e.shared(ctx, m, q, r.Ticket))
}

// standIn is p, m's part of q, or, when p did not succeed and d allows it,
// with a recent remembered answer standing in (SPEC 14).
func (e *Engine) standIn(ctx context.Context, m Member, q aggregator.Query, d *memory.Directives, p aggregator.Part) aggregator.Part {
	mem := e.opts.Memory
	if mem == nil || !m.Memory.Remembers() || p.Status == aggregator.EntrySucceeded || d == nil || !d.MayStandIn(m.Memory) {
		return p
	}
	// The query's budget may be spent (the source was cut short by it):
	// the stand-in is read on the store's own time bound.
	id := m.Source.ID()
	a, ok, _ := mem.Recall(context.WithoutCancel(ctx), id, m.Memory, q)
	if !ok || !d.Stale(m.Memory, a.Age(e.opts.Now())) {
		return p
	}
	e.memoryHit(id, memory.HitStale)
	p.Remembered = &aggregator.Remembered{AsOf: a.AsOf}
	p.Infractions = make([]aggregator.Infraction, len(a.Infractions))
	for i, in := range a.Infractions {
		in.Stale = true
		p.Infractions[i] = in
	}
	return p
}

// remembered is the succeeded entry of a fresh remembered answer: its
// duration is none, no portal was called.
func (e *Engine) remembered(m Member, op aggregator.Operation, a memory.Answer) aggregator.Part {
	p := e.entry(m, op, aggregator.Succeeded, 0, nil, 0, "")
	n, ms := len(a.Infractions), int64(0)
	p.Count, p.DurationMS = &n, &ms
	p.Remembered = &aggregator.Remembered{AsOf: a.AsOf}
	p.Infractions = a.Infractions
	return p
}

// ticket is t, or, when t is not valid and m remembers, a ticket taken
// now: before the portal is called, so that a subject forgotten while the
// call is in flight is not written back.
func (e *Engine) ticket(ctx context.Context, m Member, q aggregator.Query, t memory.Ticket) memory.Ticket {
	if t.Valid() || e.opts.Memory == nil || !m.Memory.Remembers() {
		return t
	}
	return e.opts.Memory.Ticket(ctx, m.Source.ID(), m.Memory, q)
}

// keep remembers a successful lookup's infractions. The write is not cut
// short by the query's budget (the lookup made it in time); the store
// bounds it.
func (e *Engine) keep(ctx context.Context, t memory.Ticket, infractions []aggregator.Infraction) {
	if t.Valid() {
		_, _ = e.opts.Memory.Keep(context.WithoutCancel(ctx), t, infractions)
	}
}

func (e *Engine) memoryHit(source, kind string) {
	if mo, ok := e.opts.Observer.(MemoryObserver); ok {
		mo.MemoryHit(source, kind)
	}
}
