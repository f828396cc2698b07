package breaker

import (
	"slices"
	"sync"
	"time"
)

// EventLog keeps transition events for the admin API.
type EventLog interface {
	Append(Event)
	// Since returns the events strictly after t, oldest first.
	Since(t time.Time) []Event
	// Latest returns the newest n events, oldest first.
	Latest(n int) []Event
	// History returns breaker id's own transitions at or after since,
	// oldest first, kept for HistoryFor whatever the other breakers do;
	// and from, the time from which they are complete: since, or later
	// when the log began after since or had to let transitions go.
	History(id ID, since time.Time) (events []Event, from time.Time)
}

// Ring is a bounded in-memory EventLog: the oldest events make room.
type Ring struct {
	mu     sync.Mutex
	events []Event
	next   int
	full   bool

	// histories keeps each breaker's transitions (HistoryFor); began,
	// when set, is when the log started: it knows nothing before.
	histories map[ID]*history
	began     time.Time
}

// NewRing returns a log that keeps the last size events, and every
// breaker's transitions of the last HistoryFor.
func NewRing(size int) *Ring {
	if size < 1 {
		size = 1
	}
	return &Ring{events: make([]Event, size), histories: make(map[ID]*history)}
}

// Append implements EventLog.
func (r *Ring) Append(e Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events[r.next] = e
	r.next = (r.next + 1) % len(r.events)
	if r.next == 0 {
		r.full = true
	}
	if e.Kind != "" {
		return // a store event: no breaker's
	}
	id := ID{Key: e.BreakerKey, Operation: e.Operation}
	h := r.histories[id]
	if h == nil {
		h = &history{}
		r.histories[id] = h
	}
	h.add(e)
}

// History implements EventLog.
func (r *Ring) History(id ID, since time.Time) ([]Event, time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.histories[id].since(since, r.began)
}

// ordered returns every kept event, oldest first by time: an event may be
// appended after later ones (an open breaker's turn to half-open is dated
// when its open time ended, but appended when a reader notices it). r.mu
// must be held.
func (r *Ring) ordered() []Event {
	var out []Event
	if !r.full {
		out = append([]Event(nil), r.events[:r.next]...)
	} else {
		out = make([]Event, 0, len(r.events))
		out = append(out, r.events[r.next:]...)
		out = append(out, r.events[:r.next]...)
	}
	slices.SortStableFunc(out, func(a, b Event) int { return a.Time.Compare(b.Time) })
	return out
}

// Since implements EventLog.
func (r *Ring) Since(t time.Time) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []Event{}
	for _, e := range r.ordered() {
		if e.Time.After(t) {
			out = append(out, e)
		}
	}
	return out
}

// Latest implements EventLog.
func (r *Ring) Latest(n int) []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	all := r.ordered()
	if len(all) > n {
		all = all[len(all)-n:]
	}
	return all
}
