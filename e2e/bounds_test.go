package e2e

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Hostile input never grows the service's state: breakers exist for the
// configured (breaker_key, operation) pairs only, and no metric series is
// labelled by anything a client sends. 10,000 requests with distinct random
// plates and ids, unknown `sources` ids, unknown breakers, sources and
// routes, and made-up methods leave the admin breaker list and the set of
// /metrics series exactly as they were after a warm-up that exercised each
// kind of answer once.
func TestStateBoundedByConfiguration(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /actas", one("Q-1"))
	mux.Handle("GET /personas/{kind}/{id}", one("Q-2"))
	mux.Handle("GET /actas/{id}/boleta", voucherPDF())
	p := newPortal(t, mux)
	// Three sources, two of them sharing a breaker key: 2 keys × 3
	// operations = 6 breakers, and never more.
	e := startWith(t,
		source{id: "caba", url: p.URL},
		source{id: "cordoba", url: p.URL, key: "shared"},
		source{id: "mendoza", url: p.URL, key: "shared"},
	)
	const wantBreakers = 6

	rng := rand.New(rand.NewPCG(1, 2))
	hostile := hostileRequests(rng, e.srv.URL)
	// Warm-up: every kind of request once, so that the series its answer
	// legitimately creates (a route, a status code, an outcome) exist.
	for i := range len(hostile) {
		hostile[i](e)
	}
	if n := len(e.breakers()); n != wantBreakers {
		t.Fatalf("breakers after warm-up: got %d, want %d", n, wantBreakers)
	}
	metricSeries(t, e) // the scrape's own series
	before := metricSeries(t, e)

	const total = 10_000
	var wg sync.WaitGroup
	work := make(chan int)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				hostile[i%len(hostile)](e)
			}
		})
	}
	for i := range total {
		work <- i
	}
	close(work)
	wg.Wait()

	if n := len(e.breakers()); n != wantBreakers {
		t.Errorf("breakers after %d hostile requests: got %d, want %d", total, n, wantBreakers)
	}
	if n := len(e.app.Breakers.IDs()); n != wantBreakers {
		t.Errorf("breaker.Set after %d hostile requests: %d ids, want %d", total, n, wantBreakers)
	}
	after := metricSeries(t, e)
	if added := diff(after, before); len(added) > 0 {
		t.Errorf("%d metric series appeared after %d hostile requests (%d before), e.g.:\n%s",
			len(added), total, len(before), strings.Join(added[:min(len(added), 10)], "\n"))
	}
	t.Logf("%d hostile requests: %d breakers, %d metric series before, %d after", total, wantBreakers, len(before), len(after))
}

// hostileRequests are the kinds of request an outsider can vary at will.
// Each draws fresh random input from rng (guarded: they run concurrently)
// and checks only that the answer is one of the expected statuses.
func hostileRequests(rng *rand.Rand, base string) []func(*env) {
	var mu sync.Mutex
	draw := func(f func() string) string {
		mu.Lock()
		defer mu.Unlock()
		return f()
	}
	word := func(n int) string {
		return draw(func() string {
			b := make([]byte, n)
			for i := range b {
				b[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rng.IntN(36)]
			}
			return string(b)
		})
	}
	randomPlate := func() string {
		return draw(func() string {
			l := func() byte { return byte('A' + rng.IntN(26)) }
			d := func() byte { return byte('0' + rng.IntN(10)) }
			return string([]byte{l(), l(), d(), d(), d(), l(), l()})
		})
	}
	randomDNI := func() string { return draw(func() string { return fmt.Sprint(10_000_000 + rng.IntN(89_999_999)) }) }
	return []func(*env){
		// A valid query by a fresh plate: a complete answer.
		func(e *env) { e.expect(http.MethodGet, "/v1/infractions?domain="+randomPlate(), http.StatusOK) },
		// A valid query by a fresh DNI.
		func(e *env) { e.expect(http.MethodGet, "/v1/infractions?id="+randomDNI(), http.StatusOK) },
		// Unknown source ids.
		func(e *env) {
			e.expect(http.MethodGet, "/v1/infractions?domain="+randomPlate()+"&sources=caba,"+word(12), http.StatusBadRequest)
		},
		// Garbage instead of a plate, and a random timeout.
		func(e *env) {
			e.expect(http.MethodGet, "/v1/infractions?domain="+word(9)+"&timeout="+word(3), http.StatusBadRequest)
		},
		// A voucher of an unknown source.
		func(e *env) {
			e.expect(http.MethodGet, "/v1/sources/"+word(8)+"/infractions/"+word(8)+"/voucher", http.StatusNotFound)
		},
		// A voucher of a known source, for a random infraction.
		func(e *env) {
			e.expect(http.MethodGet, "/v1/sources/caba/infractions/"+word(10)+"/voucher", http.StatusOK)
		},
		// Unknown breakers and sources on the admin API, with the token.
		func(e *env) {
			e.expect(http.MethodPost, "/v1/admin/breakers/"+word(8)+"/"+word(8)+"/open", http.StatusNotFound)
		},
		func(e *env) { e.expect(http.MethodPut, "/v1/admin/sources/"+word(8)+"/breaker", http.StatusNotFound) },
		// Unknown routes, with made-up methods.
		func(e *env) { e.expect(http.MethodGet, "/"+word(6)+"/"+word(6), http.StatusNotFound) },
		func(e *env) { e.expect(strings.ToUpper(word(7)), "/v1/infractions", http.StatusMethodNotAllowed) },
		func(e *env) { e.expect(strings.ToUpper(word(5)), "/"+word(5), http.StatusNotFound) },
	}
}

// expect sends a request (with the admin token on /v1/admin) and checks
// its status, without the OpenAPI check (made-up methods are not in it).
func (e *env) expect(method, path string, want int) {
	e.t.Helper()
	var body io.Reader
	if method == http.MethodPut {
		body = strings.NewReader(`{"open_for": "1s"}`)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, body)
	if err != nil {
		e.t.Errorf("%s %s: %v", method, path, err)
		return
	}
	if strings.HasPrefix(path, "/v1/admin") {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Errorf("%s %s: %v", method, path, err)
		return
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != want {
		e.t.Errorf("%s %s: got %d, want %d", method, path, resp.StatusCode, want)
	}
}

// metricSeries lists the series of GET /metrics (name and labels, without
// values), sorted; the Go runtime's and the process's are left out.
func metricSeries(t *testing.T, e *env) []string {
	t.Helper()
	resp, err := e.client.Get(e.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "go_") || strings.HasPrefix(line, "process_") {
			continue
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			line = line[:i]
		}
		out = append(out, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// diff lists the members of a that b lacks (both sorted).
func diff(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, found := slices.BinarySearch(b, s); !found {
			out = append(out, s)
		}
	}
	return out
}
