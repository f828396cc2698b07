package ratelimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/ratelimit"
	"github.com/multas/aggregator/ratelimit/ratelimittest"
)

var t0 = time.Date(2026, 3, 14, 9, 12, 0, 0, time.UTC)

func fixed(t time.Time) func() time.Time { return func() time.Time { return t } }

func TestMemoryStore(t *testing.T) {
	t.Parallel()
	ratelimittest.Run(t, func(*testing.T) ratelimit.Store { return ratelimit.NewMemoryStore() })
}

func TestUnconfiguredSourceIsUnlimited(t *testing.T) {
	t.Parallel()
	l := ratelimit.New(ratelimit.NewMemoryStore(), fixed(t0))
	l.Configure("caba", ratelimit.Settings{RPS: 1, Burst: 1})
	for range 100 {
		if err := l.Admit(t.Context(), "cordoba", 0); err != nil {
			t.Fatalf("Admit(unconfigured) = %v, want nil", err)
		}
	}
	if got := l.Pause(t.Context(), "cordoba", time.Minute); got != 0 {
		t.Errorf("Pause(unconfigured) = %v, want 0 (ignored)", got)
	}
	if got := l.PausedFor(t.Context(), "cordoba"); got != 0 {
		t.Errorf("PausedFor(unconfigured) = %v, want 0", got)
	}
}

// Admit sleeps on a real timer whatever the clock; the fake clock fixes
// what it decides.
func TestAdmitWaits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		s     ratelimit.Settings
		pause time.Duration
		want  time.Duration
	}{
		{"for a token", ratelimit.Settings{RPS: 20, Burst: 1, MaxWait: time.Second}, 0, 50 * time.Millisecond},
		{"for the end of a pause", ratelimit.Settings{MaxWait: time.Second}, 40 * time.Millisecond, 40 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := ratelimit.New(ratelimit.NewMemoryStore(), fixed(t0))
			l.Configure("caba", tt.s)
			l.Pause(t.Context(), "caba", tt.pause)
			if tt.s.RPS > 0 {
				if err := l.Admit(t.Context(), "caba", time.Second); err != nil {
					t.Fatalf("first Admit = %v", err)
				}
			}
			start := time.Now()
			if err := l.Admit(t.Context(), "caba", time.Second); err != nil {
				t.Fatalf("Admit = %v, want nil after a wait", err)
			}
			if got := time.Since(start); got < tt.want {
				t.Errorf("Admit returned after %v, want at least %v", got, tt.want)
			}
		})
	}
}

func TestAdmitCanceledDuringWait(t *testing.T) {
	t.Parallel()
	l := ratelimit.New(ratelimit.NewMemoryStore(), fixed(t0))
	l.Configure("caba", ratelimit.Settings{RPS: 1, Burst: 1, MaxWait: time.Minute})
	if err := l.Admit(t.Context(), "caba", time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := l.Admit(ctx, "caba", time.Minute)
	if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ratelimit.ErrLimited) {
		t.Errorf("Admit cut by its context = %v, want context.DeadlineExceeded", err)
	}
	if got := time.Since(start); got > 5*time.Second {
		t.Errorf("Admit returned after %v, want soon after the context ended", got)
	}
	// The token reserved for the abandoned call stays spent.
	d, err := l.Decide(t.Context(), "caba", time.Minute)
	if err != nil || d.Wait != 2*time.Second {
		t.Errorf("next Decide = %+v, %v; want a wait of 2s", d, err)
	}
	// A context that has already ended reserves nothing.
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Admit(ended, "caba", time.Minute); !errors.Is(err, context.Canceled) {
		t.Errorf("Admit with an ended context = %v, want context.Canceled", err)
	}
	if d, _ := l.Decide(t.Context(), "caba", time.Minute); d.Wait != 3*time.Second {
		t.Errorf("after the ended context, Decide waits %v, want 3s", d.Wait)
	}
}

func TestRefusedAdmitNeverBlocks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		s      ratelimit.Settings
		pause  time.Duration
		paused bool
		after  time.Duration
	}{
		{"paused", ratelimit.Settings{MaxWait: time.Second}, time.Hour, true, 10 * time.Minute},
		{"over budget", ratelimit.Settings{RPS: 0.001, Burst: 1, MaxWait: time.Second}, 0, false, 1000 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := ratelimit.New(ratelimit.NewMemoryStore(), fixed(t0))
			l.Configure("caba", tt.s)
			l.Pause(t.Context(), "caba", tt.pause)
			_ = l.Admit(t.Context(), "caba", time.Hour) // spends the burst when there is one
			start := time.Now()
			err := l.Admit(t.Context(), "caba", time.Hour)
			if elapsed := time.Since(start); elapsed > 100*time.Millisecond {
				t.Errorf("refused Admit took %v", elapsed)
			}
			var le *ratelimit.LimitedError
			if !errors.As(err, &le) || !errors.Is(err, ratelimit.ErrLimited) {
				t.Fatalf("Admit = %v, want *LimitedError", err)
			}
			if le.Source != "caba" || le.Paused != tt.paused || le.RetryAfter != tt.after {
				t.Errorf("LimitedError = %+v, want source caba, paused %v, retry after %v", *le, tt.paused, tt.after)
			}
		})
	}
}

// failingStore fails every call, as a shared store that cannot be reached.
type failingStore struct{}

