package breaker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"
)

// MemoryStore keeps breaker state in this process.
//
// In the closed state, a gobreaker TwoStepCircuitBreaker does the counting
// over the rolling window (Interval and BucketPeriod), the neutral outcomes
// (IsExcluded) and the trip decision (ReadyToTrip). gobreaker has no manual
// reset or forced open, a fixed open time (no Retry-After floor), no
// half-open lease and no injectable clock, so from the trip on this store
// owns the state: a trip hands over to our open state and the gobreaker
// instance is replaced by a fresh one, which is how counts restart.
type MemoryStore struct {
	mu      sync.Mutex
	entries map[ID]*memEntry
}

// NewMemoryStore returns an empty store; breakers are created on first use.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{entries: make(map[ID]*memEntry)}
}

var _ Store = (*MemoryStore)(nil)

var (
	errFailure  = errors.New("failure")
	errExcluded = errors.New("neutral")
)

type memEntry struct {
	mu sync.Mutex

	cb       *gobreaker.TwoStepCircuitBreaker[struct{}]
	settings Settings
	// trip holds the counts gobreaker tripped on, set by ReadyToTrip while
	// Done holds mu (gobreaker calls it synchronously from done).
	trip *gobreaker.Counts

	gen        uint64
	state      State
	since      time.Time
	openUntil  time.Time
	probeUntil time.Time
	openTotal  time.Duration
	last       *Event
}

// memToken is a MemoryStore Permit's Token (its Gen is the entry's
// generation): the circuit breaker's done for a call through the closed
// breaker, nil for a probe. A func in an interface takes no allocation.
type memToken func(error)

func (m *MemoryStore) entry(id ID, s Settings, now time.Time) *memEntry {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[id]
	if !ok {
		e = &memEntry{state: Closed, since: now}
		e.settings = s
		e.newCounter()
		m.entries[id] = e
	}
	return e
}

// maxWindow is the longest window counted: window + window/10 fits in a
// time.Duration.
const maxWindow = time.Duration(math.MaxInt64 / 11 * 10)

// newCounter replaces the closed-state counter: counts start again.
func (e *memEntry) newCounter() {
	s := e.settings
	window := s.Window
	if window <= 0 {
		window = time.Minute
	}
	// gobreaker rounds the window up to a multiple of the bucket period in
	// int64 nanoseconds: past ~266 years that overflows into a counter
	// without buckets, which panics at the first call. No window so long
	// behaves any differently from this one.
	window = min(window, maxWindow)
	e.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Interval:     window,
		BucketPeriod: window / 10,
		// Our state takes over at the trip, so gobreaker's own open
		// state is never observed.
		Timeout: 24 * time.Hour,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			if !shouldTrip(s, int(c.TotalSuccesses+c.TotalFailures), int(c.TotalFailures), int(c.ConsecutiveFailures)) {
				return false
			}
			e.trip = &c
			return true
		},
		IsExcluded: func(err error) bool { return errors.Is(err, errExcluded) },
	})
	e.trip = nil
}

// shouldTrip is the trip rule of SPEC 4.1.
func shouldTrip(s Settings, calls, failures, consecutive int) bool {
	if s.ConsecutiveFailures > 0 && consecutive >= s.ConsecutiveFailures {
		return true
	}
	min := s.MinCalls
	if min < 1 {
		min = 1
	}
	return calls >= min && float64(failures) >= s.FailureRatio*float64(calls)
}

// tripEvidence explains a trip by the rule that fired: consecutive
// failures, or the failure ratio over the window.
func tripEvidence(s Settings, calls, failures, consecutive int) (Evidence, string) {
	if s.ConsecutiveFailures > 0 && consecutive >= s.ConsecutiveFailures {
		return Evidence{ConsecutiveFailures: consecutive}, fmt.Sprintf("%d consecutive failures", consecutive)
	}
	ev := Evidence{Calls: calls, Failures: failures, WindowSeconds: s.Window.Seconds()}
	if calls > 0 {
		ev.Ratio = float64(failures) / float64(calls)
	}
	return ev, fmt.Sprintf("%d of %d calls failed in the %s window (ratio %.2f, threshold %.2f)",
		failures, calls, s.Window, ev.Ratio, s.FailureRatio)
}

// sync applies changed settings (from the admin API) before a decision.
func (e *memEntry) sync(s Settings) {
	if !e.settings.Equal(s) {
		e.settings = s
		if e.state == Closed {
			e.newCounter()
		}
	}
}

func (e *memEntry) transition(id ID, to State, at time.Time, reason string, ev Evidence) Event {
	if e.state == Open || e.state == ForcedOpen {
		e.openTotal += at.Sub(e.since)
	}
	event := Event{Time: at, BreakerKey: id.Key, Operation: id.Operation, From: e.state, To: to, Reason: reason, Evidence: ev}
	e.gen++
	e.state = to
	e.since = at
	e.probeUntil = time.Time{}
	e.openUntil = time.Time{}
	if to == Closed {
		e.newCounter()
	}
	e.last = &event
	return event
}

// advance turns an open breaker whose time has passed into half-open.
func (e *memEntry) advance(id ID, now time.Time) []Event {
	if e.state != Open || now.Before(e.openUntil) {
		return nil
	}
	return []Event{e.transition(id, HalfOpen, e.openUntil, "open time elapsed", Evidence{})}
}

