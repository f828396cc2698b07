package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/multas/aggregator/breaker"
)

var (
	allowScript  = lua("breaker_prelude.lua", "breaker_allow.lua")
	doneScript   = lua("breaker_prelude.lua", "breaker_done.lua")
	statusScript = lua("breaker_prelude.lua", "breaker_status.lua")
	adminScript  = lua("breaker_prelude.lua", "breaker_admin.lua")
)

// BreakerStore implements breaker.Store on Redis, with the semantics of
// breaker.MemoryStore: one hash per breaker holds its state, generation,
// open and probe-lease times, open-time total, last transition and the
// rolling window (ten buckets of window/10).
//
// A closed breaker costs one round trip for Allow (nothing is written) and
// one for Done. A breaker seen open is not asked again until its open time
// ends; forced open and a probe in flight are remembered too. Every change
// made by any replica is published, and what this replica remembered of that
// breaker is dropped at once: a reset on one replica holds on all.
type BreakerStore struct {
	st    *Stores
	local *breaker.MemoryStore

	mu      sync.RWMutex
	entries map[breaker.ID]*entry
}

var _ breaker.Store = (*BreakerStore)(nil)

func newBreakerStore(s *Stores) *BreakerStore {
	return &BreakerStore{st: s, local: breaker.NewMemoryStore(), entries: make(map[breaker.ID]*entry)}
}

// cacheCap bounds how long a forced open or a probe in flight is
// remembered without Redis, should an invalidation be lost.
const cacheCap = 5 * time.Second

// entry is what this replica keeps of one breaker.
type entry struct {
	key string // the breaker's hash

	mu       sync.Mutex
	settings breaker.Settings
	args     []any // ARGV[2..10] for settings

	// A refusal remembered until until (on the caller's clock).
	state breaker.State // "" when nothing is remembered
	until time.Time
	retry time.Time // open: open_until; half-open: the probe's lease
	ver   int64
	seen  int64 // highest version published for this breaker
}

// permit is the Token of a permit from Redis.
type permit struct {
	gen        int64
	probeUntil int64
}

// localPermit is the Token of a permit from the local fallback.
type localPermit struct{ p breaker.Permit }

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
		e = &entry{key: b.st.opts.Prefix + "{" + id.Key + "/" + string(id.Operation) + "}:breaker"}
		b.entries[id] = e
	}
	return e
}

// argv returns the arguments of every breaker script, then extra.
func (b *BreakerStore) argv(e *entry, id breaker.ID, s breaker.Settings, now time.Time, extra ...any) []any {
	e.mu.Lock()
	if e.args == nil || !e.settings.Equal(s) {
		window := s.Window
		if window <= 0 {
			window = time.Minute
		}
		lease := s.ProbeLease
		if lease <= 0 {
			lease = 30 * time.Second
		}
		e.settings = s
		e.settings.FailureStatuses = append([]int(nil), s.FailureStatuses...)
		e.args = []any{window.Microseconds(), s.MinCalls, s.FailureRatio, s.ConsecutiveFailures,
			s.OpenFor.Microseconds(), lease.Microseconds(), b.st.channel, id.Key, string(id.Operation)}
	}
	args := make([]any, 0, 1+len(e.args)+len(extra))
	args = append(args, now.UnixMicro())
	args = append(args, e.args...)
	e.mu.Unlock()
	return append(args, extra...)
}

// refusal returns the refusal remembered for e at now, if any.
func (e *entry) refusal(s breaker.Settings, now time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == "" || !now.Before(e.until) {
		return nil
	}
	switch e.state {
	case breaker.ForcedOpen:
		return &breaker.OpenError{State: breaker.ForcedOpen, RetryAfter: s.OpenFor}
	case breaker.Open:
		return &breaker.OpenError{State: breaker.Open, RetryAfter: e.retry.Sub(now)}
	case breaker.HalfOpen:
		return &breaker.OpenError{State: breaker.HalfOpen, RetryAfter: e.retry.Sub(now), Probing: true}
	}
	return nil
}

// remember records what Redis answered at version ver: a refusal to keep
// (state non-empty), or nothing, which drops what was kept before.
func (e *entry) remember(ver int64, state breaker.State, until, retry time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ver < e.seen || ver < e.ver && e.state != "" {
		return // a newer state was published meanwhile
	}
	e.state, e.until, e.retry, e.ver = state, until, retry, ver
}

