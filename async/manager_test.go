package async

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
)

// outcomes counts OnDelivery outcomes.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) add(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.n == nil {
		o.n = map[string]int{}
	}
	o.n[s]++
}

func (o *outcomes) get(s string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[s]
}

type rig struct {
	m      *Manager
	eng    *fanout.Engine
	store  *MemoryStore
	clock  *fakeClock
	portal *portal
	counts *outcomes
}

func newRig(t *testing.T, opts Options) *rig {
	t.Helper()
	p := newPortal(t)
	clock := newFakeClock()
	p.clock = clock
	var hook atomic.Pointer[Manager]
	eng, set := testEngine(t, p, clock.Now, func(e breaker.Event) {
		if m := hook.Load(); m != nil {
			m.OnTransition(e)
		}
	})
	r := &rig{store: NewMemoryStore(), clock: clock, portal: p, counts: &outcomes{}}
	opts.Engine, opts.Breakers, opts.Store, opts.Clock = eng, set, r.store, r.clock
	r.eng = eng

	opts.OnDelivery = r.counts.add
	if opts.Resolver == nil {
		opts.Resolver = resolver{}
	}
	m, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	hook.Store(m)
	m.Start()
	t.Cleanup(func() { _ = m.Close() })
	r.m = m
	return r
}

func (r *rig) submit(t *testing.T, callback string) View {
	t.Helper()
	eng := r.m.opts.Engine
	q := aggregator.Query{Domain: "AB123CD"}
	set, bad := eng.Select(q, nil)
	if len(bad) > 0 {
		t.Fatal(bad)
	}
	v, err := r.m.Submit(context.Background(), Request{Query: q, Sources: set, CallbackURL: callback})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestRetriesThenDeadLetter drives a receiver that never recovers with a
// fake clock: exactly max_attempts attempts, at delays min(backoff·2^(n-1),
// 60s) after each failure, then one DLQ entry; redelivered, the same
// message (same webhook-id) is retained while the origin's breaker is
// open, then goes as the probe.
func TestRetriesThenDeadLetter(t *testing.T) {
	for _, tc := range []struct {
		backoff time.Duration
		delays  []time.Duration
	}{
		{time.Second, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}},
		{10 * time.Second, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 60 * time.Second}},
	} {
		t.Run(tc.backoff.String(), func(t *testing.T) {
			key := []byte("0123456789abcdef0123456789abcdef")
			r := newRig(t, Options{Backoff: tc.backoff, MaxAttempts: 5, AllowPrivate: true,
				BreakerFailures: 5, BreakerOpenFor: 30 * time.Second,
				Secret: "whsec_" + base64.StdEncoding.EncodeToString(key)})
			recv := newReceiver(t, r.clock, 500)
			v := r.submit(t, recv.srv.URL+"/hook")
			if v.Status != Completed {
				t.Fatalf("status %s, want completed at once", v.Status)
			}
			for n := 1; n <= 5; n++ {
				eventually(t, "attempt", func() bool { return len(recv.hooks()) == n })
				if n == 5 {
					break
				}
				var due time.Time
				eventually(t, "rescheduled", func() bool {
					ds := r.store.pending(t)
					if len(ds) == 1 && ds[0].Attempts == n {
						due = ds[0].Due
						return true
					}
					return false
				})
				got := recv.hooks()
				if d := due.Sub(got[n-1].at); d != tc.delays[n-1] {
					t.Fatalf("after attempt %d: next in %v, want %v", n, d, tc.delays[n-1])
				}
				// Nothing goes before its time.
				r.clock.Set(due.Add(-time.Millisecond))
				time.Sleep(20 * time.Millisecond)
				if len(recv.hooks()) != n {
					t.Fatalf("attempt %d went early", n+1)
				}
				r.clock.Set(due)
			}
			eventually(t, "dead letter", func() bool { n, _ := r.store.DLQLen(context.Background()); return n == 1 })
			hooks := recv.hooks()
			if len(hooks) != 5 {
				t.Fatalf("%d attempts, want exactly 5", len(hooks))
			}
			msgID := hooks[0].header.Get(HeaderID)
			for i, h := range hooks {
				if i > 0 {
					if gap := h.at.Sub(hooks[i-1].at); gap != tc.delays[i-1] {
						t.Errorf("gap before attempt %d = %v, want %v", i+1, gap, tc.delays[i-1])
					}
				}
				if id := h.header.Get(HeaderID); id != msgID {
					t.Errorf("attempt %d webhook-id %s, want %s (stable)", i+1, id, msgID)
				}
				if sig := Sign(key, msgID, h.at, h.body); h.header.Get(HeaderSignature) != sig {
					t.Errorf("attempt %d signature %s, want %s", i+1, h.header.Get(HeaderSignature), sig)
				}
			}
			entries, _ := r.m.DLQ(context.Background())
			e := entries[0]
			if e.Attempts != 5 || e.QueryID != v.ID || e.LastError != "HTTP 500" || !e.FailedAt.Equal(hooks[4].at) {
				t.Fatalf("DLQ entry = %+v", e)
			}
			if got := r.counts.get(OutcomeFailed); got != 4 {
				t.Errorf("failed outcomes %d, want 4", got)
			}
			if got := r.counts.get(OutcomeDeadLettered); got != 1 {
				t.Errorf("dead_lettered outcomes %d, want 1", got)
			}

			// The fifth failure opened the origin's breaker: the
			// redelivery is retained, consuming no attempt, until the
			// pause ends; then it is the probe.
			recv.set(200)
			if err := r.m.Redeliver(context.Background(), e.ID); err != nil {
				t.Fatal(err)
			}
			if err := r.m.Redeliver(context.Background(), e.ID); err == nil {
				t.Fatal("redelivered twice")
			}
			eventually(t, "retained", func() bool { return r.counts.get(OutcomeRetained) == 1 })
			if ds := r.store.pending(t); len(ds) != 1 || ds[0].Attempts != 0 || !ds[0].Retained {
				t.Fatalf("retained delivery = %+v", ds)
			}
			r.clock.Set(hooks[4].at.Add(30 * time.Second))
			eventually(t, "redelivered", func() bool { return r.counts.get(OutcomeDelivered) == 1 })
			last := recv.hooks()[5]
			if last.header.Get(HeaderID) != msgID || last.status != 200 {
				t.Errorf("redelivery webhook-id %s status %d, want %s 200", last.header.Get(HeaderID), last.status, msgID)
			}
			var ev Event
			if err := json.Unmarshal(last.body, &ev); err != nil || ev.Type != EventCompleted || ev.Data.ID != v.ID ||
				ev.Data.Status != Completed || !ev.Data.Result.Complete {
				t.Errorf("redelivered event = %+v, %v", ev, err)
			}
			if n, _ := r.store.DLQLen(context.Background()); n != 0 {
				t.Errorf("DLQ has %d entries after the redelivery", n)
			}
		})
	}
}