func (e *memEntry) open(id ID, now time.Time, reason string, ev Evidence, retryAfter time.Duration) Event {
	d := e.settings.OpenFor
	retryAfter = min(retryAfter, MaxRetryAfterFloor)
	if retryAfter > d {
		d = retryAfter
		ev.RetryAfter = retryAfter.Seconds()
	}
	event := e.transition(id, Open, now, reason, ev)
	e.openUntil = now.Add(d)
	e.newCounter()
	return event
}

// Allow implements Store.
func (m *MemoryStore) Allow(_ context.Context, id ID, s Settings, now time.Time) (Permit, []Event, error) {
	e := m.entry(id, s, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sync(s)
	events := e.advance(id, now)
	switch e.state {
	case ForcedOpen:
		return Permit{}, events, &OpenError{State: ForcedOpen, RetryAfter: s.OpenFor}
	case Open:
		return Permit{}, events, &OpenError{State: Open, RetryAfter: e.openUntil.Sub(now)}
	case HalfOpen:
		if now.Before(e.probeUntil) {
			return Permit{}, events, &OpenError{State: HalfOpen, RetryAfter: e.probeUntil.Sub(now), Probing: true}
		}
		e.probeUntil = now.Add(s.lease())
		return Permit{Probe: true, Token: memToken(nil), Gen: e.gen}, events, nil
	}
	done, err := e.cb.Allow()
	if err != nil {
		// Unreachable: our state leaves closed at the trip. Refuse safely.
		return Permit{}, events, &OpenError{State: Open, RetryAfter: s.OpenFor}
	}
	return Permit{Token: memToken(done), Gen: e.gen}, events, nil
}

// Done implements Store.
func (m *MemoryStore) Done(_ context.Context, id ID, p Permit, v Verdict, r Report, s Settings, now time.Time) ([]Event, error) {
	done, ok := p.Token.(memToken)
	if !ok {
		return nil, fmt.Errorf("breaker %s: foreign permit", id)
	}
	e := m.entry(id, s, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	if p.Gen != e.gen {
		return nil, nil // a call of an earlier generation: its verdict is stale
	}
	switch e.state {
	case HalfOpen:
		switch v {
		case Success:
			return []Event{e.transition(id, Closed, now, "probe succeeded", Evidence{})}, nil
		case Failure:
			return []Event{e.open(id, now, fmt.Sprintf("probe failed (%s)", r.Outcome), Evidence{}, r.RetryAfter)}, nil
		}
		e.probeUntil = time.Time{} // neutral: the slot is free for the next call
		return nil, nil
	case Closed:
		if done == nil {
			return nil, nil
		}
		switch v {
		case Success:
			done(nil)
		case Failure:
			done(errFailure)
		default:
			done(errExcluded)
		}
		if c := e.trip; c != nil {
			calls, failures := int(c.TotalSuccesses+c.TotalFailures), int(c.TotalFailures)
			ev, reason := tripEvidence(e.settings, calls, failures, int(c.ConsecutiveFailures))
			return []Event{e.open(id, now, reason, ev, r.RetryAfter)}, nil
		}
	}
	return nil, nil
}

// Reset implements Store.
func (m *MemoryStore) Reset(_ context.Context, id ID, s Settings, now time.Time) ([]Event, error) {
	e := m.entry(id, s, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sync(s)
	events := e.advance(id, now)
	return append(events, e.transition(id, Closed, now, "manual reset from admin API", Evidence{})), nil
}

// ForceOpen implements Store.
func (m *MemoryStore) ForceOpen(_ context.Context, id ID, s Settings, now time.Time) ([]Event, error) {
	e := m.entry(id, s, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sync(s)
	events := e.advance(id, now)
	return append(events, e.transition(id, ForcedOpen, now, "manual open from admin API", Evidence{})), nil
}

// Status implements Store.
func (m *MemoryStore) Status(_ context.Context, id ID, s Settings, now time.Time) (Status, []Event, error) {
	e := m.entry(id, s, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sync(s)
	events := e.advance(id, now)
	st := Status{State: e.state, Since: e.since, OpenUntil: e.openUntil, OpenTotal: e.openTotal, Last: e.last}
	if e.state == Open || e.state == ForcedOpen {
		st.OpenTotal += now.Sub(e.since)
	}
	if e.state == Closed {
		_ = e.cb.State() // rolls the window forward
		c := e.cb.Counts()
		st.Calls, st.Failures = int(c.TotalSuccesses+c.TotalFailures), int(c.TotalFailures)
	}
	return st, events, nil
}

// Seed makes id's state st, entered at since (open until openUntil), with
// counts restarted and no event: a replica that falls back to this store
// when its shared store fails goes on from what the fleet knew, so an open
// breaker stays open until its time and a forced open until reset.
// Permits given before are stale.
func (m *MemoryStore) Seed(id ID, s Settings, st State, since, openUntil time.Time, now time.Time) {
	e := m.entry(id, s, now)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sync(s)
	switch st {
	case Closed, Open, HalfOpen, ForcedOpen:
	default:
		return
	}
	if since.IsZero() || since.After(now) {
		since = now
	}
	if e.state == Open || e.state == ForcedOpen {
		e.openTotal += max(now.Sub(e.since), 0)
	}
	e.gen++
	e.state, e.since, e.probeUntil, e.openUntil = st, since, time.Time{}, time.Time{}
	if st == Open {
		e.openUntil = openUntil
	}
	e.newCounter()
}
