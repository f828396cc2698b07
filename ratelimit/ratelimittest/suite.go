// Package ratelimittest is the behaviour suite of SPEC 4.2 (outbound budgets
// and pauses) that every ratelimit.Store must pass. It drives the store
// through a ratelimit.Limiter on a fake clock, so nothing sleeps.
package ratelimittest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/ratelimit"
)

// t0 is the fake clock's start; a zone of its own catches code that drops it.
var t0 = time.Date(2026, 3, 14, 9, 12, 0, 0, time.FixedZone("ART", -3*3600))

const source = "caba"

// harness is a Limiter on a fresh store with a clock that moves only when
// told; its time is read concurrently but written only between steps.
type harness struct {
	t   *testing.T
	now time.Time
	lim *ratelimit.Limiter
}

func newHarness(t *testing.T, newStore func(*testing.T) ratelimit.Store, s ratelimit.Settings) *harness {
	h := &harness{t: t, now: t0}
	h.lim = ratelimit.New(newStore(t), func() time.Time { return h.now })
	h.lim.OnStoreError = func(err error) { t.Errorf("store error: %v", err) }
	h.lim.Configure(source, s)
	return h
}

// step is one call of a scripted sequence: advance the clock, then decide.
type step struct {
	advance time.Duration
	wait    time.Duration // the Decision's Wait, or the refusal's RetryAfter
	refused bool
	paused  bool // Decision.Paused, or LimitedError.Paused
}

func (h *harness) run(budget time.Duration, steps []step) {
	h.t.Helper()
	for i, st := range steps {
		h.now = h.now.Add(st.advance)
		d, err := h.lim.Decide(context.Background(), source, budget)
		var le *ratelimit.LimitedError
		switch {
		case errors.As(err, &le):
			if !st.refused || le.RetryAfter != st.wait || le.Paused != st.paused || !errors.Is(err, ratelimit.ErrLimited) {
				h.t.Errorf("step %d: refused (retry after %v, paused %v), want %s", i, le.RetryAfter, le.Paused, st)
			}
		case err != nil:
			h.t.Errorf("step %d: unexpected error %v", i, err)
		case st.refused || d.Wait != st.wait || d.Paused != st.paused:
			h.t.Errorf("step %d: admitted (wait %v, paused %v), want %s", i, d.Wait, d.Paused, st)
		}
	}
}

func (st step) String() string {
	if st.refused {
		return fmt.Sprintf("refused (retry after %v, paused %v)", st.wait, st.paused)
	}
	return fmt.Sprintf("admitted (wait %v, paused %v)", st.wait, st.paused)
}

func ok(wait time.Duration) step       { return step{wait: wait} }
func refused(after time.Duration) step { return step{wait: after, refused: true} }

// Run runs the suite; newStore returns an empty store for each test.
func Run(t *testing.T, newStore func(t *testing.T) ratelimit.Store) {
	t.Run("Budget", func(t *testing.T) { testBudget(t, newStore) })
	t.Run("Pause", func(t *testing.T) { testPause(t, newStore) })
	t.Run("PausedCall", func(t *testing.T) { testPausedCall(t, newStore) })
	t.Run("ConcurrentSpendsExactlyBurst", func(t *testing.T) { testConcurrent(t, newStore) })
	t.Run("Store", func(t *testing.T) { testStore(t, newStore) })
	t.Run("PauseReason", func(t *testing.T) { testPauseReason(t, newStore) })
}

// testPauseReason: operators see until when a source is paused and why,
// the why of the pause in force (the one that ends last); a shorter pause
// asked meanwhile changes neither.
func testPauseReason(t *testing.T, newStore func(*testing.T) ratelimit.Store) {
	h := newHarness(t, newStore, ratelimit.Settings{MaxPause: time.Minute})
	ctx := context.Background()
	if _, ok := newStore(t).(ratelimit.ReasonStore); !ok {
		t.Skip("the store keeps no reasons")
	}
	if ps := h.lim.PauseStatus(ctx, source); !ps.Until.IsZero() || ps.Reason != "" {
		t.Errorf("before any pause: %+v, want none", ps)
	}
	h.lim.PauseBecause(ctx, source, 30*time.Second, "429 for 30s")
	h.lim.PauseBecause(ctx, source, 5*time.Second, "503 for 5s")
	want := ratelimit.PauseStatus{Until: t0.Add(30 * time.Second), Reason: "429 for 30s"}
	if ps := h.lim.PauseStatus(ctx, source); !ps.Until.Equal(want.Until) || ps.Reason != want.Reason {
		t.Errorf("PauseStatus = %+v, want %+v", ps, want)
	}
	h.now = h.now.Add(10 * time.Second)
	h.lim.PauseBecause(ctx, source, time.Hour, "429 for an hour") // clamped to max_pause
	want = ratelimit.PauseStatus{Until: t0.Add(70 * time.Second), Reason: "429 for an hour"}
	if ps := h.lim.PauseStatus(ctx, source); !ps.Until.Equal(want.Until) || ps.Reason != want.Reason {
		t.Errorf("after a longer pause, PauseStatus = %+v, want %+v", ps, want)
	}
	h.now = t0.Add(71 * time.Second)
	if ps := h.lim.PauseStatus(ctx, source); !ps.Until.IsZero() || ps.Reason != "" {
		t.Errorf("after the pause: %+v, want none", ps)
	}
}

