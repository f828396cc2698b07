package async

import "github.com/multas/aggregator/internal/loop"

// Clock is the time the manager schedules its work by. Tests use a fake
// one so that backoffs of minutes take no time.
type Clock = loop.Clock

// Timer is a Clock's one-shot timer.
type Timer = loop.Timer

// WallClock is the wall clock, for other background work scheduled like
// the manager's (watches).
func WallClock() Clock { return loop.Wall() }
