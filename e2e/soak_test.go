package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
)

// The soak and the in-flight memory measurement read process-wide
// figures (goroutines, heap): they never run in parallel with other tests.
// docs/soak.md has their method and the numbers of a long run.

// usage is the process's live memory and goroutines after a full GC.
type usage struct {
	heap, stack uint64
	goroutines  int
}

func measure() usage {
	runtime.GC()
	runtime.GC() // the second cycle frees what the first one's finalizers released
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return usage{heap: ms.HeapAlloc, stack: ms.StackInuse, goroutines: runtime.NumGoroutine()}
}

func (u usage) String() string {
	return fmt.Sprintf("%d goroutines, heap %.2f MiB, stacks %.2f MiB", u.goroutines, mib(u.heap), mib(u.stack))
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// settle closes every idle connection of the test's client and of the
// replica's portal transport, then waits until the goroutines are back to
// at most want, or, with want < 0, until their number stops falling
// (connections still closing finish meanwhile).
func settle(t *testing.T, e *env, tr interface{ CloseIdleConnections() }, want int) usage {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	last := -1
	for {
		e.client.CloseIdleConnections()
		tr.CloseIdleConnections()
		u := measure()
		if want >= 0 && u.goroutines <= want || want < 0 && u.goroutines == last || time.Now().After(deadline) {
			return u
		}
		last = u.goroutines
		time.Sleep(200 * time.Millisecond)
	}
}

// heldPortal is a portal that reads each request and holds its connection
// unanswered until release: a slow portal costing the test one socket per
// call and no goroutine, so that the heap measured while calls are held is
// the aggregator's.
type heldPortal struct {
	ln      net.Listener
	arrived atomic.Int64
	done    chan struct{}

	mu    sync.Mutex
	conns []net.Conn
}

func newHeldPortal(t *testing.T) *heldPortal {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &heldPortal{ln: ln, done: make(chan struct{})}
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		<-p.done
		p.release(false)
	})
	return p
}

func (p *heldPortal) URL() string { return "http://" + p.ln.Addr().String() }

func (p *heldPortal) accept() {
	defer close(p.done)
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := http.ReadRequest(bufio.NewReaderSize(c, 512)); err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		p.mu.Unlock()
		p.arrived.Add(1)
	}
}

// heldAnswer is the portal's answer: one infraction, then the end.
var heldAnswer = func() string {
	body := `{"resultado": {"actas": [{"nro": "Q-1", "fecha": "2026-03-14 09:12", "monto": 1000, "estado": "IMPAGA"}]}}`
	return fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
}()

// release answers every held call (or only hangs up, when answer is
// false) and forgets them.
func (p *heldPortal) release(answer bool) {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		if answer {
			_, _ = io.WriteString(c, heldAnswer)
		}
		c.Close()
	}
}

// rawQuery sends GET /v1/infractions for domain on a connection of its
// own and returns it unread: a client that costs the test one socket.
func rawQuery(t *testing.T, addr, domain string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fmt.Fprintf(c, "GET /v1/infractions?domain=%s&timeout=10s HTTP/1.1\r\nHost: aggregator\r\nConnection: close\r\n\r\n", domain)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// readAnswer reads the answer of a rawQuery and checks that every source
// succeeded.
func readAnswer(t *testing.T, c net.Conn, sources int) {
	t.Helper()
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Errorf("reading an answer: %v", err)
		return
	}
	defer resp.Body.Close()
	var r result
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("answer: status %d, err %v", resp.StatusCode, err)
		return
	}
	if !r.Complete || r.Summary.Succeeded != sources {
		t.Errorf("answer: complete %v, %d of %d sources succeeded", r.Complete, r.Summary.Succeeded, sources)
	}
}