// TestDialGuard: a callback name that resolved to a public address when
// the query was accepted but dials a loopback one (DNS rebinding) is
// refused at dial time.
func TestDialGuard(t *testing.T) {
	r := newRig(t, Options{MaxAttempts: 1, Resolver: resolver{"localhost": {"203.0.113.7"}}})
	recv := newReceiver(t, r.clock, 200)
	callback := strings.Replace(recv.srv.URL, "127.0.0.1", "localhost", 1) + "/hook"
	if why := r.m.CheckCallback(context.Background(), callback); why != "" {
		t.Fatalf("callback refused at acceptance: %s", why)
	}
	r.submit(t, callback)
	eventually(t, "dead letter", func() bool { n, _ := r.store.DLQLen(context.Background()); return n == 1 })
	entries, _ := r.m.DLQ(context.Background())
	if !strings.Contains(entries[0].LastError, ErrPrivateTarget.Error()) {
		t.Errorf("last_error %q, want the dial guard's refusal", entries[0].LastError)
	}
	if n := len(recv.hooks()); n != 0 {
		t.Errorf("the receiver on loopback got %d requests", n)
	}
	if why := r.m.CheckCallback(context.Background(), recv.srv.URL); why == "" {
		t.Error("a loopback callback accepted")
	}
}

// TestExpiry: a source that never recovers leaves the query pending until
// max_wait, then it is delivered as expired with what it has.
func TestExpiry(t *testing.T) {
	r := newRig(t, Options{AllowPrivate: true, MaxWait: time.Minute})
	recv := newReceiver(t, r.clock, 200)
	r.portal.setDown(400) // a 4xx: the breaker stays closed, the source fails
	v := r.submit(t, recv.srv.URL)
	if v.Status != Pending || v.Result.Sources[0].Status != aggregator.EntryFailed || v.CompletedAt != nil {
		t.Fatalf("submitted = %+v", v)
	}
	if !v.ExpiresAt.Equal(v.CreatedAt.Add(time.Minute)) {
		t.Errorf("expires_at %v, want created_at + 1m", v.ExpiresAt)
	}
	hits := func() int { r.portal.mu.Lock(); defer r.portal.mu.Unlock(); return r.portal.hits }
	// Retention retries back off: a handful of calls in a minute.
	for range 60 {
		r.clock.Advance(time.Second)
		time.Sleep(2 * time.Millisecond)
	}
	eventually(t, "expired delivery", func() bool { return len(recv.hooks()) == 1 })
	if n := hits(); n < 3 || n > 12 {
		t.Errorf("portal called %d times in max_wait, want a few retries with backoff", n)
	}
	var ev Event
	if err := json.Unmarshal(recv.hooks()[0].body, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.Type != EventExpired || ev.Data.Status != Expired || ev.Data.Result.Complete {
		t.Errorf("event = %s %s complete=%v, want query.expired", ev.Type, ev.Data.Status, ev.Data.Result.Complete)
	}
	got, err := r.m.Get(context.Background(), v.ID)
	if err != nil || got.Status != Expired || got.CompletedAt == nil {
		t.Errorf("Get = %+v, %v", got, err)
	}
}
