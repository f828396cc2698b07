package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/multas/aggregator/breaker"
)

var (
	allowScript  = lua("breaker_prelude.lua", "breaker_allow.lua")
	doneScript   = lua("breaker_prelude.lua", "breaker_done.lua")
	flushScript  = lua("breaker_prelude.lua", "breaker_flush.lua")
	peekScript   = lua("breaker_prelude.lua", "breaker_peek.lua")
	statusScript = lua("breaker_prelude.lua", "breaker_status.lua")
	adminScript  = lua("breaker_prelude.lua", "breaker_admin.lua")
)

// BreakerStore implements breaker.Store on Redis, with the semantics of
// breaker.MemoryStore: one hash per breaker holds its state, generation,
// open and probe-lease times, open-time total, last transition and the
// rolling window (ten buckets of window/10).
//
// Each replica keeps a view of every breaker it uses (view.go), kept fresh
// by the changes the scripts publish, by the replies of its own scripts and
// by a read of every breaker each RefreshInterval. While the view says
// closed, a call costs no round trip (SPEC 11, "Cost"): Allow decides from
// the view (while the replica hears the changes others publish, see
// Stores.Listening; otherwise it asks Redis), and Done adds the verdict to
// the breaker's pending counts, which the replica sends every
// FlushInterval, every breaker's in one pipelined round trip (counts
// without a failure wait up to ten intervals: successes never trip a
// breaker). The trip is decided in Redis, on the fleet's counts, by the
// flush that reaches it, which publishes the open; a
// replica whose own counts would trip the breaker flushes at once.
// Everything else is exact fleet-wide and goes to Redis when it happens:
// the probe of a half-open breaker (one in the fleet), its verdict,
// resets, forced opens, and reads (Status).
//
// A view is never dropped: it is what each script writes back when Redis
// lost the breaker (restart, FLUSHALL, failover), so an open breaker stays
// open (see breaker_prelude.lua), and what the local fallback starts from
// when Redis fails.
type BreakerStore struct {
	st    *Stores
	local *breaker.MemoryStore

	mu      sync.RWMutex
	entries map[breaker.ID]*entry

	// publish hands transitions made outside a Set's calls (a background
	// flush) to the Set (breaker.Notifier).
	publish atomic.Pointer[func([]breaker.Event)]
	// now is the latest time (µs) a caller passed: the background work
	// runs on the callers' clock.
	now atomic.Int64
	// refresh asks the background loop to read every view again soon.
	refresh chan struct{}
	// settingsMissed says that settings other replicas shared may have
	// been published while this one did not listen: the loop reads them
	// again (and hands them to Options.OnSettings) once it listens.
	settingsMissed atomic.Bool
}

var (
	_ breaker.Store    = (*BreakerStore)(nil)
	_ breaker.Notifier = (*BreakerStore)(nil)
)

func newBreakerStore(s *Stores) *BreakerStore {
	return &BreakerStore{st: s, local: breaker.NewMemoryStore(), entries: make(map[breaker.ID]*entry),
		refresh: make(chan struct{}, 1)}
}

// Notify implements breaker.Notifier.
func (b *BreakerStore) Notify(publish func([]breaker.Event)) { b.publish.Store(&publish) }

func (b *BreakerStore) notify(events []breaker.Event) {
	if len(events) == 0 {
		return
	}
	if p := b.publish.Load(); p != nil {
		(*p)(events)
	}
}

// seen records the time of a caller.
func (b *BreakerStore) seen(now time.Time) {
	us := now.UnixMicro()
	for {
		cur := b.now.Load()
		if us <= cur || b.now.CompareAndSwap(cur, us) {
			return
		}
	}
}

// clock is the latest time a caller passed, or the wall clock.
func (b *BreakerStore) clock() time.Time {
	if us := b.now.Load(); us != 0 {
		return time.UnixMicro(us)
	}
	return time.Now()
}

