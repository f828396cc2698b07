// Package fanout runs one query across every source that can answer it, in
// parallel, under the query's budget. Each source call goes through the
// rate limiter, then its breaker, then the portal adapter, with retries;
// whatever happens to one source is recorded in its entry and never cuts the
// others short: the answer is an honest partial result.
package fanout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/drift"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/normalize"
)

// Retry is the retry policy of one source (SPEC 4.3).
type Retry struct {
	MaxRetries     int
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
}

// Source is a portal adapter as the fan-out sees it. Each method call makes
// one logical call to the portal (all the pages of a lookup, say) and
// reports a failure as a *sources.Error classified by outcome (SPEC 4, 5),
// or sources.ErrUnsupported. Breakers, rate limits, retries and metrics
// stay outside: the fan-out applies them around every adapter alike.
//
// The configuration-driven *sources.Source is one; Go code adds others by
// registering a type (app.Options.Adapters).
type Source interface {
	// ID is the source's id; Jurisdiction its name, for answers.
	ID() string
	Jurisdiction() string
	// Supports reports whether the source answers op for this kind of
	// person id ("" asks whether op exists at all).
	Supports(op aggregator.Operation, kind aggregator.IDKind) bool
	// Lookup asks for the infractions of q.
	Lookup(ctx context.Context, q aggregator.Query) (sources.Answer, error)
	// Voucher fetches an infraction's payment voucher for streaming.
	Voucher(ctx context.Context, infractionID string) (*sources.Voucher, error)
}

var _ Source = (*sources.Source)(nil)

// Member is one source as the fan-out sees it.
type Member struct {
	Source     Source
	BreakerKey string
	// Timeout bounds each call to the portal.
	Timeout time.Duration
	Retry   Retry
	// Memory is how the source remembers its answers (SPEC 14); the zero
	// Policy remembers nothing.
	Memory memory.Policy

	gate func(context.Context) error // admits its pages after the first (call.go); made by New
}

// Observer hears of every source call, for metrics. Nil means no one.
type Observer interface {
	SourceCall(source string, op aggregator.Operation, outcome aggregator.Outcome, d time.Duration)
}

// ContextObserver is an Observer that also hears the context of a call
// that went to the portal (its span, for exemplars).
type ContextObserver interface {
	SourceCallContext(ctx context.Context, source string, op aggregator.Operation, outcome aggregator.Outcome, d time.Duration)
}

// MemoryObserver is an Observer that also hears of the answers taken from
// memory instead of a portal (kind memory.HitFresh or memory.HitStale):
// such answers are no source calls.
type MemoryObserver interface {
	MemoryHit(source string, kind string)
}

// Options configure an Engine.
type Options struct {
	Breakers *breaker.Set
	Limiter  *ratelimit.Limiter
	Problems problem.Catalog
	Observer Observer
	// Now is the clock for durations; time.Now when nil.
	Now func() time.Time
	// Sleep waits d or until ctx ends; a timer when nil (tests shorten it).
	Sleep func(ctx context.Context, d time.Duration) error
	// Tracer opens a span per source lookup (trace.go); none when nil.
	Tracer trace.Tracer
	// Memory remembers the answers of the members that remember
	// (Member.Memory); nothing is remembered when nil.
	Memory *memory.Memory
	// Lookups, when set, hears of every answer a lookup attempt read from
	// a portal, for mapping health (health.go, SPEC 13).
	Lookups func(drift.Lookup)
}

// Engine fans queries out to its members.
type Engine struct {
	members []Member
	byID    map[string]int
	opts    Options
	flight  flights
	workers *workers
}

// New returns an Engine over members, in the order answers list them.
func New(members []Member, opts Options) *Engine {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	e := &Engine{members: slices.Clone(members), byID: make(map[string]int, len(members)), opts: opts, workers: newWorkers()}
	for i, m := range e.members {
		e.byID[m.Source.ID()] = i
		e.members[i].gate = e.pageGate(m.Source.ID())
	}
	return e
}