// TestMemoryPerInFlightQuery measures what one query costs while it waits
// on slow portals: 200 concurrent queries, each for its own plate (so that
// no call is shared), across 5 portals that hold every call until the
// measurement is done. The heap, stacks and goroutines above the idle
// baseline, divided by 200, are the cost of one query in flight; the test
// fails when it exceeds the bounds below, and when memory and goroutines
// are not back to the baseline once the queries are answered.
func TestMemoryPerInFlightQuery(t *testing.T) {
	if testing.Short() {
		t.Skip("measures memory under load; skipped under -short")
	}
	const queries, nsrc = 200, 5
	portals := make([]*heldPortal, nsrc)
	srcs := make([]source, nsrc)
	for i := range portals {
		portals[i] = newHeldPortal(t)
		srcs[i] = source{id: fmt.Sprintf("p%d", i), url: portals[i].URL(), extra: []string{"timeout: 9s"}}
	}
	tr := app.NewTransport()
	e := start(t, newConfig(t, adminToken, srcs...), app.Options{Transport: tr})
	addr := e.srv.Listener.Addr().String()

	round := func(n int, during func()) {
		t.Helper()
		var arrivedBefore int64
		for _, p := range portals {
			arrivedBefore += p.arrived.Load()
		}
		conns := make([]net.Conn, n)
		for i := range conns {
			conns[i] = rawQuery(t, addr, fmt.Sprintf("AB%03dCD", i))
		}
		eventually(t, 20*time.Second, "every call held by the portals", func() bool {
			var arrived int64
			for _, p := range portals {
				arrived += p.arrived.Load()
			}
			return arrived-arrivedBefore == int64(n*nsrc)
		})
		during()
		for _, p := range portals {
			p.release(true)
		}
		for _, c := range conns {
			readAnswer(t, c, nsrc)
		}
	}

	// Warm-up at full size: pools, lazily built state, and the runtime's
	// goroutine descriptors, which it keeps for reuse once goroutines end
	// (about half a KiB each, for the peak number of goroutines).
	round(queries, func() {})
	base := settle(t, e, tr, -1)
	var held usage
	round(queries, func() { held = measure() })
	after := settle(t, e, tr, base.goroutines)

	heap := (float64(held.heap) - float64(base.heap)) / queries
	stack := (float64(held.stack) - float64(base.stack)) / queries
	gor := float64(held.goroutines-base.goroutines) / queries
	t.Logf("baseline:  %v", base)
	t.Logf("%d in flight: %v", queries, held)
	t.Logf("per query in flight (%d sources): heap %.1f KiB, stacks %.1f KiB, %.1f goroutines", nsrc, heap/1024, stack/1024, gor)
	t.Logf("after:     %v", after)

	// Bounds: a query in flight holds its connection (its goroutine and the
	// server's background reader: 2) and, per source, its fan-out
	// goroutine, its shared-call goroutine and a portal connection (two
	// goroutines, two 4 KiB buffers): 2 + 4 × sources goroutines. Measured:
	// 22 goroutines and about 89 KiB of heap for 5 sources (the race
	// detector doubles the stacks, not the heap).
	const maxHeap = 128 << 10
	if heap > maxHeap {
		t.Errorf("heap per query in flight: %.1f KiB, want at most %d KiB", heap/1024, maxHeap>>10)
	}
	if max := 3.0 + 4*nsrc; gor > max {
		t.Errorf("goroutines per query in flight: %.1f, want at most %.0f", gor, max)
	}
	checkBaseline(t, base, after)
}

// checkBaseline fails unless after is back to base: the same goroutines,
// and a heap within 2 MiB or 25% (what stays is bounded state, such as the
// last 1000 breaker events and the metric series of each outcome).
func checkBaseline(t *testing.T, base, after usage) {
	t.Helper()
	if after.goroutines > base.goroutines {
		t.Errorf("goroutines after the load: %d, want the baseline's %d\n%s", after.goroutines, base.goroutines, goroutineDump())
	}
	slack := max(2<<20, base.heap/4)
	if after.heap > base.heap+slack {
		t.Errorf("heap after the load: %.2f MiB, want at most the baseline's %.2f MiB + %.2f MiB", mib(after.heap), mib(base.heap), mib(slack))
	}
}

func goroutineDump() string {
	buf := make([]byte, 1<<20)
	return string(buf[:runtime.Stack(buf, true)])
}

