package redisstore

import (
	"strconv"
	"sync"
	"time"

	"github.com/multas/aggregator/breaker"
)

// entry is what this replica keeps of one breaker: its settings as script
// arguments, its view of the shared state, and its pending counts.
type entry struct {
	id  breaker.ID
	key string // the breaker's hash

	// send is held while counts taken from p are on their way to Redis and
	// not yet in v (the background flush), and by the callers that must
	// see them there: Status, and a failure that may trip the breaker.
	// Taken before mu.
	send sync.Mutex

	mu       sync.Mutex
	settings breaker.Settings
	args     []any // ARGV[2..10]
	window   int64 // µs, as the scripts count it

	known   bool // v was read from Redis
	v       view
	p       pending
	flushed time.Time // when the loop last sent p (wall clock)
	// adminLocal is set when an operator's reset or forced open could be
	// applied only to the local state: reconcile writes it back.
	adminLocal bool
}

// view is a breaker as Redis last told this replica. Times are Unix µs on
// the callers' clock.
type view struct {
	st                breaker.State
	gen, ver          int64
	since, ou, pu, ot int64
	// cf is the consecutive failures, wc and wf the calls and failures of
	// the window, as of the last flush or read (-1: not told).
	cf, wc, wf int64
}

// maxExact bounds the numbers of a view: the scripts hold them in Lua
// numbers, exact below 2^53.
const maxExact = 1 << 53

// Reply positions of every breaker script (breaker_prelude.lua, reply):
// events, then the view, then whether the script found something
// unreadable (replyGarbage), then the script's own values from replyExtra.
const (
	replyGarbage = 11
	replyExtra   = 12
)

// parseView reads the view in a script's reply. Anything out of range
// counts as no view.
func parseView(res []any) (view, bool) {
	v := view{
		st: breaker.State(strAt(res, 1)), gen: intAt(res, 2), ver: intAt(res, 3),
		since: intAt(res, 4), ou: intAt(res, 5), pu: intAt(res, 6), ot: intAt(res, 7),
		cf: intAt(res, 8), wc: intAt(res, 9), wf: intAt(res, 10),
	}
	return v, v.valid()
}

func (v view) valid() bool {
	if !validState(v.st) {
		return false
	}
	for _, n := range []int64{v.gen, v.ver, v.since, v.ou, v.pu, v.ot, v.cf} {
		if n < 0 || n >= maxExact {
			return false
		}
	}
	return v.wc >= -1 && v.wc < maxExact && v.wf >= -1 && v.wf < maxExact
}

// viewOf reads the view a breaker script published (message), or false.
func viewOf(m message) (view, bool) {
	if m.State == "" {
		return view{}, false
	}
	var n [6]int64
	for i, f := range []string{m.Gen, m.Ver, m.Since, m.OpenUntil, m.ProbeUntil, m.OpenTotal} {
		x, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return view{}, false // not what a script publishes (SPEC 9)
		}
		n[i] = x
	}
	v := view{
		st: breaker.State(m.State), gen: n[0], ver: n[1], since: n[2],
		ou: n[3], pu: n[4], ot: n[5], wc: -1, wf: -1,
	}
	return v, v.valid()
}

// apply makes v e's view unless e knows a later one: a higher generation,
// or a higher version of the same. e.mu must be held.
func (e *entry) apply(v view) {
	if e.known && (v.gen < e.v.gen || v.gen == e.v.gen && v.ver < e.v.ver) {
		return
	}
	if v.gen != e.v.gen || !e.known {
		// A new generation: counts restart, and this replica's
		// pending counts are of the one before.
		if v.gen != e.p.gen {
			e.p = pending{}
		}
		if v.wc < 0 {
			v.wc, v.wf, v.cf = 0, 0, 0
		}
	} else if v.wc < 0 {
		v.wc, v.wf = e.v.wc, e.v.wf
	}
	e.v, e.known = v, true
}

// configure applies s, the settings of the caller. e.mu must be held.
func (e *entry) configure(s breaker.Settings, channel string) {
	if e.args != nil && e.settings.Equal(s) {
		return
	}
	window := s.Window
	if window <= 0 {
		window = time.Minute
	}
	lease := s.ProbeLease
	if lease <= 0 {
		lease = 30 * time.Second
	}
	if e.args != nil && e.window != max(window.Microseconds(), 10) {
		// Another window: Redis restarts the counts, pending ones with
		// them (they belong to the buckets of the old one).
		e.p = pending{}
	}
	e.settings = s
	e.settings.FailureStatuses = append([]int(nil), s.FailureStatuses...)
	e.window = max(window.Microseconds(), 10)
	e.args = []any{window.Microseconds(), s.MinCalls, s.FailureRatio, s.ConsecutiveFailures,
		s.OpenFor.Microseconds(), lease.Microseconds(), channel, e.id.Key, string(e.id.Operation)}
}