// The tokens of permits.
type (
	// closedPermit is a call through a closed breaker, decided from the
	// view; the permit's Gen is the breaker's generation (a token of no
	// size takes no allocation).
	closedPermit struct{}
	// probePermit is the probe of a half-open breaker, granted by Redis.
	probePermit struct{ gen, probeUntil int64 }
	// localPermit is a permit of the local fallback.
	localPermit struct{ p breaker.Permit }
)

func (b *BreakerStore) entry(id breaker.ID) *entry {
	b.mu.RLock()
	e := b.entries[id]
	b.mu.RUnlock()
	if e != nil {
		return e
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e = b.entries[id]; e == nil {
		e = &entry{id: id, key: b.st.opts.Prefix + "{" + id.Key + "/" + string(id.Operation) + "}:breaker"}
		b.entries[id] = e
	}
	return e
}

// each calls f on every entry.
func (b *BreakerStore) each(f func(*entry)) {
	b.mu.RLock()
	list := make([]*entry, 0, len(b.entries))
	for _, e := range b.entries {
		list = append(list, e)
	}
	b.mu.RUnlock()
	for _, e := range list {
		f(e)
	}
}

// Allow implements breaker.Store.
func (b *BreakerStore) Allow(ctx context.Context, id breaker.ID, s breaker.Settings, now time.Time) (breaker.Permit, []breaker.Event, error) {
	if b.st.Degraded() {
		return b.localAllow(ctx, id, s, now)
	}
	b.seen(now)
	e := b.entry(id)
	e.mu.Lock()
	e.configure(s, b.st.channel)
	// The view decides only while it hears what other replicas change.
	if p, err, ok := e.decide(s, now); ok && b.st.Listening() {
		e.mu.Unlock()
		return p, nil, err
	}
	args := e.argv(now)
	e.mu.Unlock()

	cctx, cancel := b.st.callCtx(ctx)
	res, err := allowScript.Run(cctx, b.st.client, []string{e.key}, args...).Slice()
	cancel()
	if err != nil {
		b.st.failed(ctx, err)
		return b.localAllow(ctx, id, s, now)
	}
	events, v := b.reply(e, res, now)
	code, t := intAt(res, replyExtra), intAt(res, replyExtra+1)
	tt := micros(t, now)
	switch code {
	case 1:
		return breaker.Permit{}, events, &breaker.OpenError{State: breaker.ForcedOpen, RetryAfter: s.OpenFor}
	case 2:
		return breaker.Permit{}, events, &breaker.OpenError{State: breaker.Open, RetryAfter: tt.Sub(now)}
	case 3:
		return breaker.Permit{}, events, &breaker.OpenError{State: breaker.HalfOpen, RetryAfter: tt.Sub(now), Probing: true}
	case 4:
		return breaker.Permit{Probe: true, Token: probePermit{gen: v.gen, probeUntil: t}}, events, nil
	}
	return breaker.Permit{Token: closedPermit{}, Gen: uint64(v.gen)}, events, nil
}

func (b *BreakerStore) localAllow(ctx context.Context, id breaker.ID, s breaker.Settings, now time.Time) (breaker.Permit, []breaker.Event, error) {
	p, events, err := b.local.Allow(ctx, id, s, now)
	if err != nil {
		return p, events, err
	}
	return breaker.Permit{Probe: p.Probe, Token: localPermit{p}}, events, nil
}

// Done implements breaker.Store. The verdict of a permit from the shared
// state is dropped while Redis cannot be reached: its generation and lease
// keep the shared breaker safe.
func (b *BreakerStore) Done(ctx context.Context, id breaker.ID, p breaker.Permit, v breaker.Verdict, r breaker.Report, s breaker.Settings, now time.Time) ([]breaker.Event, error) {
	ctx = context.WithoutCancel(ctx) // the verdict outlives the call's deadline (breaker.Store)
	switch t := p.Token.(type) {
	case localPermit:
		return b.local.Done(ctx, id, t.p, v, r, s, now)
	case closedPermit:
		if b.st.Degraded() || v == breaker.Neutral {
			return nil, nil
		}
		return b.count(ctx, id, int64(p.Gen), v, r, s, now)
	case probePermit:
		if b.st.Degraded() {
			return nil, nil
		}
		return b.probeDone(ctx, id, t, v, r, s, now)
	}
	return nil, fmt.Errorf("breaker %s: foreign permit", id)
}

// count adds the verdict of a call through a closed breaker to its pending
// counts. They go to Redis with the next flush, or at once when they would
// trip the breaker, or before counts of another bucket of the window.
func (b *BreakerStore) count(ctx context.Context, id breaker.ID, gen int64, v breaker.Verdict, r breaker.Report, s breaker.Settings, now time.Time) ([]breaker.Event, error) {
	b.seen(now)
	e := b.entry(id)
	if v == breaker.Failure {
		// It may trip the breaker: counts the background flush has on
		// their way must be in the view first, for wouldTrip to see them.
		e.send.Lock()
		defer e.send.Unlock()
	}
	e.mu.Lock()
	e.configure(s, b.st.channel)
	if gen != e.v.gen || e.v.st != breaker.Closed {
		e.mu.Unlock()
		return nil, nil // a call of an earlier generation: its verdict is stale
	}
	var first []any
	us := now.UnixMicro()
	if !e.p.empty() && (e.p.gen != gen || e.bucket(e.p.at) != e.bucket(us)) {
		first = e.flushArgs(e.take())
	}
	e.p.add(gen, us, v, r.RetryAfter)
	var then []any
	if v == breaker.Failure && e.wouldTrip(s) {
		then = e.flushArgs(e.take())
	}
	e.mu.Unlock()
	var events []breaker.Event
	for _, args := range [][]any{first, then} {
		if args == nil {
			continue
		}
		cctx, cancel := b.st.callCtx(ctx)
		res, err := flushScript.Run(cctx, b.st.client, []string{e.key}, args...).Slice()
		cancel()
		if err != nil {
			b.st.failed(ctx, err)
			return events, nil
		}
		ev, _ := b.reply(e, res, now)
		events = append(events, ev...)
	}
	return events, nil
}

func (b *BreakerStore) probeDone(ctx context.Context, id breaker.ID, t probePermit, v breaker.Verdict, r breaker.Report, s breaker.Settings, now time.Time) ([]breaker.Event, error) {
	b.seen(now)
	e := b.entry(id)
	verdict := 0
	switch v {
	case breaker.Success:
		verdict = 1
	case breaker.Failure:
		verdict = 2
	}
	e.mu.Lock()
	e.configure(s, b.st.channel)
	args := e.argv(now, t.gen, verdict, r.RetryAfter.Microseconds(), string(r.Outcome), t.probeUntil)
	e.mu.Unlock()
	cctx, cancel := b.st.callCtx(ctx)
	res, err := doneScript.Run(cctx, b.st.client, []string{e.key}, args...).Slice()
	cancel()
	if err != nil {
		b.st.failed(ctx, err)
		return nil, nil
	}
	events, _ := b.reply(e, res, now)
	return events, nil
}

// Reset implements breaker.Store.
func (b *BreakerStore) Reset(ctx context.Context, id breaker.ID, s breaker.Settings, now time.Time) ([]breaker.Event, error) {
	return b.admin(ctx, id, s, now, breaker.Closed)
}

// ForceOpen implements breaker.Store.
func (b *BreakerStore) ForceOpen(ctx context.Context, id breaker.ID, s breaker.Settings, now time.Time) ([]breaker.Event, error) {
	return b.admin(ctx, id, s, now, breaker.ForcedOpen)
}

func (b *BreakerStore) admin(ctx context.Context, id breaker.ID, s breaker.Settings, now time.Time, to breaker.State) ([]breaker.Event, error) {
	local := b.local.Reset
	if to == breaker.ForcedOpen {
		local = b.local.ForceOpen
	}
	b.seen(now)
	e := b.entry(id)
	// An operator's reset or forced open is the fleet's: it goes to Redis
	// even while this replica decides on local state (Redis may answer
	// again already), and is tried again on a passing error (one slow
	// answer, a pooled connection that died with the old server), so
	// that it is not left in this replica alone. Only when Redis
	// cannot take it does it stay local, to be written back when Redis is
	// back (reconcile).
	var err error
	for i := range adminAttempts {
		if i > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(i) * adminRetryWait):
			}
		}
		if ctx.Err() != nil {
			break
		}
		e.mu.Lock()
		e.configure(s, b.st.channel)
		e.take() // counts of the generation that ends
		args := e.argv(now, string(to))
		e.mu.Unlock()
		cctx, cancel := b.st.callCtx(ctx)
		var res []any
		res, err = adminScript.Run(cctx, b.st.client, []string{e.key}, args...).Slice()
		cancel()
		if err != nil {
			continue
		}
		events, v := b.reply(e, res, now)
		e.mu.Lock()
		e.adminLocal = false
		e.mu.Unlock()
		if b.st.Degraded() {
			// Local decisions follow the fleet's state meanwhile.
			b.local.Seed(id, s, v.st, micros(v.since, now), micros(v.ou, now), now)
		}
		return events, nil
	}
	b.st.failed(ctx, err)
	events, lerr := local(ctx, id, s, now)
	if lerr == nil {
		e.mu.Lock()
		e.adminLocal = true
		e.mu.Unlock()
	}
	return events, lerr
}