// invalidate drops what is kept of id from before version ver.
func (b *BreakerStore) invalidate(id breaker.ID, ver int64) {
	b.mu.RLock()
	e := b.entries[id]
	b.mu.RUnlock()
	if e == nil {
		return // never used here
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen = max(e.seen, ver)
	if e.ver < ver {
		e.state = ""
	}
}

// forget drops everything kept locally, when invalidations may have been
// lost.
func (b *BreakerStore) forget() {
	b.mu.RLock()
	defer b.mu.RUnlock()
	for _, e := range b.entries {
		e.mu.Lock()
		e.state, e.seen, e.ver = "", 0, 0
		e.mu.Unlock()
	}
}

// Allow implements breaker.Store.
func (b *BreakerStore) Allow(ctx context.Context, id breaker.ID, s breaker.Settings, now time.Time) (breaker.Permit, []breaker.Event, error) {
	e := b.entry(id)
	if err := e.refusal(s, now); err != nil {
		return breaker.Permit{}, nil, err
	}
	if b.st.Degraded() {
		return b.localAllow(ctx, id, s, now)
	}
	cctx, cancel := b.st.callCtx(ctx)
	res, err := allowScript.Run(cctx, b.st.client, []string{e.key}, b.argv(e, id, s, now)...).Slice()
	cancel()
	if err != nil {
		b.st.failed(ctx, err)
		return b.localAllow(ctx, id, s, now)
	}
	code, gen, ver, t := intAt(res, 0), intAt(res, 1), intAt(res, 2), intAt(res, 3)
	events := parseEvents(at(res, 4), id, now.Location())
	tt := micros(t, now)
	switch code {
	case 1:
		e.remember(ver, breaker.ForcedOpen, now.Add(cacheCap), time.Time{})
		return breaker.Permit{}, events, &breaker.OpenError{State: breaker.ForcedOpen, RetryAfter: s.OpenFor}
	case 2:
		e.remember(ver, breaker.Open, tt, tt)
		return breaker.Permit{}, events, &breaker.OpenError{State: breaker.Open, RetryAfter: tt.Sub(now)}
	case 3:
		e.remember(ver, breaker.HalfOpen, minTime(tt, now.Add(cacheCap)), tt)
		return breaker.Permit{}, events, &breaker.OpenError{State: breaker.HalfOpen, RetryAfter: tt.Sub(now), Probing: true}
	case 4:
		e.remember(ver, "", time.Time{}, time.Time{})
		return breaker.Permit{Probe: true, Token: permit{gen: gen, probeUntil: t}}, events, nil
	}
	e.remember(ver, "", time.Time{}, time.Time{})
	return breaker.Permit{Token: permit{gen: gen}}, events, nil
}

func (b *BreakerStore) localAllow(ctx context.Context, id breaker.ID, s breaker.Settings, now time.Time) (breaker.Permit, []breaker.Event, error) {
	p, events, err := b.local.Allow(ctx, id, s, now)
	if err != nil {
		return p, events, err
	}
	return breaker.Permit{Probe: p.Probe, Token: localPermit{p}}, events, nil
}

// Done implements breaker.Store. The verdict of a permit from Redis is
// dropped while Redis cannot be reached: its generation and lease keep the
// shared breaker safe.
func (b *BreakerStore) Done(ctx context.Context, id breaker.ID, p breaker.Permit, v breaker.Verdict, r breaker.Report, s breaker.Settings, now time.Time) ([]breaker.Event, error) {
	var tok permit
	switch t := p.Token.(type) {
	case localPermit:
		return b.local.Done(ctx, id, t.p, v, r, s, now)
	case permit:
		tok = t
	default:
		return nil, fmt.Errorf("breaker %s: foreign permit", id)
	}
	if b.st.Degraded() {
		return nil, nil
	}
	e := b.entry(id)
	verdict := 0
	switch v {
	case breaker.Success:
		verdict = 1
	case breaker.Failure:
		verdict = 2
	}
	args := b.argv(e, id, s, now, tok.gen, verdict, r.RetryAfter.Microseconds(), string(r.Outcome),
		tok.probeUntil, s.Window.String())
	cctx, cancel := b.st.callCtx(ctx)
	res, err := doneScript.Run(cctx, b.st.client, []string{e.key}, args...).Slice()
	cancel()
	if err != nil {
		b.st.failed(ctx, err)
		return nil, nil
	}
	b.observe(e, strAt(res, 0), intAt(res, 2), intAt(res, 3), now)
	return parseEvents(at(res, 4), id, now.Location()), nil
}

// observe remembers a state read from Redis outside Allow.
func (b *BreakerStore) observe(e *entry, state string, ver, openUntil int64, now time.Time) {
	switch breaker.State(state) {
	case breaker.Open:
		t := micros(openUntil, now)
		e.remember(ver, breaker.Open, t, t)
	case breaker.ForcedOpen:
		e.remember(ver, breaker.ForcedOpen, now.Add(cacheCap), time.Time{})
	default:
		e.remember(ver, "", time.Time{}, time.Time{})
	}
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
	if b.st.Degraded() {
		return local(ctx, id, s, now)
	}
	e := b.entry(id)
	cctx, cancel := b.st.callCtx(ctx)
	res, err := adminScript.Run(cctx, b.st.client, []string{e.key}, b.argv(e, id, s, now, string(to))...).Slice()
	cancel()
	if err != nil {
		b.st.failed(ctx, err)
		return local(ctx, id, s, now)
	}
	b.observe(e, strAt(res, 0), intAt(res, 2), 0, now)
	return parseEvents(at(res, 3), id, now.Location()), nil
}

// Status implements breaker.Store.
func (b *BreakerStore) Status(ctx context.Context, id breaker.ID, s breaker.Settings, now time.Time) (breaker.Status, []breaker.Event, error) {
	if b.st.Degraded() {
		return b.local.Status(ctx, id, s, now)
	}
	e := b.entry(id)
	cctx, cancel := b.st.callCtx(ctx)
	res, err := statusScript.Run(cctx, b.st.client, []string{e.key}, b.argv(e, id, s, now)...).Slice()
	cancel()
	if err != nil {
		b.st.failed(ctx, err)
		return b.local.Status(ctx, id, s, now)
	}
	loc := now.Location()
	st := breaker.Status{
		State:     breaker.State(strAt(res, 0)),
		Since:     micros(intAt(res, 1), now),
		OpenTotal: time.Duration(intAt(res, 3)) * time.Microsecond,
		Calls:     int(intAt(res, 4)),
		Failures:  int(intAt(res, 5)),
	}
	if st.State == breaker.Open {
		st.OpenUntil = micros(intAt(res, 2), now)
	}
	if last, ok := parseLast(strAt(res, 9), id, loc); ok {
		st.Last = &last
	}
	b.observe(e, string(st.State), intAt(res, 7), intAt(res, 2), now)
	return st, parseEvents(at(res, 10), id, loc), nil
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
// a trip, the window.
func event(f []string, id breaker.ID, loc *time.Location) (breaker.Event, bool) {
	if len(f) != 9 {
		return breaker.Event{}, false
	}
	from, to := breaker.State(f[1]), breaker.State(f[2])
	if !validState(from) || !validState(to) {
		return breaker.Event{}, false
	}
	at := time.UnixMicro(parseInt(f[0])).In(loc)
	if y := at.Year(); y < 0 || y > 9999 {
		return breaker.Event{}, false // not a time the admin API can write (RFC 3339)
	}
	e := breaker.Event{
		Time: at, BreakerKey: id.Key, Operation: id.Operation,
		From: from, To: to, Reason: f[3],
	}
	calls, failures := int(parseInt(f[4])), int(parseInt(f[5]))
	e.Evidence = breaker.Evidence{
		Calls: calls, Failures: failures, ConsecutiveFailures: int(parseInt(f[6])),
		RetryAfter: (time.Duration(parseInt(f[7])) * time.Microsecond).Seconds(),
	}
	if calls > 0 {
		e.Evidence.Ratio = float64(failures) / float64(calls)
	}
	e.Evidence.WindowSeconds = (time.Duration(parseInt(f[8])) * time.Microsecond).Seconds()
	return e, true
}

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

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// toLocal seeds the local fallback with what this replica knows of each
// breaker, as the stores degrade: a breaker known open stays open.
func (b *BreakerStore) toLocal() {
	now := time.Now()
	b.mu.RLock()
	defer b.mu.RUnlock()
	for id, e := range b.entries {
		e.mu.Lock()
		st, retry, s := e.state, e.retry, e.settings
		e.mu.Unlock()
		switch st {
		case breaker.Open:
			b.local.Seed(id, s, st, now, retry, now)
		case breaker.ForcedOpen, breaker.HalfOpen:
			b.local.Seed(id, s, st, now, time.Time{}, now)
		}
	}
}

// reconcile prepares the return to shared state: invalidations may have
// been lost meanwhile, so what was remembered is read again.
func (b *BreakerStore) reconcile(context.Context) bool {
	b.forget()
	b.st.Limits.forget()
	return true
}
