package fanout

import (
	"sync"
	"sync/atomic"
	"time"
)

// workerIdle is how long a worker waits for its next part before it
// ends: long enough to outlast the gaps of a steady load, short enough
// that a burst's goroutines do not stay.
const workerIdle = 10 * time.Second

// workers run the parts of queries on goroutines that outlive them. A
// part goes deep (breaker, limiter, transport, mapping), and a goroutine
// of its own would start on a small stack and grow it, copied each time,
// before its first portal call: under load that copying took 12% of the
// replica's CPU. A worker keeps the stack it grew for the next part. A
// part is handed to a worker waiting for one, or to a new worker when
// none is (so a query never waits for another's parts).
type workers struct {
	jobs    chan func() // unbuffered: a send succeeds only into a waiting worker
	quit    chan struct{}
	once    sync.Once
	started atomic.Int64 // workers started, ever
}

func newWorkers() *workers {
	return &workers{jobs: make(chan func()), quit: make(chan struct{})}
}

// run runs f on a worker.
func (w *workers) run(f func()) {
	select {
	case w.jobs <- f:
	default:
		w.started.Add(1)
		go w.work(f)
	}
}

// work runs f, then the parts handed to it, until it has waited
// workerIdle for one or the workers are closed.
func (w *workers) work(f func()) {
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		f()
		f = nil // what it holds is garbage while the worker waits
		idle.Reset(workerIdle)
		select {
		case f = <-w.jobs:
		case <-idle.C:
			return
		case <-w.quit:
			return
		}
	}
}

// close ends the workers waiting for a part at once, and the others when
// their part is done. Parts handed to run afterwards still run, each on a
// goroutine that ends with it.
func (w *workers) close() {
	w.once.Do(func() { close(w.quit) })
}