var errDown = errors.New("store down")

func (failingStore) Reserve(context.Context, string, ratelimit.Settings, time.Duration, time.Time) (time.Duration, bool, error) {
	return 0, false, errDown
}
func (failingStore) SetPause(context.Context, string, time.Time) error { return errDown }
func (failingStore) PausedUntil(context.Context, string, time.Time) (time.Time, error) {
	return time.Time{}, errDown
}

// pauseOnlyStore fails only the budget, after a pause that reads fine.
type pauseOnlyStore struct{ *ratelimit.MemoryStore }

func (pauseOnlyStore) Reserve(context.Context, string, ratelimit.Settings, time.Duration, time.Time) (time.Duration, bool, error) {
	return 0, false, errDown
}

func TestStoreErrorsAllowTheCall(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		errs   []error
		report = func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
	)
	l := ratelimit.New(failingStore{}, fixed(t0))
	l.OnStoreError = report
	l.Configure("caba", ratelimit.Settings{RPS: 1, Burst: 1})
	for range 3 {
		if err := l.Admit(t.Context(), "caba", time.Second); err != nil {
			t.Errorf("Admit with a failing store = %v, want nil", err)
		}
	}
	if got := l.Pause(t.Context(), "caba", time.Hour); got != 10*time.Minute {
		t.Errorf("Pause with a failing store = %v, want the clamped 10m", got)
	}
	if got := l.PausedFor(t.Context(), "caba"); got != 0 {
		t.Errorf("PausedFor with a failing store = %v, want 0", got)
	}
	ended, cancel := context.WithCancel(t.Context())
	cancel()
	if err := l.Admit(ended, "caba", time.Second); !errors.Is(err, context.Canceled) {
		t.Errorf("Admit with an ended context = %v, want context.Canceled", err)
	}

	p := ratelimit.New(pauseOnlyStore{ratelimit.NewMemoryStore()}, fixed(t0))
	p.OnStoreError = report
	p.Configure("caba", ratelimit.Settings{RPS: 1, Burst: 1, MaxWait: time.Second})
	p.Pause(t.Context(), "caba", 300*time.Millisecond)
	if d, err := p.Decide(t.Context(), "caba", time.Second); err != nil || d != (ratelimit.Decision{Wait: 300 * time.Millisecond, Paused: true}) {
		t.Errorf("Decide with a failing budget = %+v, %v; want the pause's wait and nil", d, err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(errs) != 6 { // 3 Admit, Pause, PausedFor, Decide; none for the ended context
		t.Errorf("OnStoreError called %d times, want 6: %v", len(errs), errs)
	}
	for _, err := range errs {
		if !errors.Is(err, errDown) {
			t.Errorf("OnStoreError got %v, want it to wrap the store's error", err)
		}
	}
	// Without a hook, errors are dropped, never a panic.
	q := ratelimit.New(failingStore{}, nil)
	q.Configure("caba", ratelimit.Settings{})
	if err := q.Admit(t.Context(), "caba", 0); err != nil {
		t.Errorf("Admit without a hook = %v", err)
	}
}

func TestLimitedError(t *testing.T) {
	t.Parallel()
	var err error = &ratelimit.LimitedError{Source: "caba", RetryAfter: 3 * time.Second, Paused: true}
	wrapped := errors.Join(errors.New("calling caba"), err)
	if !errors.Is(wrapped, ratelimit.ErrLimited) {
		t.Errorf("errors.Is(%v, ErrLimited) = false", wrapped)
	}
	if errors.Is(errors.New("other"), ratelimit.ErrLimited) {
		t.Errorf("an unrelated error is ErrLimited")
	}
	for _, e := range []*ratelimit.LimitedError{{Source: "caba", RetryAfter: time.Second, Paused: true}, {Source: "caba", RetryAfter: time.Second}} {
		if e.Error() == "" {
			t.Errorf("empty message for %+v", *e)
		}
	}
}

func BenchmarkAdmit(b *testing.B) {
	ctx := context.Background()
	newLimiter := func(s *ratelimit.Settings) *ratelimit.Limiter {
		l := ratelimit.New(ratelimit.NewMemoryStore(), time.Now)
		if s != nil {
			l.Configure("caba", *s)
		}
		return l
	}
	// A budget far above what the benchmark can spend.
	wide := &ratelimit.Settings{RPS: 1e12, Burst: 1e9, MaxWait: time.Second}
	for _, bc := range []struct {
		name     string
		s        *ratelimit.Settings
		parallel bool
	}{
		{"NoLimit", nil, false},
		{"NoLimitParallel", nil, true},
		{"UnderLimit", wide, false},
		{"UnderLimitParallel", wide, true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			l := newLimiter(bc.s)
			b.ReportAllocs()
			if !bc.parallel {
				for b.Loop() {
					if err := l.Admit(ctx, "caba", time.Second); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := l.Admit(ctx, "caba", time.Second); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// One MemoryStore shared by every replica is the exact reference of the
// fleet suite.
func TestMemoryStoreFleet(t *testing.T) {
	t.Parallel()
	ratelimittest.RunFleet(t, 0, func(_ *testing.T, n int) []ratelimit.Store {
		m := ratelimit.NewMemoryStore()
		out := make([]ratelimit.Store, n)
		for i := range out {
			out[i] = m
		}
		return out
	})
}