// Close ends the goroutines that wait to run the engine's next calls; the
// calls in flight end as they would. Queries made afterwards still work.
func (e *Engine) Close() { e.workers.close() }

// Members lists the engine's sources in configured order.
func (e *Engine) Members() []Member { return e.members }

// Member returns the source with id.
func (e *Engine) Member(id string) (Member, bool) {
	i, ok := e.byID[id]
	if !ok {
		return Member{}, false
	}
	return e.members[i], true
}

// BreakerID is the breaker of member m for operation op.
func (m Member) BreakerID(op aggregator.Operation) breaker.ID {
	return breaker.ID{Key: m.BreakerKey, Operation: op}
}

// Select returns the members that answer q, restricted to only when it is
// not empty. An unknown id, or one that cannot answer q, is an invalid
// `sources` parameter. The slice may be the engine's own: read it only.
func (e *Engine) Select(q aggregator.Query, only []string) ([]Member, []problem.InvalidParam) {
	op := q.Operation()
	if len(only) == 0 {
		n := 0
		for _, m := range e.members {
			if m.Source.Supports(op, q.IDKind) {
				n++
			}
		}
		if n == len(e.members) {
			// Every member answers q, as most queries go: no copy (an
			// append to the slice makes one, its capacity being full).
			return e.members[:n:n], nil
		}
		out := make([]Member, 0, n)
		for _, m := range e.members {
			if m.Source.Supports(op, q.IDKind) {
				out = append(out, m)
			}
		}
		return out, nil
	}
	want := make(map[string]bool, len(only))
	var bad []string
	for _, id := range only {
		i, ok := e.byID[id]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("unknown source %q", id))
		case !e.members[i].Source.Supports(op, q.IDKind):
			bad = append(bad, fmt.Sprintf("source %q cannot answer a %s query", id, queryKind(q)))
		default:
			want[id] = true
		}
	}
	if len(bad) > 0 {
		return nil, []problem.InvalidParam{{Name: "sources", Reason: strings.Join(bad, "; ")}}
	}
	out := make([]Member, 0, len(want))
	for _, m := range e.members {
		if want[m.Source.ID()] {
			out = append(out, m)
		}
	}
	return out, nil
}

func queryKind(q aggregator.Query) string {
	if q.Domain != "" {
		return "domain"
	}
	return string(q.IDKind)
}

// Query asks every member of set for q, within budget, and assembles the
// result. It returns when every source has an outcome, at the latest when
// the budget runs out. Every successful lookup is remembered (for the
// members that remember), and nothing remembered is read: the way of work
// done in the background (retained sources of asynchronous queries,
// watches).
func (e *Engine) Query(ctx context.Context, q aggregator.Query, set []Member, budget time.Duration) aggregator.Result {
	return e.query(ctx, q, set, budget, nil, nil)
}

// Answer is Query for a client whose request's directives are d (SPEC 14):
// a member's remembered answer that is fresh enough is its entry without
// calling its portal, and, when d allows it, a recent one stands in for a
// member that failed or was skipped.
func (e *Engine) Answer(ctx context.Context, q aggregator.Query, set []Member, budget time.Duration, d memory.Directives) aggregator.Result {
	return e.query(ctx, q, set, budget, &d, nil)
}

// Stream is Answer that also hands each member's part to each as soon as
// that member has its outcome (SPEC 14, Streaming), in the order they
// finish: a member still without one when the budget runs out is handed
// over as deadline-exceeded. each runs in the calling goroutine, one part
// at a time, and Stream returns after the last, with the result that
// Answer would have returned. A slow each holds back only the parts after
// it: the members' calls go on meanwhile.
func (e *Engine) Stream(ctx context.Context, q aggregator.Query, set []Member, budget time.Duration, d memory.Directives, each func(aggregator.Part)) aggregator.Result {
	return e.query(ctx, q, set, budget, &d, each)
}