const (
	// adminAttempts is how often a reset or forced open is tried on Redis
	// before it stays local; adminRetryWait grows the wait between tries.
	adminAttempts  = 3
	adminRetryWait = 50 * time.Millisecond
)

// Status implements breaker.Store: this replica's pending counts, then the
// breaker read, in one round trip.
func (b *BreakerStore) Status(ctx context.Context, id breaker.ID, s breaker.Settings, now time.Time) (breaker.Status, []breaker.Event, error) {
	if b.st.Degraded() {
		return b.local.Status(ctx, id, s, now)
	}
	b.seen(now)
	e := b.entry(id)
	// After the counts the background flush has on their way, if any.
	e.send.Lock()
	defer e.send.Unlock()
	e.mu.Lock()
	e.configure(s, b.st.channel)
	var calls []scriptCall
	if !e.p.empty() {
		calls = append(calls, scriptCall{flushScript, e, e.flushArgs(e.take())})
	}
	calls = append(calls, scriptCall{statusScript, e, e.argv(now)})
	e.mu.Unlock()
	results, err := b.st.pipeline(ctx, calls)
	if err != nil {
		b.st.failed(ctx, err)
		return b.local.Status(ctx, id, s, now)
	}
	var events []breaker.Event
	for _, res := range results[:len(results)-1] {
		ev, _ := b.reply(e, res, now)
		events = append(events, ev...)
	}
	res := results[len(results)-1]
	ev, v := b.reply(e, res, now)
	events = append(events, ev...)
	loc := now.Location()
	st := breaker.Status{
		State:     v.st,
		Since:     micros(v.since, now),
		OpenTotal: time.Duration(intAt(res, replyExtra)) * time.Microsecond,
		Calls:     int(max(v.wc, 0)),
		Failures:  int(max(v.wf, 0)),
	}
	if st.State == breaker.Open {
		st.OpenUntil = micros(v.ou, now)
	}
	if last, ok := parseLast(strAt(res, replyExtra+1), id, loc); ok {
		st.Last = &last
	} else if strAt(res, replyExtra+1) != "" {
		b.st.bad.Unreadable(e.key, "field last", false)
	}
	return st, events, nil
}