// TestSoak runs steady concurrent load against eight portals with every
// kind of fault (slow, 503 bursts, 429s, hanging, connection resets,
// oversized answers, flapping) for AGGREGATOR_SOAK (15s by default; set
// AGGREGATOR_SOAK=5m for the long run of docs/soak.md, and
// AGGREGATOR_SOAK_HEAPPROFILE=FILE for a profile of the heap after it), sampling
// goroutines and heap every few seconds. Afterwards the goroutines must be
// back to the idle baseline, the heap within the slack of checkBaseline,
// no answer may be a 500, and the breakers must be those configured.
func TestSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("soak; skipped under -short")
	}
	length := 15 * time.Second
	if v := os.Getenv("AGGREGATOR_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("AGGREGATOR_SOAK: %v", err)
		}
		length = d
	}
	const workers = 32
	start0 := time.Now()
	chance := func(p float64) bool { return rand.Float64() < p }
	behave := func(f func(w http.ResponseWriter, r *http.Request) bool) http.Handler {
		ok := one("Q-1")
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !f(w, r) {
				ok.ServeHTTP(w, r)
			}
		})
	}
	// The soak's portals keep no record of the calls they receive (the
	// e2e portal does, which over minutes would be the heap's growth).
	add := func(f func(stop <-chan struct{}) http.Handler) string {
		stop := make(chan struct{})
		srv := httptest.NewServer(f(stop))
		t.Cleanup(func() {
			close(stop)
			srv.Close()
		})
		return srv.URL
	}
	hang := func(stop <-chan struct{}, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}
	healthy := add(func(stop <-chan struct{}) http.Handler { return one("Q-1") })
	slow := add(func(stop <-chan struct{}) http.Handler {
		return behave(func(w http.ResponseWriter, r *http.Request) bool {
			d := time.Duration(50+rand.IntN(350)) * time.Millisecond
			select {
			case <-time.After(d):
			case <-r.Context().Done():
				return true
			case <-stop:
				return true
			}
			return false
		})
	})
	flaky := add(func(stop <-chan struct{}) http.Handler {
		return behave(func(w http.ResponseWriter, r *http.Request) bool {
			if chance(0.3) {
				status(http.StatusServiceUnavailable, "Retry-After", "1").ServeHTTP(w, r)
				return true
			}
			return false
		})
	})
	throttled := add(func(stop <-chan struct{}) http.Handler {
		return behave(func(w http.ResponseWriter, r *http.Request) bool {
			if chance(0.1) {
				status(http.StatusTooManyRequests, "Retry-After", "1").ServeHTTP(w, r)
				return true
			}
			return false
		})
	})
	hanging := add(func(stop <-chan struct{}) http.Handler {
		return behave(func(w http.ResponseWriter, r *http.Request) bool {
			if chance(0.2) {
				hang(stop, r)
				return true
			}
			return false
		})
	})
	crashing := add(func(stop <-chan struct{}) http.Handler {
		return behave(func(w http.ResponseWriter, r *http.Request) bool {
			if chance(0.1) {
				hangUp().ServeHTTP(w, r)
				return true
			}
			return false
		})
	})
	flapping := add(func(stop <-chan struct{}) http.Handler {
		return behave(func(w http.ResponseWriter, r *http.Request) bool {
			if time.Since(start0)%(5*time.Second) < 2*time.Second {
				status(http.StatusBadGateway).ServeHTTP(w, r)
				return true
			}
			return false
		})
	})
	oversized := add(func(stop <-chan struct{}) http.Handler {
		big := actas(acta{"nro": strings.Repeat("x", 8<<10)})
		return behave(func(w http.ResponseWriter, r *http.Request) bool {
			if chance(0.05) {
				big.ServeHTTP(w, r)
				return true
			}
			return false
		})
	})
	cfg := newConfig(t, adminToken,
		source{id: "healthy", url: healthy},
		source{id: "slow", url: slow},
		source{id: "flaky", url: flaky, extra: []string{"retry: {max_retries: 1}"}},
		source{id: "throttled", url: throttled, extra: []string{"rate_limit: {rps: 200, burst: 20, max_wait: 100ms}"}},
		source{id: "hanging", url: hanging, extra: []string{"timeout: 500ms"}},
		source{id: "crashing", url: crashing},
		source{id: "flapping", url: flapping},
		source{id: "oversized", url: oversized, extra: []string{"max_response_bytes: 4096"}},
	)
	ids := []string{"healthy", "slow", "flaky", "throttled", "hanging", "crashing", "flapping", "oversized"}
	tr := app.NewTransport()
	e := start(t, cfg, app.Options{Transport: tr})

	var (
		requests atomic.Int64
		statusMu sync.Mutex
		statuses = map[int]int{}
	)
	load := func(d time.Duration) {
		stop := time.Now().Add(d)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for time.Now().Before(stop) {
					code := soakRequest(e, ids)
					requests.Add(1)
					statusMu.Lock()
					statuses[code]++
					statusMu.Unlock()
				}
			})
		}
		wg.Wait()
	}

	load(2 * time.Second) // warm-up: every series, pool and code path
	base := settle(t, e, tr, -1)
	t.Logf("baseline after warm-up: %v", base)

	done := make(chan struct{})
	var samples []string
	var peak usage
	var sampler sync.WaitGroup
	sampler.Go(func() {
		every := max(length/10, 2*time.Second)
		tick := time.NewTicker(every)
		defer tick.Stop()
		began := time.Now()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				u := measure()
				peak.goroutines = max(peak.goroutines, u.goroutines)
				peak.heap = max(peak.heap, u.heap)
				peak.stack = max(peak.stack, u.stack)
				samples = append(samples, fmt.Sprintf("%6s  %7d requests  %v", time.Since(began).Round(time.Second), requests.Load(), u))
			}
		}
	})
	began := time.Now()
	load(length)
	elapsed := time.Since(began)
	close(done)
	sampler.Wait()
	after := settle(t, e, tr, base.goroutines)
	if path := os.Getenv("AGGREGATOR_SOAK_HEAPPROFILE"); path != "" {
		writeHeapProfile(t, path)
	}

	for _, s := range samples {
		t.Logf("sample %s", s)
	}
	t.Logf("%d requests in %v (%.0f/s, %d workers), statuses %v", requests.Load(), elapsed.Round(time.Second),
		float64(requests.Load())/elapsed.Seconds(), workers, statuses)
	t.Logf("peak under load: %v", peak)
	t.Logf("after the load:  %v", after)
	transitions := 0
	for _, b := range e.breakers() {
		if b.LastTransition != nil {
			transitions++
		}
	}
	t.Logf("breakers: %d (%d sources × 3 operations), %d with transitions", len(e.app.Breakers.IDs()), len(ids), transitions)

	if statuses[http.StatusInternalServerError] > 0 {
		t.Errorf("%d answers were 500", statuses[http.StatusInternalServerError])
	}
	if n := len(e.app.Breakers.IDs()); n != 3*len(ids) {
		t.Errorf("breakers: %d, want %d", n, 3*len(ids))
	}
	checkBaseline(t, base, after)
}