func testBudget(t *testing.T, newStore func(*testing.T) ratelimit.Store) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		s      ratelimit.Settings
		budget time.Duration
		steps  []step
	}{
		{
			name: "burst, then waits up to max_wait, then refusals that spend nothing",
			s:    ratelimit.Settings{RPS: 4, Burst: 2, MaxWait: time.Second}, budget: 10 * time.Second,
			steps: []step{ok(0), ok(0), ok(250 * ms), ok(500 * ms), ok(750 * ms), ok(time.Second),
				refused(1250 * ms), refused(1250 * ms)},
		},
		{
			name: "the query's budget caps the wait",
			s:    ratelimit.Settings{RPS: 4, Burst: 2, MaxWait: time.Second}, budget: 300 * ms,
			steps: []step{ok(0), ok(0), ok(250 * ms), refused(500 * ms), refused(500 * ms)},
		},
		{
			name: "no budget left means no waiting",
			s:    ratelimit.Settings{RPS: 4, Burst: 2, MaxWait: time.Second}, budget: -time.Second,
			steps: []step{ok(0), ok(0), refused(250 * ms)},
		},
		{
			name: "max_wait 0 never waits",
			s:    ratelimit.Settings{RPS: 4, Burst: 1}, budget: 10 * time.Second,
			steps: []step{ok(0), refused(250 * ms), refused(250 * ms)},
		},
		{
			name: "burst 0 is ceil(rps)",
			s:    ratelimit.Settings{RPS: 2.5}, budget: 10 * time.Second,
			steps: []step{ok(0), ok(0), ok(0), refused(400 * ms)},
		},
		{
			name: "tokens come back with time",
			s:    ratelimit.Settings{RPS: 4, Burst: 1}, budget: 10 * time.Second,
			steps: []step{ok(0), refused(250 * ms), {advance: 100 * ms, wait: 150 * ms, refused: true},
				{advance: 150 * ms}, refused(250 * ms), {advance: time.Hour}, refused(250 * ms)},
		},
		{
			name: "rps 0 is no budget",
			s:    ratelimit.Settings{MaxWait: time.Second}, budget: 10 * time.Second,
			steps: []step{ok(0), ok(0), ok(0), ok(0)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			newHarness(t, newStore, tt.s).run(tt.budget, tt.steps)
		})
	}
}

func testPause(t *testing.T, newStore func(*testing.T) ratelimit.Store) {
	type op struct {
		advance time.Duration
		pause   time.Duration // asked of Pause; 0 to only read PausedFor
		want    time.Duration // Pause's result
		left    time.Duration // PausedFor afterwards
	}
	tests := []struct {
		name string
		s    ratelimit.Settings
		ops  []op
	}{
		{
			name: "extends, never shortens",
			s:    ratelimit.Settings{MaxPause: time.Minute},
			ops: []op{{pause: 10 * time.Second, want: 10 * time.Second, left: 10 * time.Second},
				{pause: 5 * time.Second, want: 10 * time.Second, left: 10 * time.Second},
				{advance: 2 * time.Second, left: 8 * time.Second},
				{pause: 20 * time.Second, want: 20 * time.Second, left: 20 * time.Second},
				{advance: 20 * time.Second, left: 0}},
		},
		{
			name: "clamped to max_pause",
			s:    ratelimit.Settings{MaxPause: time.Minute},
			ops:  []op{{pause: time.Hour, want: time.Minute, left: time.Minute}},
		},
		{
			name: "max_pause 0 is 10m",
			s:    ratelimit.Settings{},
			ops:  []op{{pause: time.Hour, want: 10 * time.Minute, left: 10 * time.Minute}},
		},
		{
			name: "zero and negative are ignored",
			s:    ratelimit.Settings{MaxPause: time.Minute},
			ops:  []op{{pause: -time.Second}, {pause: 0}, {pause: -time.Hour}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newStore, tt.s)
			for i, o := range tt.ops {
				h.now = h.now.Add(o.advance)
				if o.pause != 0 {
					if got := h.lim.Pause(context.Background(), source, o.pause); got != o.want {
						t.Errorf("op %d: Pause(%v) = %v, want %v", i, o.pause, got, o.want)
					}
				}
				if got := h.lim.PausedFor(context.Background(), source); got != o.left {
					t.Errorf("op %d: PausedFor = %v, want %v", i, got, o.left)
				}
			}
		})
	}
}

