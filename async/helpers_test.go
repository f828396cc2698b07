package async

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/internal/fakeclock"
	"github.com/multas/aggregator/internal/redistest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// fakeClock is a Clock that moves only when the test says so.
type fakeClock = fakeclock.Clock

func newFakeClock() *fakeClock { return fakeclock.New(time.Date(2026, 3, 14, 9, 12, 0, 0, time.UTC)) }

// advanceIdle moves clock on by d once m is at rest: no worker running, and
// its scheduler waiting on a timer of clock. The clock then never runs ahead
// of a manager that a busy machine slows down.
func advanceIdle(t *testing.T, m *Manager, clock *fakeClock, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(m.sem) > 0 || clock.Pending() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the manager never came to rest")
		}
		time.Sleep(time.Millisecond)
	}
	clock.Advance(d)
}

// resolver is a fake DNS: names to addresses.
type resolver map[string][]string

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := r[host]
	if !ok {
		return nil, fmt.Errorf("no such host %s", host)
	}
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// portal is a fake jurisdiction portal answering one infraction, or a
// status while down.
type portal struct {
	srv   *httptest.Server
	mu    sync.Mutex
	down  int // status to answer; 0 = healthy
	hits  int
	clock Clock
	at    []time.Time // arrivals, by clock
}

func newPortal(t *testing.T) *portal {
	p := &portal{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.hits++
		if p.clock != nil {
			p.at = append(p.at, p.clock.Now())
		}
		down := p.down
		p.mu.Unlock()
		if down != 0 {
			w.WriteHeader(down)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"resultado": {"actas": [{"nro": "Q-1", "estado": "IMPAGA"}]}}`)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *portal) setDown(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = status
}

// testEngine is a one-source fan-out over p, untraced.
func testEngine(t *testing.T, p *portal, now func() time.Time, hook func(breaker.Event)) (*fanout.Engine, *breaker.Set) {
	t.Helper()
	return tracedEngine(t, p, now, nil, hook)
}

// hook is one request a receiver got.
type hook struct {
	at     time.Time
	header http.Header
	body   []byte
	status int
}

// receiver is a webhook receiver answering status (200 when 0).
type receiver struct {
	srv   *httptest.Server
	clock Clock
	mu    sync.Mutex
	code  int
	got   []hook
}

func newReceiver(t *testing.T, clock Clock, code int) *receiver {
	r := &receiver{clock: clock, code: code}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		code := r.code
		if code == 0 {
			code = http.StatusOK
		}
		r.got = append(r.got, hook{at: r.clock.Now(), header: req.Header.Clone(), body: body, status: code})
		r.mu.Unlock()
		w.WriteHeader(code)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) set(code int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.code = code
}

func (r *receiver) hooks() []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]hook(nil), r.got...)
}

// eventually polls cond (real time) until it holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// deliveries reads the pending deliveries of a MemoryStore.
func (s *MemoryStore) pending(t *testing.T) []Delivery {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Delivery
	for _, b := range s.deliveries {
		var d Delivery
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// testRedis connects to the test Redis with a key prefix of the test's
// own, deleted at the end (see internal/redistest).
func testRedis(t *testing.T) (*redis.Client, string) {
	t.Helper()
	c, _ := redistest.Connect(t)
	return c, redistest.Prefix(t, c, "aggtest:async:")
}
