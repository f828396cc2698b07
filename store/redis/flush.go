package redisstore

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/breaker"
)

// Defaults of Options.FlushInterval and Options.RefreshInterval.
const (
	DefaultFlushInterval   = 20 * time.Millisecond
	DefaultRefreshInterval = time.Second
)

// scriptLoads is how often a pipeline loads the scripts the server lost
// before it gives up: once is enough unless the server loses them again
// meanwhile (a SCRIPT FLUSH, a second restart or failover).
const scriptLoads = 3

var errScriptsLost = errors.New("redis store: the server lost the breaker scripts again after each load")

// scriptCall is one breaker script to run in a pipeline.
type scriptCall struct {
	script *redis.Script
	e      *entry
	args   []any
}

// pipeline runs calls in one round trip (on a Cluster, one per node, in
// parallel), bounded by the store timeout, and returns their replies in
// order. Scripts the server does not know (a restarted Redis, a promoted
// replica) are loaded and only the calls that met them are made again:
// the others ran, and a flush run twice would count its calls twice.
func (s *Stores) pipeline(ctx context.Context, calls []scriptCall) ([][]any, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	out := make([][]any, len(calls))
	todo := make([]int, len(calls)) // indexes of calls not answered yet
	for i := range todo {
		todo[i] = i
	}
	for attempt := 0; ; attempt++ {
		pipe := s.client.Pipeline()
		cmds := make([]*redis.Cmd, len(todo))
		for j, i := range todo {
			c := calls[i]
			cmds[j] = c.script.EvalSha(cctx, pipe, []string{c.e.key}, c.args...)
		}
		_, _ = pipe.Exec(cctx)
		var again []int
		missing := map[*redis.Script]bool{}
		var failed error
		for j, cmd := range cmds {
			i := todo[j]
			res, err := cmd.Slice()
			switch {
			case err != nil && redis.HasErrorPrefix(err, "NOSCRIPT"):
				missing[calls[i].script] = true
				again = append(again, i)
			case err != nil && failed == nil:
				failed = err
			}
			out[i] = res
		}
		if failed != nil {
			return nil, failed
		}
		if len(missing) == 0 {
			return out, nil
		}
		if attempt == scriptLoads {
			return nil, errScriptsLost
		}
		for script := range missing {
			if err := script.Load(cctx, s.client).Err(); err != nil {
				return nil, err
			}
		}
		todo = again
	}
}

// loop sends the pending counts of every breaker each FlushInterval, in one
// pipelined round trip, and reads every breaker again each RefreshInterval
// (or when asked: a (re)subscription), in the same round trip: a read made
// after the subscription was confirmed makes the views count again
// (Stores.Listening). Nothing is sent while no call was made and no
// refresh is due.
func (b *BreakerStore) loop(ctx context.Context) {
	defer b.st.done.Done()
	t := time.NewTicker(b.st.opts.FlushInterval)
	defer t.Stop()
	last := time.Now()
	for {
		refresh := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			refresh = time.Since(last) >= b.st.opts.RefreshInterval
		case <-b.refresh:
			refresh = true
		}
		if b.st.Degraded() {
			continue
		}
		if refresh {
			last = time.Now()
		}
		sub := b.st.sub.Load()
		if b.sync(ctx, false, refresh) && refresh {
			b.st.readAgain(sub)
		}
		if refresh && b.st.Listening() && b.settingsMissed.Swap(false) && b.st.opts.OnListening != nil {
			// What other replicas shared while this one was deaf is not
			// lost until its restart (LoadSettings).
			if !b.st.opts.OnListening(ctx) {
				b.settingsMissed.Store(true) // again at the next refresh
			}
		}
	}
}

// successesEvery is how many flush intervals a breaker's pending counts may
// wait when they hold no failure: successes never trip a breaker, and a
// healthy fleet sends its counts ten times less often. A failure goes at
// the next flush, with every success pending before it.
const successesEvery = 10

// sync flushes the pending counts (all of them with force) and, with
// refresh, reads every other breaker (writing back those Redis lost). It
// reports whether Redis took it.
func (b *BreakerStore) sync(ctx context.Context, force, refresh bool) bool {
	now := b.clock()
	wall := time.Now()
	late := successesEvery * b.st.opts.FlushInterval
	var calls []scriptCall
	var sending []*entry
	b.each(func(e *entry) {
		e.send.Lock() // held until the counts taken here are in the view
		e.mu.Lock()
		flush := !e.p.empty() && (force || e.p.f > 0 || wall.Sub(e.flushed) >= late)
		switch {
		case flush:
			e.flushed = wall
			calls = append(calls, scriptCall{flushScript, e, e.flushArgs(e.take())})
			sending = append(sending, e)
		case refresh && e.args != nil:
			calls = append(calls, scriptCall{peekScript, e, e.argv(now)})
		}
		e.mu.Unlock()
		if !flush {
			e.send.Unlock()
		}
	})
	defer func() {
		for _, e := range sending {
			e.send.Unlock()
		}
	}()
	return b.run(ctx, calls, now)
}

