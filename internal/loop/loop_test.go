package loop_test

import (
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/multas/aggregator/internal/fakeclock"
	"github.com/multas/aggregator/internal/loop"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A loop scans at once, then after the wait its scan asked for, or when
// poked; Stop ends it and waits for its goroutines.
func TestLoop(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_700_000_000, 0))
	l := loop.New()
	var scans atomic.Int32
	l.Start(clock, func() time.Duration { scans.Add(1); return time.Minute })
	l.Start(clock, func() time.Duration { t.Error("a second Start ran its scan"); return 0 })
	wait := func(n int32) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for scans.Load() < n {
			if time.Now().After(deadline) {
				t.Fatalf("%d scans, want %d", scans.Load(), n)
			}
			time.Sleep(time.Millisecond)
		}
	}
	wait(1)
	clock.Advance(time.Minute)
	wait(2)
	l.Poke()
	wait(3)
	done := make(chan struct{})
	l.Go(func() { <-l.Context().Done(); close(done) })
	l.Stop()
	select {
	case <-done:
	default:
		t.Error("Stop returned before a goroutine of Go ended")
	}
	l.Stop()
}

func TestThrottle(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		every time.Duration
		want  []bool
	}{
		{time.Hour, []bool{true, false, false}},
		{0, []bool{true, true, true}},
	} {
		th := loop.NewThrottle(tt.every)
		for i, want := range tt.want {
			if got := th.Allow(); got != want {
				t.Errorf("every %v, message %d: Allow = %v, want %v", tt.every, i+1, got, want)
			}
		}
	}
}