// reply reads what a breaker script returned: its transitions, and the
// breaker as it stands, which becomes e's view.
func (b *BreakerStore) reply(e *entry, res []any, now time.Time) ([]breaker.Event, view) {
	b.rewritten(e, res, replyGarbage)
	v, ok := parseView(res)
	if ok {
		e.mu.Lock()
		e.apply(v)
		e.mu.Unlock()
	}
	return parseEvents(at(res, 0), e.id, now.Location()), v
}

// rewritten logs the breaker's key when the script's reply element i says
// it found the hash unreadable: the breaker started afresh, closed, and
// was written back.
func (b *BreakerStore) rewritten(e *entry, res []any, i int) {
	if intAt(res, i) == 1 {
		b.st.bad.Unreadable(e.key, "", true)
	}
}

// parseEvents reads the transitions a script returned.
func parseEvents(v any, id breaker.ID, loc *time.Location) []breaker.Event {
	list, _ := v.([]any)
	if len(list) == 0 {
		return nil
	}
	events := make([]breaker.Event, 0, len(list))
	for _, x := range list {
		fields, _ := x.([]any)
		strs := make([]string, len(fields))
		for i, f := range fields {
			strs[i], _ = f.(string)
		}
		if e, ok := event(strs, id, loc); ok {
			events = append(events, e)
		}
	}
	return events
}