// argv returns the arguments of a breaker script at now: the settings,
// the view as seed (what Redis gets back if it lost the breaker), then
// extra. e.mu must be held.
func (e *entry) argv(now time.Time, extra ...any) []any {
	return e.argvSeed(now, e.seed(), extra...)
}

func (e *entry) argvSeed(now time.Time, seed []any, extra ...any) []any {
	args := make([]any, 0, 1+len(e.args)+len(seed)+len(extra))
	args = append(args, now.UnixMicro())
	args = append(args, e.args...)
	args = append(args, seed...)
	return append(args, extra...)
}

// seed is e's view as ARGV[11..17]; an empty state when it has none.
func (e *entry) seed() []any {
	if !e.known {
		return []any{"", 0, 0, 0, 0, 0, 0}
	}
	return e.v.seed()
}

func (v view) seed() []any {
	return []any{string(v.st), v.gen, v.ver, v.since, v.ou, v.pu, v.ot}
}

// decide answers Allow from the view, when it can (ok): a permit through
// a closed breaker, or the refusal of an open one. Anything else asks
// Redis: no view yet, an open time that ended, a half-open breaker whose
// probe slot is free. e.mu must be held.
func (e *entry) decide(s breaker.Settings, now time.Time) (p breaker.Permit, err error, ok bool) {
	if !e.known {
		return breaker.Permit{}, nil, false
	}
	us := now.UnixMicro()
	switch e.v.st {
	case breaker.Closed:
		return breaker.Permit{Token: closedPermit{}, Gen: uint64(e.v.gen)}, nil, true
	case breaker.ForcedOpen:
		return breaker.Permit{}, &breaker.OpenError{State: breaker.ForcedOpen, RetryAfter: s.OpenFor}, true
	case breaker.Open:
		if us < e.v.ou {
			return breaker.Permit{}, &breaker.OpenError{State: breaker.Open, RetryAfter: micros(e.v.ou, now).Sub(now)}, true
		}
	case breaker.HalfOpen:
		if us < e.v.pu {
			return breaker.Permit{}, &breaker.OpenError{State: breaker.HalfOpen, RetryAfter: micros(e.v.pu, now).Sub(now), Probing: true}, true
		}
	}
	return breaker.Permit{}, nil, false
}

// bucket is the window bucket of time us (breaker_prelude.lua, counts).
func (e *entry) bucket(us int64) int64 {
	bp := e.window / 10
	if us < 0 {
		return (us - bp + 1) / bp
	}
	return us / bp
}

// pending are the verdicts of this replica's calls through a closed
// breaker that Redis has not counted yet.
type pending struct {
	gen, at int64 // the generation the calls were permitted in; the latest call (µs)
	s, f    int64 // successes, failures
	// lead counts failures before the first success, tail after the last
	// one, run the longest series: with the breaker's consecutive
	// failures, what the fleet's series becomes.
	lead, tail, run int64
	success         bool
	retryAfter      time.Duration // of the last failure
}

func (p *pending) empty() bool { return p.s+p.f == 0 }

func (p *pending) add(gen, at int64, v breaker.Verdict, retryAfter time.Duration) {
	p.gen, p.at = gen, max(p.at, at)
	if v == breaker.Success {
		p.s++
		p.success, p.tail = true, 0
		return
	}
	p.f++
	p.tail++
	if !p.success {
		p.lead++
	}
	p.run = max(p.run, p.tail)
	p.retryAfter = retryAfter
}

// take removes and returns e's pending counts. e.mu must be held.
func (e *entry) take() pending {
	p := e.p
	e.p = pending{}
	return p
}

// flushArgs are the arguments of breaker_flush.lua for p. e.mu must be
// held.
func (e *entry) flushArgs(p pending) []any {
	success := 0
	if p.success {
		success = 1
	}
	return e.argv(time.UnixMicro(p.at), p.gen, p.at, p.s, p.f, p.lead, p.tail, p.run, success,
		p.retryAfter.Microseconds(), e.settings.Window.String())
}

// wouldTrip reports whether the fleet's counts as this replica last knew
// them, with its pending ones, reach the trip rule of s: then the counts
// go to Redis at once rather than with the next flush. e.mu must be held.
func (e *entry) wouldTrip(s breaker.Settings) bool {
	p := e.p
	if s.ConsecutiveFailures > 0 && max(p.run, e.v.cf+p.lead) >= int64(s.ConsecutiveFailures) {
		return true
	}
	calls := max(e.v.wc, 0) + p.s + p.f
	failures := max(e.v.wf, 0) + p.f
	return calls >= int64(max(s.MinCalls, 1)) && float64(failures) >= s.FailureRatio*float64(calls)
}