// writeHeapProfile writes the live heap's profile to path, for go tool
// pprof: what the soak leaves behind, by allocation site.
func writeHeapProfile(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		t.Fatal(err)
	}
}

// soakRequest sends one request of the soak's mix and returns its status.
func soakRequest(e *env, ids []string) int {
	plate := func() string {
		l := func() byte { return byte('A' + rand.IntN(26)) }
		d := func() byte { return byte('0' + rand.IntN(10)) }
		return string([]byte{l(), l(), d(), d(), d(), l(), l()})
	}
	var path string
	header := http.Header{}
	switch n := rand.IntN(100); {
	case n < 60:
		path = "/v1/infractions?domain=" + plate()
		if rand.IntN(3) == 0 {
			path += "&sources=" + ids[rand.IntN(len(ids))] + "," + ids[rand.IntN(len(ids))]
		}
		if rand.IntN(3) == 0 {
			path += fmt.Sprintf("&timeout=%dms", 300+rand.IntN(2000))
		}
	case n < 75:
		path = fmt.Sprintf("/v1/infractions?id=%d", 10_000_000+rand.IntN(89_999_999))
	case n < 82:
		path = "/v1/infractions?domain=" + plate() + "X&sources=nowhere"
	case n < 90:
		path = fmt.Sprintf("/v1/sources/%s/infractions/Q-%d/voucher", ids[rand.IntN(len(ids))], rand.IntN(1000))
	case n < 95:
		path = "/v1/admin/breakers"
		header.Set("Authorization", "Bearer "+adminToken)
	case n < 97:
		path = "/metrics"
	default:
		path = "/v1/sources"
	}
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		e.t.Errorf("%s: %v", path, err)
		return 0
	}
	req.Header = header
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Errorf("%s: %v", path, err)
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