// parseLast reads the last transition kept in the hash.
func parseLast(s string, id breaker.ID, loc *time.Location) (breaker.Event, bool) {
	var strs []string
	if s == "" || json.Unmarshal([]byte(s), &strs) != nil {
		return breaker.Event{}, false
	}
	return event(strs, id, loc)
}

// event builds a transition from the fields the scripts write: time, from,
// to, reason, calls, failures, consecutive failures, retry-after and, for
// a trip, the window. Anything else is no transition: numbers that are not
// integers (counts and durations not negative), a time outside years
// 0–9999, a reason that is not short UTF-8 text.
func event(f []string, id breaker.ID, loc *time.Location) (breaker.Event, bool) {
	if len(f) != 9 {
		return breaker.Event{}, false
	}
	from, to := breaker.State(f[1]), breaker.State(f[2])
	if !validState(from) || !validState(to) || len(f[3]) > maxReason || !utf8.ValidString(f[3]) {
		return breaker.Event{}, false
	}
	us, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return breaker.Event{}, false
	}
	at := time.UnixMicro(us).In(loc)
	if y := at.Year(); y < 0 || y > 9999 {
		return breaker.Event{}, false // not a time the admin API can write (RFC 3339)
	}
	var n [5]int64
	for i := range n {
		v, err := strconv.ParseInt(f[4+i], 10, 64)
		if err != nil || v < 0 {
			return breaker.Event{}, false
		}
		n[i] = v
	}
	calls, failures := n[0], n[1]
	if failures > calls || calls > math.MaxInt32 {
		return breaker.Event{}, false
	}
	e := breaker.Event{
		Time: at, BreakerKey: id.Key, Operation: id.Operation,
		From: from, To: to, Reason: f[3],
	}
	e.Evidence = breaker.Evidence{
		Calls: int(calls), Failures: int(failures), ConsecutiveFailures: int(min(n[2], math.MaxInt32)),
		RetryAfter: (time.Duration(n[3]) * time.Microsecond).Seconds(),
	}
	if calls > 0 {
		e.Evidence.Ratio = float64(failures) / float64(calls)
	}
	e.Evidence.WindowSeconds = (time.Duration(n[4]) * time.Microsecond).Seconds()
	return e, true
}

// maxReason bounds the reason of a transition read back: the scripts
// write a sentence.
const maxReason = 1024

func validState(s breaker.State) bool {
	switch s {
	case breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.ForcedOpen:
		return true
	}
	return false
}

func parseInt(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func at(list []any, i int) any {
	if i < len(list) {
		return list[i]
	}
	return nil
}

func intAt(list []any, i int) int64 {
	switch v := at(list, i).(type) {
	case int64:
		return v
	case string:
		return parseInt(v)
	}
	return 0
}

func strAt(list []any, i int) string {
	s, _ := at(list, i).(string)
	return s
}

// micros turns microseconds into a time in now's location.
func micros(us int64, now time.Time) time.Time {
	return time.UnixMicro(us).In(now.Location())
}