func (e *Engine) query(ctx context.Context, q aggregator.Query, set []Member, budget time.Duration, d *memory.Directives, each func(aggregator.Part)) aggregator.Result {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	g := e.gather(ctx, q, set, d, e.recall(ctx, q, set, d), each)
	n := 0
	for _, in := range g.infs {
		n += len(in)
	}
	var infractions []aggregator.Infraction
	if n > 0 {
		infractions = make([]aggregator.Infraction, 0, n)
		for _, in := range g.infs {
			infractions = append(infractions, in...)
		}
	}
	return aggregator.NewResult(q, g.entries, infractions)
}

// gathering is the parts of a query as its members' goroutines hand them
// in, kept as the answer has them: its sources[] entries, and each
// entry's infractions. A part is done once its Status is set (every entry
// has one).
type gathering struct {
	mu      sync.Mutex
	over    bool // the query answered: parts still to come are dropped
	entries []aggregator.SourceResult
	infs    [][]aggregator.Infraction
	done    chan int // the index of each part handed in; buffered to all
}

func (g *gathering) put(i int, p aggregator.Part) {
	g.entries[i], g.infs[i] = p.SourceResult, p.Infractions
}

func (g *gathering) part(i int) aggregator.Part {
	return aggregator.Part{SourceResult: g.entries[i], Infractions: g.infs[i]}
}

// gather runs each member's part on a worker and returns them, in set's
// order; each, when not nil, has each part as soon as it is
// done (on the calling goroutine, one at a time). A part not done when
// ctx's budget and a grace after it are spent is deadline-exceeded, with
// its stand-in: the query answers on time even when a call overruns its
// context (a store that does not honour it, say).
func (e *Engine) gather(ctx context.Context, q aggregator.Query, set []Member, d *memory.Directives, recalled recalled, each func(aggregator.Part)) *gathering {
	g := &gathering{entries: make([]aggregator.SourceResult, len(set)), infs: make([][]aggregator.Infraction, len(set)),
		done: make(chan int, len(set))}
	for i := range set {
		e.workers.run(func() {
			// set[i], not a copy: a Member is too large for a closure to
			// hold by value, and a copy would be moved to the heap.
			p := e.part(ctx, set[i], q, d, recalled.at(i))
			g.mu.Lock()
			defer g.mu.Unlock()
			if !g.over {
				g.put(i, p)
				g.done <- i
			}
		})
	}
	hand := func(i int) {
		if each != nil {
			each(g.part(i))
		}
	}
	expired := ctx.Done()
	var grace <-chan time.Time
	for got := 0; got < len(set); got++ {
		i, ok := -1, false
		for !ok {
			select {
			case i = <-g.done:
				ok = true
			case <-expired:
				expired, grace = nil, time.After(budgetGrace)
			case <-grace:
				e.overdue(ctx, q, set, d, g, hand)
				return g
			}
		}
		hand(i)
	}
	return g
}

// overdue ends g once the budget's grace is over: what was handed in
// counts, nothing more will; each member still without its part is
// deadline-exceeded, with its stand-in.
func (e *Engine) overdue(ctx context.Context, q aggregator.Query, set []Member, d *memory.Directives, g *gathering, hand func(int)) {
	g.mu.Lock()
	g.over = true
	g.mu.Unlock()
	for len(g.done) > 0 {
		hand(<-g.done)
	}
	for i, m := range set {
		if g.entries[i].Status == "" {
			g.put(i, e.standIn(ctx, m, q, d, e.overrun(m, q.Operation())))
			hand(i)
		}
	}
}

