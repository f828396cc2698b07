package fanout

import (
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestWorkersKeepTheirGoroutines: a part handed in while a worker waits
// runs on it, parts at once each get a worker of their own, and close
// ends the waiting workers while parts still run afterwards.
func TestWorkersKeepTheirGoroutines(t *testing.T) {
	before := goleak.IgnoreCurrent()
	w := newWorkers()

	// One part after the other: one worker runs them all (it waits for
	// the next part once it has run one, which the loop waits for).
	for range 20 {
		done := make(chan struct{})
		w.run(func() { close(done) })
		<-done
		waitWaiting(t, w)
	}
	if n := w.started.Load(); n != 1 {
		t.Errorf("20 parts one after the other started %d workers, want 1", n)
	}

	// Parts at once: none waits for another.
	const at = 8
	var all sync.WaitGroup
	release := make(chan struct{})
	all.Add(at)
	for range at {
		w.run(func() {
			all.Done()
			<-release
		})
	}
	all.Wait() // every part runs, though none has ended
	close(release)
	if n := w.started.Load(); n != at {
		t.Errorf("%d parts at once ran on %d workers started in all, want %d", at, n, at)
	}

	w.close()
	ran := make(chan struct{})
	w.run(func() { close(ran) })
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("a part handed in after close never ran")
	}
	goleak.VerifyNone(t, before) // retries while the workers end
}

// waitWaiting waits until a worker of w is parked in its select, where
// a part handed in goes to it: its goroutine's state says so.
func waitWaiting(t *testing.T, w *workers) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		for _, g := range strings.Split(string(buf[:n]), "\n\n") {
			if strings.Contains(g, " [select") && strings.Contains(g, "fanout.(*workers).work(") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no worker waits for a part")
		}
		time.Sleep(time.Millisecond)
	}
}
