package fakeclock_test

import (
	"testing"
	"time"

	"github.com/multas/aggregator/internal/fakeclock"
)

// Timers fire when the clock reaches them, never before; a timer of 0
// fires at once; Pending counts those that wait.
func TestClock(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1_700_000_000, 0)
	c := fakeclock.New(t0)
	now := c.NewTimer(0)
	later := c.NewTimer(time.Minute)
	stopped := c.NewTimer(time.Minute)
	if !stopped.Stop() || c.Pending() != 1 {
		t.Fatalf("after a Stop: %d pending, want 1", c.Pending())
	}
	select {
	case <-now.C():
	default:
		t.Error("a timer of 0 did not fire at once")
	}
	c.Advance(59 * time.Second)
	select {
	case <-later.C():
		t.Error("a timer fired early")
	default:
	}
	c.Set(t0) // never backwards
	c.Advance(time.Second)
	if at := <-later.C(); !at.Equal(t0.Add(time.Minute)) || c.Pending() != 0 {
		t.Errorf("fired at %v with %d pending", at, c.Pending())
	}
}