func testPausedCall(t *testing.T, newStore func(*testing.T) ratelimit.Store) {
	ms := time.Millisecond
	tests := []struct {
		name   string
		s      ratelimit.Settings
		pause  time.Duration
		budget time.Duration
		steps  []step
	}{
		{
			name: "a pause that fits max_wait and the budget is waited",
			s:    ratelimit.Settings{MaxWait: 500 * ms}, pause: 300 * ms, budget: time.Second,
			steps: []step{{wait: 300 * ms, paused: true}, {advance: 100 * ms, wait: 200 * ms, paused: true},
				{advance: 200 * ms}},
		},
		{
			name: "a pause exactly max_wait and the budget is waited",
			s:    ratelimit.Settings{MaxWait: 300 * ms}, pause: 300 * ms, budget: 300 * ms,
			steps: []step{{wait: 300 * ms, paused: true}},
		},
		{
			name: "a pause longer than the budget refuses with the pause left",
			s:    ratelimit.Settings{MaxWait: 500 * ms}, pause: 300 * ms, budget: 200 * ms,
			steps: []step{{wait: 300 * ms, refused: true, paused: true}, {advance: 150 * ms, wait: 150 * ms, paused: true}},
		},
		{
			name: "a pause longer than max_wait refuses with the pause left",
			s:    ratelimit.Settings{MaxWait: 100 * ms}, pause: 30 * time.Second, budget: time.Minute,
			steps: []step{{wait: 30 * time.Second, refused: true, paused: true},
				{advance: 29 * time.Second, wait: time.Second, refused: true, paused: true}},
		},
		{
			name: "tokens are taken for the end of the pause, so waiters leave spaced",
			s:    ratelimit.Settings{RPS: 4, Burst: 1, MaxWait: 500 * ms}, pause: 200 * ms, budget: time.Second,
			steps: []step{{wait: 200 * ms, paused: true}, {wait: 450 * ms, paused: true},
				{wait: 700 * ms, refused: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, newStore, tt.s)
			h.lim.Pause(context.Background(), source, tt.pause)
			h.run(tt.budget, tt.steps)
		})
	}
}

func testConcurrent(t *testing.T, newStore func(*testing.T) ratelimit.Store) {
	const burst, callers = 10, 200
	h := newHarness(t, newStore, ratelimit.Settings{RPS: 1, Burst: burst})
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int
	)
	for range callers {
		wg.Go(func() {
			err := h.lim.Admit(context.Background(), source, time.Second)
			if err != nil && !errors.Is(err, ratelimit.ErrLimited) {
				t.Errorf("Admit: unexpected error %v", err)
			}
			if err == nil {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if admitted != burst {
		t.Errorf("%d concurrent calls admitted %d, want the burst of %d", callers, admitted, burst)
	}
}

// testStore checks what the Limiter cannot show: keys are independent, and
// a token taken for a later time holds back a call at an earlier one.
func testStore(t *testing.T, newStore func(*testing.T) ratelimit.Store) {
	ctx := context.Background()
	s := ratelimit.Settings{RPS: 1, Burst: 1}
	st := newStore(t)
	check := func(what string, key string, maxWait time.Duration, at time.Time, wantWait time.Duration, wantOK bool) {
		t.Helper()
		wait, ok, err := st.Reserve(ctx, key, s, maxWait, at)
		if err != nil || wait != wantWait || ok != wantOK {
			t.Errorf("%s: Reserve = %v, %v, %v; want %v, %v, nil", what, wait, ok, err, wantWait, wantOK)
		}
	}
	check("first token, for a second from now", "a", 0, t0.Add(time.Second), 0, true)
	check("a call now, behind it", "a", 5*time.Second, t0, 2*time.Second, true)
	check("another key", "b", 0, t0, 0, true)
	check("refused", "b", 0, t0, time.Second, false)

	if err := st.SetPause(ctx, "a", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := st.SetPause(ctx, "a", t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		key  string
		now  time.Time
		want time.Time
	}{
		{"a", t0, t0.Add(time.Minute)},
		{"a", t0.Add(time.Minute), time.Time{}},
		{"b", t0, time.Time{}},
		{"never seen", t0, time.Time{}},
	} {
		got, err := st.PausedUntil(ctx, c.key, c.now)
		if err != nil || !got.Equal(c.want) {
			t.Errorf("PausedUntil(%q, %v) = %v, %v; want %v", c.key, c.now, got, err, c.want)
		}
	}
}