// lookup is one source's part of a query: limiter, breaker, calls, retries.
// A success is remembered through t (taken now when t is not valid).
func (e *Engine) lookup(ctx context.Context, m Member, q aggregator.Query, t memory.Ticket) (p aggregator.Part) {
	op := q.Operation()
	t = e.ticket(ctx, m, q, t)
	ctx, span := e.startLookup(ctx, m, op)
	defer func() { span.end(p.Outcome, problemType(p.Problem)) }()
	start := e.opts.Now()
	var answer sources.Answer
	res := e.call(ctx, m, op, span.counted(func(ctx context.Context) (int, time.Duration, error) {
		var err error
		answer, err = m.Source.Lookup(ctx, q)
		e.observeLookup(m, op, answer, err)
		return 0, answer.Pause, err
	}))
	elapsed := e.opts.Now().Sub(start)
	if res.release != nil {
		res.release()
	}
	if res.outcome != aggregator.Succeeded {
		return e.entry(m, op, res.outcome, res.status, res.err, res.retryAfter, res.detail)
	}
	p = e.entry(m, op, aggregator.Succeeded, 0, nil, 0, "")
	nums := &struct { // one allocation for both
		n  int
		ms int64
	}{len(answer.Infractions), elapsed.Milliseconds()}
	p.Count, p.DurationMS = &nums.n, &nums.ms
	p.Infractions = answer.Infractions
	e.keep(ctx, t, answer.Infractions)
	return p
}

// entry builds the sources[] entry of a source that did not succeed (or,
// for Succeeded, the bare entry).
func (e *Engine) entry(m Member, op aggregator.Operation, o aggregator.Outcome, status int, err error, retryAfter time.Duration, detail string) aggregator.Part {
	en := aggregator.SourceResult{Source: m.Source.ID(), Jurisdiction: m.Source.Jurisdiction(), Operation: op, Outcome: o}
	switch {
	case o == aggregator.Succeeded:
		en.Status = aggregator.EntrySucceeded
		return aggregator.Part{SourceResult: en}
	case o.Skipped():
		en.Status = aggregator.EntrySkipped
	default:
		en.Status = aggregator.EntryFailed
	}
	if detail == "" {
		detail = describe(o, status, err)
	}
	p := e.opts.Problems.New(o.Slug(), detail)
	if retryAfter > 0 || o.Skipped() || o == aggregator.RateLimited {
		p.SetRetryAfter(retryAfter)
	}
	en.Problem = p
	return aggregator.Part{SourceResult: en}
}

// maxDetail bounds a problem's detail: what an answer could not be read
// for may quote the portal (SPEC 9).
const maxDetail = 300

// describe says what happened in words that carry no personal data. The
// detail an errors rule found in the answer (sources.Error.Detail) is the
// portal's own word, and comes first.
func describe(o aggregator.Outcome, status int, err error) string {
	var se *sources.Error
	if errors.As(err, &se) && se.Detail != "" {
		return normalize.Detail(se.Detail)
	}
	switch o {
	case aggregator.Timeout:
		return "The source did not answer within its timeout."
	case aggregator.Unavailable:
		if status != 0 {
			return fmt.Sprintf("The portal answered HTTP %d.", status)
		}
		return "The connection to the portal failed."
	case aggregator.Rejected:
		return fmt.Sprintf("The portal refused the request with HTTP %d.", status)
	case aggregator.Unreadable:
		if errors.Is(err, sources.ErrUnbuildable) {
			return bounded("The request to the portal could not be made, so nothing was sent: " + se.Err.Error() + ".")
		}
		if se != nil && se.Err != nil {
			return bounded("The portal's answer could not be read: " + se.Err.Error() + ".")
		}
		return "The portal's answer could not be read."
	case aggregator.RateLimited:
		return "The portal answered 429 Too Many Requests."
	case aggregator.Deadline:
		return "The query's budget ran out before the source answered."
	}
	return ""
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// observeCall reports a call that went to the portal, with its context.
func (e *Engine) observeCall(ctx context.Context, source string, op aggregator.Operation, o aggregator.Outcome, d time.Duration) {
	if co, ok := e.opts.Observer.(ContextObserver); ok {
		co.SourceCallContext(ctx, source, op, o, d)
		return
	}
	e.observe(source, op, o, d)
}

func (e *Engine) observe(source string, op aggregator.Operation, o aggregator.Outcome, d time.Duration) {
	if e.opts.Observer != nil {
		e.opts.Observer.SourceCall(source, op, o, d)
	}
}

// bounded is s without control characters, at most maxDetail runes.
func bounded(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if utf8.RuneCountInString(s) <= maxDetail {
		return s
	}
	return string([]rune(s)[:maxDetail-1]) + "…"
}
