package async

import "time"

// Clock is the time the manager schedules its work by. Tests use a fake
// one so that backoffs of minutes take no time.
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

// realClock is the wall clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time { return r.t.C }
func (r realTimer) Stop() bool          { return r.t.Stop() }

// WallClock is the wall clock, for other background work scheduled like
// the manager's (watches).
func WallClock() Clock { return realClock{} }
