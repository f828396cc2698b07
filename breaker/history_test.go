package breaker_test

import (
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
)

func TestRingHistory(t *testing.T) {
	t.Parallel()
	breakertest.RunHistory(t, func(*testing.T) breaker.EventLog { return breaker.NewRing(100) })
}

// TestRingHistoryKeepsADay checks that a quiet breaker's day survives a
// busy one's events (the shared log keeps only the latest), and that
// transitions older than a day before the newest are let go.
func TestRingHistoryKeepsADay(t *testing.T) {
	t.Parallel()
	r := breaker.NewRing(10)
	t0 := breakertest.NewClock().Now()
	quiet := breaker.ID{Key: "quiet", Operation: aggregator.ByDomain}
	busy := breaker.ID{Key: "busy", Operation: aggregator.ByDomain}
	r.Append(breaker.Event{Time: t0, BreakerKey: quiet.Key, Operation: quiet.Operation, From: breaker.Closed, To: breaker.Open})
	for i := range 50 {
		r.Append(breaker.Event{Time: t0.Add(time.Duration(i+1) * time.Minute), BreakerKey: busy.Key, Operation: busy.Operation,
			From: breaker.Closed, To: breaker.Open})
	}
	if got, _ := r.History(quiet, t0.Add(-time.Hour)); len(got) != 1 {
		t.Errorf("the quiet breaker's history = %+v, want its transition, kept beside 50 of another's", got)
	}
	if got := r.Latest(100); len(got) != 10 {
		t.Errorf("the log itself keeps %d events, want its size, 10", len(got))
	}
	r.Append(breaker.Event{Time: t0.Add(breaker.HistoryFor + time.Hour), BreakerKey: quiet.Key, Operation: quiet.Operation,
		From: breaker.Open, To: breaker.HalfOpen})
	got, _ := r.History(quiet, time.Time{})
	if len(got) != 1 || got[0].To != breaker.HalfOpen {
		t.Errorf("after a day and an hour, history = %+v, want only the newest transition", got)
	}
}

func TestTimeline(t *testing.T) {
	t.Parallel()
	t0 := breakertest.NewClock().Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ev := func(s int, from, to breaker.State) breaker.Event {
		return breaker.Event{Time: at(s), BreakerKey: "k", Operation: aggregator.ByDomain, From: from, To: to}
	}
	seg := func(state breaker.State, start, end int) breaker.Segment {
		return breaker.Segment{State: state, Start: at(start), End: at(end)}
	}
	const (
		c = breaker.Closed
		h = breaker.HalfOpen
		o = breaker.Open
		f = breaker.ForcedOpen
	)
	tests := []struct {
		name     string
		events   []breaker.Event
		current  breaker.State
		from, to int
		want     []breaker.Segment
	}{
		{name: "no transition: the current state all along", current: o, from: 0, to: 100,
			want: []breaker.Segment{seg(o, 0, 100)}},
		{name: "before the first, its from state", current: c, from: 0, to: 100,
			events: []breaker.Event{ev(10, c, o), ev(40, o, h), ev(41, h, c)},
			want:   []breaker.Segment{seg(c, 0, 10), seg(o, 10, 40), seg(h, 40, 41), seg(c, 41, 100)}},
		{name: "unsorted input", current: c, from: 0, to: 100,
			events: []breaker.Event{ev(41, h, c), ev(10, c, o), ev(40, o, h)},
			want:   []breaker.Segment{seg(c, 0, 10), seg(o, 10, 40), seg(h, 40, 41), seg(c, 41, 100)}},
		{name: "a transition before the window sets its start", current: c, from: 20, to: 100,
			events: []breaker.Event{ev(10, c, f), ev(50, f, c)},
			want:   []breaker.Segment{seg(f, 20, 50), seg(c, 50, 100)}},
		{name: "same state twice merges", current: o, from: 0, to: 100,
			events: []breaker.Event{ev(10, c, o), ev(20, o, o)},
			want:   []breaker.Segment{seg(c, 0, 10), seg(o, 10, 100)}},
		{name: "store events are not transitions", current: c, from: 0, to: 100,
			events: []breaker.Event{{Time: at(5), Kind: breaker.KindStore, From: "shared", To: "local"}},
			want:   []breaker.Segment{seg(c, 0, 100)}},
		{name: "only a later transition: its from state", current: o, from: 0, to: 50,
			events: []breaker.Event{ev(60, h, o)},
			want:   []breaker.Segment{seg(h, 0, 50)}},
		{name: "empty window", current: c, from: 50, to: 50, want: []breaker.Segment{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := breaker.Timeline(tt.events, tt.current, at(tt.from), at(tt.to))
			if len(got) != len(tt.want) {
				t.Fatalf("Timeline = %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i].State != tt.want[i].State || !got[i].Start.Equal(tt.want[i].Start) || !got[i].End.Equal(tt.want[i].End) {
					t.Errorf("segment %d = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestSetHistoryBeginsAtStart: a Set's own log knows nothing from before
// it was made, and says so.
func TestSetHistoryBeginsAtStart(t *testing.T) {
	t.Parallel()
	clock := breakertest.NewClock()
	set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{Now: clock.Now})
	id := breaker.ID{Key: "caba", Operation: aggregator.ByDomain}
	set.Add(id, "caba", breakertest.Settings())
	if _, from := set.Events().History(id, clock.Now().Add(-breaker.HistoryFor)); !from.Equal(clock.Now()) {
		t.Errorf("from = %v, want the Set's start %v", from, clock.Now())
	}
}
