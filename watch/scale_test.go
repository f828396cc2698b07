package watch

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/async"
)

// TestScale is the benchmark of docs/benchmarks.md (scripts/watch-bench.sh
// runs it): AGGREGATOR_WATCH_SCALE watches (100,000 there) on one Redis,
// checked by one replica at an interval that makes AGGREGATOR_WATCH_RATE
// checks due a second (500), for the first interval (every check a
// baseline, delivered) and AGGREGATOR_WATCH_STEADY after it (60s: checks
// that find nothing new). The fake portal and receiver run in a process of
// their own (TestScaleFakes), so that the CPU measured is the replica's
// alone: the scheduler, the checks' store round trips, the fan-out and
// the deliveries. It reports the replica's memory, Redis's (INFO memory),
// the replica's CPU and how late due checks started. Nothing is asserted:
// it is skipped unless AGGREGATOR_WATCH_SCALE is set.
func TestScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("AGGREGATOR_WATCH_SCALE"))
	if n <= 0 {
		t.Skip("set AGGREGATOR_WATCH_SCALE (scripts/watch-bench.sh)")
	}
	steady := 60 * time.Second
	if d, err := time.ParseDuration(os.Getenv("AGGREGATOR_WATCH_STEADY")); err == nil {
		steady = d
	}
	rate := 500.0
	if r, err := strconv.ParseFloat(os.Getenv("AGGREGATOR_WATCH_RATE"), 64); err == nil && r > 0 {
		rate = r
	}
	interval := time.Duration(float64(n) / rate * float64(time.Second))
	ctx := context.Background()
	c, prefix := testRedis(t)
	redisMem := func() int64 {
		for _, line := range strings.Split(c.Info(ctx, "memory").Val(), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
				m, _ := strconv.ParseInt(v, 10, 64)
				return m
			}
		}
		return 0
	}
	heap := func() float64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return float64(ms.HeapInuse) / (1 << 20)
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}

	// The fakes, in a process of their own.
	fakes := exec.Command(os.Args[0], "-test.run=^TestScaleFakes$")
	fakes.Env = append(os.Environ(), "AGGREGATOR_WATCH_FAKES=1")
	stdin, _ := fakes.StdinPipe()
	stdout, _ := fakes.StdoutPipe()
	fakes.Stderr = os.Stderr
	if err := fakes.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = fakes.Wait() })
	var urls struct{ Portal, Receiver string }
	if err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&urls); err != nil {
		t.Fatalf("the fakes: %v", err)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	f := &fleet{t: t, clock: newFakeClock(), keys: testKeys(t),
		portals: []*portal{{id: "caba", srv: &httptest.Server{URL: urls.Portal}}},
		recv:    &receiver{srv: &httptest.Server{URL: urls.Receiver}}}
	store := NewRedisStore(c, prefix+"watches:")

	// The watches, made by a manager that checks nothing.
	heap0, mem0 := heap(), redisMem()
	maker := f.replica(replicaOpts{watches: store, clock: async.WallClock(), now: time.Now, maxPerKey: n, jitter: uniform, quiet: true})
	_ = maker.m.Close()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < n; i += 8 {
				q := aggregator.Query{Domain: fmt.Sprintf("AB%03dCD", i%1000)}
				if _, err := maker.m.Create(ctx, Request{Owner: fmt.Sprintf("key-%d", i%10), Query: q,
					CallbackURL: f.recv.srv.URL, Interval: interval}); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	made := time.Since(start)
	mem1 := redisMem()
	t.Logf("created %d watches in %v (%.0f/s, 8 at a time); Redis used_memory +%.1f MiB (%d B a watch)", n, made.Round(time.Millisecond),
		float64(n)/made.Seconds(), float64(mem1-mem0)/(1<<20), (mem1-mem0)/int64(n))

	// One replica checks them: the rest of the first interval (baselines),
	// then steady.
	r := f.replica(replicaOpts{watches: store, deliveries: async.NewRedisStore(c, prefix+"async:"),
		clock: async.WallClock(), now: time.Now, workers: 16, maxPerKey: n, quiet: true})
	phase := func(name string, d time.Duration) {
		t.Helper()
		r.counts.mu.Lock()
		from, checks0 := len(r.counts.lags), r.counts.checksLocked()
		r.counts.mu.Unlock()
		cpu0, wall0 := cpu(), time.Now()
		time.Sleep(d)
		used, wall := cpu()-cpu0, time.Since(wall0)
		r.counts.mu.Lock()
		lags := slices.Clone(r.counts.lags[from:])
		checks := r.counts.checksLocked() - checks0
		outcomes := fmt.Sprint(r.counts.outcomes)
		r.counts.mu.Unlock()
		slices.Sort(lags)
		q := func(p float64) time.Duration {
			if len(lags) == 0 {
				return 0
			}
			return lags[min(int(p*float64(len(lags))), len(lags)-1)].Round(time.Millisecond)
		}
		t.Logf("%s, %v: %d checks (%.0f/s; all so far %s); replica CPU %.2f cores, %.0f µs a check; lag p50 %v, p95 %v, p99 %v, max %v; heap %.1f MiB; Redis +%.1f MiB",
			name, wall.Round(time.Second), checks, float64(checks)/wall.Seconds(), outcomes, used.Seconds()/wall.Seconds(),
			float64(used.Microseconds())/float64(max(checks, 1)), q(.5), q(.95), q(.99), q(1), heap(), float64(redisMem()-mem0)/(1<<20))
	}
	phase("first interval (baselines)", time.Until(start.Add(interval)))
	phase("steady (nothing new)", steady)
	t.Logf("replica heap before the watches: %.1f MiB; interval %v", heap0, interval.Round(time.Second))
}

// TestScaleFakes serves TestScale's fake portal (one infraction for each
// of 1,000 plates) and receiver, prints their URLs as JSON, and runs until
// its standard input closes.
func TestScaleFakes(t *testing.T) {
	if os.Getenv("AGGREGATOR_WATCH_FAKES") != "1" {
		t.Skip("TestScale's fakes")
	}
	p := newPortal(t, "caba", nil)
	for i := range 1000 {
		p.set(fmt.Sprintf("AB%03dCD", i), acta{Nro: "Q-" + strconv.Itoa(i), Fecha: "2026-03-01T10:00:00", Monto: "1000.00", Estado: "IMPAGA"})
	}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer recv.Close()
	_ = json.NewEncoder(os.Stdout).Encode(map[string]string{"portal": p.srv.URL, "receiver": recv.URL})
	_, _ = io.Copy(io.Discard, os.Stdin)
}
