package breaker

import (
	"slices"
	"time"
)

// HistoryFor is how far back each breaker's own transitions are kept, for
// the availability strip of the dashboard (SPEC 10): the shared event log
// keeps the latest events of every breaker together, and a flapping one
// would push a quiet one's day out of it.
const HistoryFor = 24 * time.Hour

// HistorySize bounds the transitions kept per breaker. A breaker flapping
// every few seconds all day long exceeds it; its history then starts
// later than HistoryFor ago, and says so (History's from).
const HistorySize = 1000

// history is the transitions of one breaker, oldest first by time.
type history struct {
	events []Event
	// lost is set once transitions were dropped to keep the history
	// within HistorySize: it is the oldest kept, and nothing before it is
	// complete.
	lost time.Time
}

// add inserts e in time order (transitions may be appended late: an open
// breaker's turn to half-open is dated when its open time ended) and
// drops what is older than HistoryFor before the newest or beyond
// HistorySize.
func (h *history) add(e Event) {
	i := len(h.events)
	for i > 0 && h.events[i-1].Time.After(e.Time) {
		i--
	}
	h.events = slices.Insert(h.events, i, e)
	newest := h.events[len(h.events)-1].Time
	drop := 0
	for drop < len(h.events) && newest.Sub(h.events[drop].Time) > HistoryFor {
		drop++
	}
	over := len(h.events) - drop - HistorySize
	if over > 0 {
		drop += over
	}
	if drop > 0 {
		h.events = slices.Delete(h.events, 0, drop)
	}
	if over > 0 {
		h.lost = h.events[0].Time
	}
}

// since returns the transitions at or after t, oldest first, and the time
// from which they are complete.
func (h *history) since(t, began time.Time) ([]Event, time.Time) {
	from := t
	if began.After(from) {
		from = began
	}
	if h == nil {
		return []Event{}, from
	}
	if !h.lost.IsZero() && h.lost.After(from) {
		from = h.lost
	}
	out := []Event{}
	for _, e := range h.events {
		if !e.Time.Before(t) {
			out = append(out, e)
		}
	}
	return out, from
}

// Segment is a stretch of time a breaker spent in one state.
type Segment struct {
	State State     `json:"state"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Timeline turns a breaker's transitions into the segments of its states
// from from to to, oldest first: before its first transition a breaker
// was in that transition's From state, and without any it was in current
// all along. Transitions outside (from, to] only set the state they leave
// the breaker in; adjacent segments of one state are merged.
func Timeline(events []Event, current State, from, to time.Time) []Segment {
	if !to.After(from) {
		return []Segment{}
	}
	sorted := slices.Clone(events)
	slices.SortStableFunc(sorted, func(a, b Event) int { return a.Time.Compare(b.Time) })
	state, before := current, false
	var inside []Event
	for _, e := range sorted {
		if e.Kind != "" {
			continue
		}
		switch {
		case !e.Time.After(from):
			state, before = e.To, true
		case !e.Time.After(to):
			inside = append(inside, e)
		case !before && len(inside) == 0:
			state, before = e.From, true // nothing else says what it was
		}
	}
	if !before && len(inside) > 0 {
		state = inside[0].From
	}
	out := []Segment{}
	add := func(s State, start, end time.Time) {
		if !end.After(start) {
			return
		}
		if n := len(out); n > 0 && out[n-1].State == s {
			out[n-1].End = end
			return
		}
		out = append(out, Segment{State: s, Start: start, End: end})
	}
	at := from
	for _, e := range inside {
		add(state, at, e.Time)
		state, at = e.To, e.Time
	}
	add(state, at, to)
	return out
}