// run runs calls and applies their replies, publishing their transitions.
func (b *BreakerStore) run(ctx context.Context, calls []scriptCall, now time.Time) bool {
	if len(calls) == 0 {
		return true
	}
	results, err := b.st.pipeline(ctx, calls)
	if err != nil {
		b.st.failed(ctx, err)
		return false
	}
	var events []breaker.Event
	for i, res := range results {
		ev, _ := b.reply(calls[i].e, res, now)
		events = append(events, ev...)
	}
	b.notify(events)
	return true
}

// refreshSoon asks the loop to read every breaker again, when changes may
// have been missed (the subscription was lost).
func (b *BreakerStore) refreshSoon() {
	select {
	case b.refresh <- struct{}{}:
	default:
	}
}

// onMessage applies a change another replica published.
func (b *BreakerStore) onMessage(id breaker.ID, m message) {
	b.mu.RLock()
	e := b.entries[id]
	b.mu.RUnlock()
	if e == nil {
		return // never used here
	}
	v, ok := viewOf(m)
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case ok:
		e.apply(v)
		if b.st.Degraded() && e.args != nil {
			// The fleet moved on (a reset, say) while this replica decides
			// on its own: its local state follows, or the return to shared
			// state would write the stale one back as newer.
			now := b.clock()
			b.local.Seed(e.id, e.settings, v.st, micros(v.since, now), micros(v.ou, now), now)
		}
	case parseInt(m.Ver) > e.v.ver:
		// A change without its state (an older replica): ask Redis at
		// the next call.
		e.known = false
	}
}

// toLocal seeds the local fallback with this replica's view of each
// breaker, as the stores degrade: a breaker known open stays open, one
// known closed starts closed.
func (b *BreakerStore) toLocal() {
	now := b.clock()
	b.each(func(e *entry) {
		e.mu.Lock()
		known, v, s := e.known, e.v, e.settings
		e.p = pending{}
		e.mu.Unlock()
		if known {
			b.local.Seed(e.id, s, v.st, micros(v.since, now), micros(v.ou, now), now)
		}
	})
}

// reconcile prepares the return to shared state: every breaker is read
// again, in one round trip, with this replica's view written back where
// Redis lost it; and a breaker this replica opened on its own meanwhile is
// written back as a later generation than its view, unless the fleet moved
// on since (a later generation in Redis wins). Pauses are read again.
func (b *BreakerStore) reconcile(ctx context.Context) bool {
	now := b.clock()
	var calls []scriptCall
	var admins []*entry
	b.each(func(e *entry) {
		e.mu.Lock()
		s, known, v, admin := e.settings, e.known, e.v, e.adminLocal
		e.mu.Unlock()
		if e.args == nil {
			return
		}
		seed := v.seed()
		if !known {
			seed = []any{"", 0, 0, 0, 0, 0, 0}
		}
		st, _, err := b.local.Status(ctx, e.id, s, now)
		// An operator's reset or forced open made here meanwhile is
		// written back too, whatever the state: it is the fleet's.
		if admin {
			admins = append(admins, e)
		}
		if err == nil && (admin || (st.State == breaker.Open || st.State == breaker.ForcedOpen) &&
			(!known || v.st == breaker.Closed || v.st == breaker.Open && st.OpenUntil.UnixMicro() > v.ou)) {
			local := view{st: st.State, gen: v.gen + 1, ver: v.ver + 1, since: st.Since.UnixMicro(),
				ou: st.OpenUntil.UnixMicro(), ot: v.ot}
			if st.State == breaker.ForcedOpen {
				local.ou = 0
			}
			seed = local.seed()
		}
		e.mu.Lock()
		e.p = pending{}
		args := e.argvSeed(now, seed)
		e.mu.Unlock()
		calls = append(calls, scriptCall{peekScript, e, args})
	})
	if !b.run(ctx, calls, now) {
		return false
	}
	for _, e := range admins {
		e.mu.Lock()
		e.adminLocal = false
		e.mu.Unlock()
	}
	b.st.Limits.forget()
	return true
}

// keys lists the hashes of the breakers this replica uses.
func (b *BreakerStore) keys() []string {
	var out []string
	b.each(func(e *entry) { out = append(out, e.key) })
	return out
}
