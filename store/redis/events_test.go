package redisstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/internal/redistest"
	redisstore "github.com/multas/aggregator/store/redis"
)

func TestEventLog(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	prefix := testPrefix(t, c)
	a := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
	b := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
	t0 := breakertest.NewClock().Now()
	ev := func(i int) breaker.Event {
		return breaker.Event{Time: t0.Add(time.Duration(i) * time.Second), BreakerKey: "caba",
			Operation: aggregator.ByDomain, From: breaker.Closed, To: breaker.Open, Reason: "r"}
	}
	for i := range redisstore.EventLogSize + 5 {
		if i%2 == 0 {
			a.Events.Append(ev(i))
		} else {
			b.Events.Append(ev(i))
		}
	}
	all := a.Events.Since(time.Time{})
	if len(all) != redisstore.EventLogSize {
		t.Fatalf("%d events kept, want %d", len(all), redisstore.EventLogSize)
	}
	if !all[0].Time.Equal(ev(5).Time) || !all[len(all)-1].Time.Equal(ev(redisstore.EventLogSize+4).Time) {
		t.Errorf("kept %v … %v, want the newest, oldest first", all[0].Time, all[len(all)-1].Time)
	}
	if got := b.Events.Since(ev(redisstore.EventLogSize + 2).Time); len(got) != 2 {
		t.Errorf("Since the third newest = %d events, want the 2 strictly after", len(got))
	}
	latest := b.Events.Latest(3)
	if len(latest) != 3 || !latest[2].Time.Equal(ev(redisstore.EventLogSize+4).Time) || latest[0].Time.After(latest[1].Time) {
		t.Errorf("Latest(3) = %+v, want the 3 newest, oldest first", latest)
	}
	if got := a.Events.Latest(0); got == nil || len(got) != 0 {
		t.Errorf("Latest(0) = %#v, want empty", got)
	}
	if got := a.Events.Since(t0.Add(time.Hour * 24)); got == nil || len(got) != 0 {
		t.Errorf("Since the future = %#v, want empty", got)
	}
}

func TestEventLogHistory(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	breakertest.RunHistory(t, func(t *testing.T) breaker.EventLog {
		return newStores(t, c, redisstore.Options{Prefix: testPrefix(t, c), Timeout: suiteTimeout}).Events
	})
}

// TestEventLogHistoryShared checks that a breaker's history is the
// fleet's: what one replica appended another reads, and it outlives both.
func TestEventLogHistoryShared(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	prefix := testPrefix(t, c)
	a := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
	id := breaker.ID{Key: "caba", Operation: aggregator.ByDomain}
	t0 := breakertest.NewClock().Now()
	a.Events.Append(breaker.Event{Time: t0, BreakerKey: id.Key, Operation: id.Operation, From: breaker.Closed, To: breaker.Open, Reason: "r"})
	_ = a.Close()
	b := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
	got, from := b.Events.History(id, t0.Add(-time.Hour))
	if len(got) != 1 || got[0].To != breaker.Open || !from.Equal(t0) {
		t.Errorf("another replica's History = %+v from %v, want the transition, complete from it (the histories began then)", got, from)
	}
}

// TestEventLogFailureDegrades: Redis failing while the shared log sends (an
// append, the start of the histories) degrades the stores, and degrading
// appends a store event to that very log. It used to wait for the lock the
// failing send held: the log, and every breaker transition of the replica
// after it, blocked for ever (chaos/TestChaos/redis under load).
func TestEventLogFailureDegrades(t *testing.T) {
	t.Parallel()
	trip := breaker.Event{BreakerKey: "caba", Operation: aggregator.ByDomain, From: breaker.Closed, To: breaker.Open, Reason: "3 failures"}
	for _, tt := range []struct {
		name string
		do   func(*redisstore.Stores)
		want []string // the log, oldest first
	}{
		{"append", func(st *redisstore.Stores) { st.Events.Append(trip) }, []string{"closed→open", "shared→local"}},
		{"begin", func(st *redisstore.Stores) { st.Events.Begin(context.Background()) }, []string{"shared→local"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartServer(t)
			client := serverClient(t, srv, 200*time.Millisecond)
			st := newStores(t, client, redisstore.Options{Prefix: "agg:", Timeout: 200 * time.Millisecond, StableFor: time.Hour})
			if err := st.Ping(context.Background()); err != nil {
				t.Fatalf("Ping: %v", err)
			}
			srv.Stop()
			done := make(chan struct{})
			go func() {
				defer close(done)
				tt.do(st)
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("the shared log blocked on its own lock when Redis failed")
			}
			if !st.Degraded() {
				t.Error("not degraded after Redis failed")
			}
			var got []string
			for _, e := range st.Events.Latest(10) {
				got = append(got, string(e.From)+"→"+string(e.To))
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("the log on local state: %v, want %v", got, tt.want)
			}
		})
	}
}
