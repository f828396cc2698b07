package chaos

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// stallMeter measures how long the process could not run: a goroutine
// asks to wake every few milliseconds and notes how late it woke, and how
// long it then waits for its turn after yielding. On a
// machine with more runnable work than CPUs (the race detector, other
// test binaries, fuzzers), answers are late for reasons no budget can
// help; the latency invariant deducts the stalls that overlapped each
// request, and the report shows them.
type stallMeter struct {
	mu     sync.Mutex
	stalls []stall // the recent ones, oldest first
	total  time.Duration
	worst  time.Duration
}

// stall is an interval during which the meter's goroutine was not run.
type stall struct{ from, to time.Time }

const (
	stallTick   = 5 * time.Millisecond
	stallMin    = 2 * time.Millisecond // later than this is a stall
	stallMemory = time.Minute
)

func (m *stallMeter) run(ctx context.Context) {
	t := time.NewTimer(stallTick)
	defer t.Stop()
	for {
		want := time.Now().Add(stallTick)
		t.Reset(stallTick)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if late := now.Sub(want); late > stallMin {
			m.add(stall{from: want, to: now}) // the process was not run
		}
		// A woken timer's goroutine runs next: the wait in the run queue
		// shows when the process runs, but has more goroutines ready than
		// it has CPUs.
		now = time.Now()
		runtime.Gosched()
		if after := time.Now(); after.Sub(now) > stallMin {
			m.add(stall{from: now, to: after})
		}
	}
}

func (m *stallMeter) add(s stall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := s.to.Sub(s.from)
	m.total += d
	m.worst = max(m.worst, d)
	m.stalls = append(m.stalls, s)
	drop := 0
	for drop < len(m.stalls) && s.to.Sub(m.stalls[drop].to) > stallMemory {
		drop++
	}
	m.stalls = m.stalls[drop:]
}

// during is how much of [from, to] the process spent stalled.
func (m *stallMeter) during(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	var d time.Duration
	for i := len(m.stalls) - 1; i >= 0; i-- {
		s := m.stalls[i]
		if !s.to.After(from) {
			break
		}
		lo, hi := s.from, s.to
		if lo.Before(from) {
			lo = from
		}
		if hi.After(to) {
			hi = to
		}
		if hi.After(lo) {
			d += hi.Sub(lo)
		}
	}
	return d
}

// summary is the total time stalled and the longest stall.
func (m *stallMeter) summary() (total, worst time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.total, m.worst
}
