// Package loop is the background scheduler the asynchronous queries and
// the watches share: a goroutine that asks its scan what to do and how
// long to sleep, then sleeps until then, until poked, or until stopped;
// the workers it starts are waited for when it stops. Time comes from a
// Clock, so that tests move it.
package loop

import (
	"context"
	"sync"
	"time"
)

// Clock is the time a loop schedules its work by. Tests use a fake one so
// that backoffs of minutes take no time.
type Clock interface {
	Now() time.Time
	// NewTimer fires once, d from now (at once when d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a Clock's one-shot timer.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// Wall is the wall clock.
func Wall() Clock { return wall{} }

type wall struct{}

func (wall) Now() time.Time                 { return time.Now() }
func (wall) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time { return w.t.C }
func (w wallTimer) Stop() bool          { return w.t.Stop() }

// Loop runs a scan until stopped. The zero Loop is not usable: use New.
type Loop struct {
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{}
	wg     sync.WaitGroup
	start  sync.Once
	stop   sync.Once
}

// New returns a loop that does nothing until Start.
func New() *Loop {
	l := &Loop{wake: make(chan struct{}, 1)}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// Context ends when the loop stops: the work the loop starts runs under
// it.
func (l *Loop) Context() context.Context { return l.ctx }

// Start runs scan on its own goroutine (once, whatever the calls): after
// each scan the loop sleeps the duration it returned, or until Poke.
func (l *Loop) Start(clock Clock, scan func() time.Duration) {
	l.start.Do(func() {
		l.Go(func() {
			for {
				t := clock.NewTimer(scan())
				select {
				case <-l.ctx.Done():
					t.Stop()
					return
				case <-l.wake:
				case <-t.C():
				}
				t.Stop()
			}
		})
	})
}

// Go runs f on a goroutine that Stop waits for.
func (l *Loop) Go(f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// Poke wakes the scan now (once, however many pokes come meanwhile).
func (l *Loop) Poke() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Stop ends the loop's context and waits for its scan and every goroutine
// of Go.
func (l *Loop) Stop() {
	l.stop.Do(func() {
		l.cancel()
		l.wg.Wait()
	})
}

// Throttle lets a repeated message through at most once in every period
// (on the wall clock): an unreachable store fails every scan, and one line
// says it. It is safe for concurrent use.
type Throttle struct {
	every time.Duration

	mu   sync.Mutex
	last time.Time
}

// NewThrottle returns a Throttle of period every.
func NewThrottle(every time.Duration) *Throttle { return &Throttle{every: every} }

// Allow reports whether the message may be said now, and if so counts it
// as said.
func (t *Throttle) Allow() bool {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.last.IsZero() && now.Sub(t.last) < t.every {
		return false
	}
	t.last = now
	return true
}
