package breakertest

import (
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
)

// RunHistory checks an EventLog's per-breaker History: each breaker's own
// transitions, oldest first whatever the order they were appended in, from
// the time asked, none of another breaker's nor of the store, and, once
// more than breaker.HistorySize were appended, the newest ones with a from
// that says where they begin. The log comes from newLog, empty.
func RunHistory(t *testing.T, newLog func(t *testing.T) breaker.EventLog) {
	t.Helper()
	a := breaker.ID{Key: "caba", Operation: aggregator.ByDomain}
	b := breaker.ID{Key: "caba", Operation: aggregator.ByID}
	t0 := NewClock().Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	ev := func(id breaker.ID, s int, from, to breaker.State) breaker.Event {
		return breaker.Event{Time: at(s), BreakerKey: id.Key, Operation: id.Operation, From: from, To: to, Reason: "r"}
	}

	t.Run("OwnTransitionsInOrder", func(t *testing.T) {
		log := newLog(t)
		log.Append(ev(a, 10, breaker.Closed, breaker.Open))
		log.Append(ev(b, 11, breaker.Closed, breaker.ForcedOpen))
		log.Append(ev(a, 40, breaker.HalfOpen, breaker.Closed))
		// Dated when its open time ended, appended when it was noticed.
		log.Append(ev(a, 30, breaker.Open, breaker.HalfOpen))
		log.Append(breaker.Event{Time: at(35), Kind: breaker.KindStore, From: "shared", To: "local", Reason: "r"})

		got, from := log.History(a, at(0))
		want := []breaker.State{breaker.Open, breaker.HalfOpen, breaker.Closed}
		if len(got) != len(want) {
			t.Fatalf("History(a) = %+v, want %d transitions", got, len(want))
		}
		for i, e := range got {
			if e.To != want[i] || e.BreakerKey != a.Key || e.Operation != a.Operation {
				t.Errorf("transition %d = %s/%s → %s, want a's → %s", i, e.BreakerKey, e.Operation, e.To, want[i])
			}
		}
		// Complete from the time asked, or from when the log began.
		if from.Before(at(0)) || from.After(got[0].Time) {
			t.Errorf("from = %v, want between the time asked, %v, and the first transition, %v", from, at(0), got[0].Time)
		}
		if got, _ := log.History(a, at(30)); len(got) != 2 || !got[0].Time.Equal(at(30)) {
			t.Errorf("History(a, 30s) = %+v, want the 2 transitions at or after 30s", got)
		}
		if got, _ := log.History(b, at(0)); len(got) != 1 || got[0].To != breaker.ForcedOpen {
			t.Errorf("History(b) = %+v, want its one transition", got)
		}
		none := breaker.ID{Key: "nobody", Operation: aggregator.Voucher}
		if got, from := log.History(none, at(0)); got == nil || len(got) != 0 || from.Before(at(0)) || from.After(at(10)) {
			t.Errorf("History(unknown) = %#v from %v, want empty, from the time asked or the log's start", got, from)
		}
	})

	t.Run("Bounded", func(t *testing.T) {
		log := newLog(t)
		n := breaker.HistorySize + 7
		for i := range n {
			from, to := breaker.Closed, breaker.Open
			if i%2 == 1 {
				from, to = to, from
			}
			log.Append(ev(a, i, from, to))
		}
		got, from := log.History(a, at(0))
		if len(got) != breaker.HistorySize {
			t.Fatalf("%d transitions kept, want %d", len(got), breaker.HistorySize)
		}
		if oldest := at(n - breaker.HistorySize); !got[0].Time.Equal(oldest) || !from.Equal(oldest) {
			t.Errorf("oldest kept %v, from %v; want both %v (the older ones were let go)", got[0].Time, from, oldest)
		}
		if newest := got[len(got)-1].Time; !newest.Equal(at(n - 1)) {
			t.Errorf("newest kept %v, want %v", newest, at(n-1))
		}
	})
}
