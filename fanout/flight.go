package fanout

import (
	"context"
	"sync"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/memory"
)

// flightKey names a lookup: identical ones in flight at once are made
// once.
type flightKey struct {
	source string
	op     aggregator.Operation
	value  string
}

// flightCall is a lookup in flight. Its leader runs it on its own
// goroutine; followers wait for done, made by the first of them (most
// lookups have none).
type flightCall struct {
	done chan struct{}
	p    aggregator.Part
}

// flights is a group of lookups in flight, like singleflight's, but the
// leader calls on its caller's goroutine: no goroutine, channel or closure
// per lookup. What keeps a query within its budget when a call overruns
// its context is the query's wait (query), not the flight.
type flights struct {
	mu    sync.Mutex
	calls map[flightKey]*flightCall
}

// shared makes identical lookups in flight at the same time once. A
// follower whose leader was cut short by the leader's own budget calls for
// itself. t is the caller's memory ticket (memory.go), for the call it
// leads.
func (e *Engine) shared(ctx context.Context, m Member, q aggregator.Query, t memory.Ticket) aggregator.Part {
	key := flightKey{source: m.Source.ID(), op: q.Operation(), value: q.Value()}
	f := &e.flight
	f.mu.Lock()
	if c, ok := f.calls[key]; ok {
		if c.done == nil {
			c.done = make(chan struct{})
		}
		done := c.done
		f.mu.Unlock()
		return e.follow(ctx, m, q, t, c, done)
	}
	if f.calls == nil {
		f.calls = make(map[flightKey]*flightCall)
	}
	c := &flightCall{}
	f.calls[key] = c
	f.mu.Unlock()

	defer func() {
		f.mu.Lock()
		delete(f.calls, key)
		done := c.done
		f.mu.Unlock()
		if done != nil {
			close(done) // after c.p is set: followers read it once done is closed
		}
	}()
	c.p = e.lookup(ctx, m, q, t)
	return c.p
}

// follow waits for the lookup c that another caller leads.
func (e *Engine) follow(ctx context.Context, m Member, q aggregator.Query, t memory.Ticket, c *flightCall, done chan struct{}) aggregator.Part {
	select {
	case <-done:
		if c.p.Outcome == aggregator.Deadline && ctx.Err() == nil {
			return e.lookup(ctx, m, q, t) // the leader's budget, not ours, ran out
		}
		return c.p
	case <-ctx.Done():
		// The call under way ends with the budget too (everything in it
		// honours ctx): a short grace lets its outcome, which may name an
		// earlier attempt's failure, be the one reported.
		grace := time.NewTimer(budgetGrace)
		defer grace.Stop()
		select {
		case <-done:
			return c.p
		case <-grace.C:
		}
		return e.overrun(m, q.Operation())
	}
}

// budgetGrace is how long past the query's budget the outcome of a call
// under way is waited for: every call honours the budget, so its outcome
// (which may name an earlier attempt's failure) is due at once.
const budgetGrace = 50 * time.Millisecond

// overrun is the entry of a member whose part was not done within the
// query's budget and its grace.
func (e *Engine) overrun(m Member, op aggregator.Operation) aggregator.Part {
	return e.entry(m, op, aggregator.Deadline, 0, nil, 0, "The query's budget ran out before the source answered.")
}
