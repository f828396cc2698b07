package async

import (
	"encoding/json"
	"testing"
	"time"
)

// TestLongOutageRelease: after a long outage of the receiver, retained
// deliveries are released promptly once it is back, at the release pace:
// the outage does not push them far into the future.
func TestLongOutageRelease(t *testing.T) {
	r := newRig(t, Options{AllowPrivate: true, Backoff: 100 * time.Millisecond, MaxAttempts: 1000,
		BreakerFailures: 3, BreakerOpenFor: 400 * time.Millisecond, ReleaseRPS: 5})
	recv := newReceiver(t, r.clock, 503)
	const n = 8
	for range n {
		r.submit(t, recv.srv.URL)
	}
	step := func() {
		r.clock.Advance(50 * time.Millisecond)
		time.Sleep(3 * time.Millisecond)
	}
	for range 400 { // 20 s down
		step()
	}
	down := len(recv.hooks())
	recv.set(200)
	back := r.clock.Now()
	delivered := func() int {
		k := 0
		for _, h := range recv.hooks() {
			if h.status == 200 {
				k++
			}
		}
		return k
	}
	for i := 0; delivered() < n; i++ {
		if i > 400 {
			t.Fatalf("%d of %d delivered 20s after the receiver came back", delivered(), n)
		}
		step()
	}
	took := r.clock.Now().Sub(back)
	t.Logf("attempts while down: %d; all delivered %v after the receiver came back", down, took)
	// The pause (400ms), then one per 200ms, plus the poll for the
	// deliveries held behind the probe.
	if took > 400*time.Millisecond+n*200*time.Millisecond+2*time.Second {
		t.Errorf("released %v after the recovery: too slow", took)
	}
}

// TestLongSourceOutage: queries retained for a portal that is down for a
// long while complete soon after it recovers, its retained calls released
// at the release pace, and the portal is not hammered meanwhile.
func TestLongSourceOutage(t *testing.T) {
	r := newRig(t, Options{AllowPrivate: true, ReleaseRPS: 5})
	recv := newReceiver(t, r.clock, 200)
	r.portal.setDown(503)
	const n = 6
	for range n {
		if v := r.submit(t, recv.srv.URL); v.Status != Pending {
			t.Fatalf("status %s, want pending", v.Status)
		}
	}
	step := func() {
		r.clock.Advance(50 * time.Millisecond)
		time.Sleep(3 * time.Millisecond)
	}
	for range 400 { // 20 s down
		step()
	}
	r.portal.mu.Lock()
	down := r.portal.hits
	r.portal.down = 0
	r.portal.mu.Unlock()
	back := r.clock.Now()
	for i := 0; len(recv.hooks()) < n; i++ {
		if i > 400 {
			t.Fatalf("%d of %d queries delivered 20s after the portal came back", len(recv.hooks()), n)
		}
		step()
	}
	took := r.clock.Now().Sub(back)
	r.portal.mu.Lock()
	var after []time.Time
	for _, at := range r.portal.at {
		if !at.Before(back) {
			after = append(after, at)
		}
	}
	r.portal.mu.Unlock()
	t.Logf("portal calls while down: %d; all completed %v after it came back", down, took)
	// Breaker open 200ms at a time: its probes, not every query's calls.
	if down > 20/0.2+n {
		t.Errorf("%d calls to the down portal in 20s", down)
	}
	// The portal stamps arrivals on a clock that moves in 50ms steps while
	// the calls are in flight, so one gap may look a step or two short;
	// a burst (gaps near 0) or a faster pace (the span) may not.
	for i := 1; i < len(after); i++ {
		if gap := after[i].Sub(after[i-1]); gap < 100*time.Millisecond {
			t.Errorf("released calls %v apart, a burst", gap)
		}
	}
	if len(after) > 1 {
		span, want := after[len(after)-1].Sub(after[0]), time.Duration(len(after)-1)*200*time.Millisecond
		if span < want-100*time.Millisecond {
			t.Errorf("%d released calls within %v, faster than 5/s (want at least %v)", len(after), span, want)
		}
	}
	if took > 200*time.Millisecond+n*200*time.Millisecond+2*time.Second {
		t.Errorf("completed %v after the recovery: too slow", took)
	}
	for _, h := range recv.hooks() {
		var ev Event
		if err := json.Unmarshal(h.body, &ev); err != nil || ev.Type != EventCompleted || !ev.Data.Result.Complete {
			t.Errorf("delivered %s complete=%v, %v", ev.Type, ev.Data.Result.Complete, err)
		}
	}
}
