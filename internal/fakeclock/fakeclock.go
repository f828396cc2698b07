// Package fakeclock is a loop.Clock (and so an async.Clock) that moves only
// when a test says so, for tests of scheduled work: backoffs of minutes and
// intervals of hours take no time.
package fakeclock

import (
	"sync"
	"time"

	"github.com/multas/aggregator/internal/loop"
)

// Clock is a fake clock. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*timer]bool
}

var _ loop.Clock = (*Clock)(nil)

// New returns a clock at t.
func New(t time.Time) *Clock { return &Clock{now: t, timers: make(map[*timer]bool)} }

// Now implements loop.Clock.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer implements loop.Clock.
func (c *Clock) NewTimer(d time.Duration) loop.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t
	}
	c.timers[t] = true
	return t
}

// Set moves the clock to at (never backwards) and fires the timers due.
func (c *Clock) Set(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if at.After(c.now) {
		c.now = at
	}
	for t := range c.timers {
		if !t.at.After(c.now) {
			delete(c.timers, t)
			t.ch <- c.now
		}
	}
}

// Pending counts the timers not fired yet: a scheduler waiting on the
// clock has one.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Advance moves the clock d ahead.
func (c *Clock) Advance(d time.Duration) { c.Set(c.Now().Add(d)) }

type timer struct {
	c  *Clock
	at time.Time
	ch chan time.Time
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	ok := t.c.timers[t]
	delete(t.c.timers, t)
	return ok
}
