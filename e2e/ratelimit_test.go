package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
)

// The rate-limiting rules of SPEC 4.2 and the retries of 4.3, through the
// real HTTP stack. Every test counts what the portal received: a throttling
// portal is slowed down, never called while it asked not to be, and never
// mistaken for a portal that is down.

// arrivals wraps portal handlers to record when each request arrived. The
// handlers answer at once, so a request's arrival is also a lower bound of
// the time the aggregator read the answer, and so of the start of any pause
// the answer asked for.
type arrivals struct {
	mu sync.Mutex
	at []time.Time
}

func (a *arrivals) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.at = append(a.at, time.Now())
		a.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

func (a *arrivals) times() []time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]time.Time(nil), a.at...)
}

// checkGaps checks that no two consecutive requests arrived less than
// least apart.
func checkGaps(t *testing.T, times []time.Time, least time.Duration) {
	t.Helper()
	for i := 1; i < len(times); i++ {
		if gap := times[i].Sub(times[i-1]); gap < least {
			t.Errorf("request %d arrived %v after request %d, want at least %v", i+1, gap, i, least)
		}
	}
}

// firstThen answers the first request with first, every later one with then.
func firstThen(first, then http.Handler) http.Handler {
	var served atomic.Bool
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.CompareAndSwap(false, true) {
			first.ServeHTTP(w, r)
			return
		}
		then.ServeHTTP(w, r)
	})
}

// checkRetryAfter checks that an entry's retry_after is within [lo, hi].
func checkRetryAfter(t *testing.T, what string, en sourceEntry, lo, hi int) {
	t.Helper()
	if ra := retryAfter(en.Problem); ra < lo || ra > hi {
		t.Errorf("%s: retry_after %d, want %d to %d (%+v)", what, ra, lo, hi, en.Problem)
	}
}

// TestRateLimitedNeverTrips: 50 queries against a portal that answers 429
// with Retry-After: 2 to everything. The call that gets a 429 is failed
// rate-limited; while the pause lasts the source is skipped rate-limited and
// the portal is not called; nothing ever reaches the breaker, set to trip on
// a single counted failure (SPEC 4.1, 4.2).
func TestRateLimitedNeverTrips(t *testing.T) {
	t.Parallel()
	var got arrivals
	p := newPortal(t, got.wrap(status(http.StatusTooManyRequests, "Retry-After", "2")))
	e := startWith(t, source{id: "p", url: p.URL,
		extra: []string{"rate_limit: {max_wait: 0s}", "breaker: {min_calls: 1, open_for: 5s}"}})

	const n = 50
	failed := 0
	begin := time.Now()
	for i := range n {
		before := p.calls()
		a := e.byDomain(plateN(i))
		en := a.entry(t, "p")
		called := p.calls() - before
		switch en.Status {
		case "failed":
			failed++
			checkEntry(t, en, "failed", "rate-limited")
			checkRetryAfter(t, "query "+strconv.Itoa(i+1)+", the 429", en, 2, 2)
			if called != 1 {
				t.Errorf("query %d failed after %d calls, want 1", i+1, called)
			}
		case "skipped":
			checkEntry(t, en, "skipped", "rate-limited")
			checkRetryAfter(t, "query "+strconv.Itoa(i+1)+", paused", en, 1, 2)
			if called != 0 {
				t.Errorf("query %d: the portal received %d calls while paused, want 0", i+1, called)
			}
			// Every source skipped: the 503 carries the retry_after.
			if h := a.header.Get("Retry-After"); h != strconv.Itoa(retryAfter(en.Problem)) {
				t.Errorf("query %d: Retry-After %q, want the entry's %d", i+1, h, retryAfter(en.Problem))
			}
		default:
			t.Errorf("query %d: got %s (%+v), want failed or skipped rate-limited", i+1, en.Status, en.Problem)
		}
		time.Sleep(50 * time.Millisecond)
	}
	elapsed := time.Since(begin)

	// The loop outlasted the pause: the portal was called again after it,
	// and only then.
	if calls := p.calls(); calls != failed || calls < 2 || calls > int(elapsed/(2*time.Second))+1 {
		t.Errorf("portal received %d calls (%d failed entries) in %v, want one per 2s pause", calls, failed, elapsed)
	}
	checkGaps(t, got.times(), 2*time.Second)

	b := e.breaker("p", "by_domain")
	if b.State != "closed" || b.Window.Calls != 0 || b.Window.Failures != 0 || b.LastTransition != nil {
		t.Errorf("breaker: got %s, window %+v, last transition %+v; want closed, empty, never tripped",
			b.State, b.Window, b.LastTransition)
	}
}

// withHeader adds a header to h's answers.
func withHeader(h http.Handler, key, value string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(key, value)
		h.ServeHTTP(w, r)
	})
}

// TestPauseEndsAtRetryAfter: a paused source is skipped, uncalled, until
// the time its portal gave, then called again: Retry-After as
// delay-seconds and in each of the three HTTP-date forms of RFC 9110, and
// an exhausted RateLimit quota on any answer, Retry-After taking precedence
// (SPEC 4.2).
func TestPauseEndsAtRetryAfter(t *testing.T) {
	t.Parallel()
	// date is the HTTP-date 2s after now, in layout, and the time it names:
	// 1 to 2s after now, the date having whole seconds.
	date := func(now time.Time, layout string) (string, time.Time) {
		d := now.Add(2 * time.Second).UTC().Truncate(time.Second)
		return strings.Replace(d.Format(layout), "UTC", "GMT", 1), d
	}
	const exhausted = `"default";r=0;t=1`
	tests := []struct {
		name string
		// answer is the portal's first answer, written at now, and the
		// earliest time the pause it asks for may end.
		answer func(now time.Time) (http.Handler, time.Time)
		// status and slug are those of the entry of the call that got it.
		status, slug string
	}{
		{"delay-seconds", func(now time.Time) (http.Handler, time.Time) {
			return status(http.StatusTooManyRequests, "Retry-After", "1"), now.Add(time.Second)
		}, "failed", "rate-limited"},
		{"IMF-fixdate", func(now time.Time) (http.Handler, time.Time) {
			v, until := date(now, http.TimeFormat)
			return status(http.StatusTooManyRequests, "Retry-After", v), until
		}, "failed", "rate-limited"},
		{"RFC 850 date", func(now time.Time) (http.Handler, time.Time) {
			v, until := date(now, time.RFC850)
			return status(http.StatusTooManyRequests, "Retry-After", v), until
		}, "failed", "rate-limited"},
		{"asctime date", func(now time.Time) (http.Handler, time.Time) {
			v, until := date(now, time.ANSIC)
			return status(http.StatusTooManyRequests, "Retry-After", v), until
		}, "failed", "rate-limited"},
		{"Retry-After before RateLimit", func(now time.Time) (http.Handler, time.Time) {
			return status(http.StatusTooManyRequests, "Retry-After", "1", "RateLimit", `"default";r=0;t=60`), now.Add(time.Second)
		}, "failed", "rate-limited"},
		{"503 with Retry-After", func(now time.Time) (http.Handler, time.Time) {
			return status(http.StatusServiceUnavailable, "Retry-After", "1"), now.Add(time.Second)
		}, "failed", "source-unavailable"},
		{"RateLimit r=0 on a success", func(now time.Time) (http.Handler, time.Time) {
			return withHeader(one("P-0"), "RateLimit", exhausted), now.Add(time.Second)
		}, "succeeded", ""},
		{"RateLimit r=0 on a 403", func(now time.Time) (http.Handler, time.Time) {
			return status(http.StatusForbidden, "RateLimit", exhausted), now.Add(time.Second)
		}, "failed", "source-rejected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var (
				mu       sync.Mutex
				pauseEnd time.Time
			)
			p := newPortal(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				h, until := tt.answer(time.Now())
				mu.Lock()
				pauseEnd = until
				mu.Unlock()
				h.ServeHTTP(w, r)
			}))
			e := startWith(t, source{id: "p", url: p.URL, extra: []string{"rate_limit: {max_wait: 0s}"}})

			en := e.byDomain(plateN(0)).entry(t, "p")
			checkEntry(t, en, tt.status, tt.slug)
			if tt.status == "failed" {
				checkRetryAfter(t, "the answer that asked for the pause", en, 1, 2)
			}
			mu.Lock()
			until := pauseEnd
			mu.Unlock()

			var got arrivals
			p.set(got.wrap(one("P-1")))
			skipped := 0
			for i := 1; ; i++ {
				en := e.byDomain(plateN(i)).entry(t, "p")
				if en.Status == "succeeded" {
					break
				}
				checkEntry(t, en, "skipped", "rate-limited")
				checkRetryAfter(t, "paused", en, 1, 2)
				skipped++
				if n := p.calls(); n != 1 {
					t.Fatalf("query %d: the portal received %d calls while paused, want still 1", i+1, n)
				}
				if time.Since(until) > 3*time.Second {
					t.Fatalf("still skipped 3s after the pause ended at %v", until)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if skipped == 0 {
				t.Errorf("no query was skipped: the pause was not honoured")
			}
			if n := p.calls(); n != 2 {
				t.Errorf("portal received %d calls, want 2 (the first answer, then one after the pause)", n)
			}
			if at := got.times(); len(at) != 1 || at[0].Before(until) {
				t.Errorf("the portal was called again at %v, want not before the pause's end %v", at, until)
			}
		})
	}
}

// TestRetryAfterClamped: a Retry-After beyond rate_limit.max_pause pauses
// for max_pause; one that cannot be read, or is already past, sets no pause
// (SPEC 4.2: never trusted blindly).
func TestRetryAfterClamped(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value string
		// want is the retry_after of the 429's entry; paused is whether the
		// next query is skipped.
		want   int
		paused bool
	}{
		{"a date years away", "Fri, 31 Dec 2100 23:59:59 GMT", 3, true},
		{"delay-seconds beyond any duration", "99999999999999999999999", 3, true},
		{"negative", "-5", 1, false},
		{"garbage", "soon", 1, false},
		{"a fraction", "1.5", 1, false},
		{"a date in the past", "Sun, 06 Nov 1994 08:49:37 GMT", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newPortal(t, status(http.StatusTooManyRequests, "Retry-After", tt.value))
			e := startWith(t, source{id: "p", url: p.URL, extra: []string{"rate_limit: {max_wait: 0s, max_pause: 3s}"}})
			en := e.byDomain(plateN(0)).entry(t, "p")
			checkEntry(t, en, "failed", "rate-limited")
			checkRetryAfter(t, "Retry-After: "+tt.value, en, tt.want, tt.want)

			en = e.byDomain(plateN(1)).entry(t, "p")
			if tt.paused {
				checkEntry(t, en, "skipped", "rate-limited")
				checkRetryAfter(t, "paused for max_pause", en, 2, 3)
			} else {
				checkEntry(t, en, "failed", "rate-limited")
			}
			want := 1
			if !tt.paused {
				want = 2
			}
			if n := p.calls(); n != want {
				t.Errorf("portal received %d calls, want %d", n, want)
			}
		})
	}
}

// TestWaitForPause: a call waits out a pause that fits both max_wait and
// the query's remaining budget, then goes; otherwise it is skipped
// rate-limited with the pause left as its retry_after (SPEC 4.2).
func TestWaitForPause(t *testing.T) {
	t.Parallel()
	// paused starts a replica whose portal answered 429 with Retry-After
	// seconds to a first query, and now answers with one infraction.
	paused := func(t *testing.T, rateLimit string, seconds int) (*env, *portal, *arrivals) {
		t.Helper()
		got := &arrivals{}
		p := newPortal(t, got.wrap(firstThen(
			status(http.StatusTooManyRequests, "Retry-After", strconv.Itoa(seconds)), one("P-1"))))
		e := startWith(t, source{id: "p", url: p.URL, extra: []string{rateLimit}})
		en := e.byDomain(plateN(0)).entry(t, "p")
		checkEntry(t, en, "failed", "rate-limited")
		checkRetryAfter(t, "the 429", en, seconds, seconds)
		return e, p, got
	}
	// waited checks that the last query waited out the pause of the 429.
	waited := func(t *testing.T, a answer, p *portal, got *arrivals, pause time.Duration) {
		t.Helper()
		checkEntry(t, a.entry(t, "p"), "succeeded", "")
		if len(a.result.Infractions) != 1 {
			t.Errorf("got %d infractions, want the portal's 1", len(a.result.Infractions))
		}
		if n := p.calls(); n != 2 {
			t.Errorf("portal received %d calls, want 2", n)
		}
		checkGaps(t, got.times(), pause)
	}

	t.Run("fits", func(t *testing.T) {
		t.Parallel()
		e, p, got := paused(t, "rate_limit: {max_wait: 2s}", 1)
		a := e.byDomain(plateN(1), "timeout=3s")
		waited(t, a, p, got, time.Second)
		if a.took > 3*time.Second {
			t.Errorf("the answer took %v, beyond its 3s budget", a.took)
		}
	})
	t.Run("beyond max_wait", func(t *testing.T) {
		t.Parallel()
		e, p, _ := paused(t, "rate_limit: {max_wait: 100ms}", 2)
		en := e.byDomain(plateN(1), "timeout=3s").entry(t, "p")
		checkEntry(t, en, "skipped", "rate-limited")
		checkRetryAfter(t, "the pause left", en, 1, 2)
		if n := p.calls(); n != 1 {
			t.Errorf("portal received %d calls, want 1", n)
		}
	})
	t.Run("beyond the query's budget", func(t *testing.T) {
		t.Parallel()
		e, p, got := paused(t, "rate_limit: {max_wait: 5s}", 2)
		en := e.byDomain(plateN(1), "timeout=500ms").entry(t, "p")
		checkEntry(t, en, "skipped", "rate-limited")
		checkRetryAfter(t, "the pause left", en, 1, 2)
		if n := p.calls(); n != 1 {
			t.Errorf("portal received %d calls, want 1", n)
		}
		// The same pause fits a larger budget: that query waits.
		waited(t, e.byDomain(plateN(2), "timeout=3s"), p, got, 2*time.Second)
	})
}

// TestSourceBudget: with rate_limit {rps: 2, burst: 2} and no waiting, of
// five simultaneous queries exactly two reach the portal (SPEC 4.2).
func TestSourceBudget(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("P-1"))
	e := startWith(t, source{id: "p", url: p.URL, extra: []string{"rate_limit: {rps: 2, burst: 2, max_wait: 0s}"}})

	const n = 5
	answers := make(chan answer, n)
	release := make(chan struct{})
	for i := range n {
		go func() {
			<-release
			answers <- e.byDomain(plateN(i))
		}()
	}
	close(release)
	succeeded, skipped := 0, 0
	for range n {
		a := <-answers
		en := a.entry(t, "p")
		switch en.Status {
		case "succeeded":
			succeeded++
		case "skipped":
			skipped++
			checkEntry(t, en, "skipped", "rate-limited")
			checkRetryAfter(t, "over the budget", en, 1, 1)
		default:
			t.Errorf("got %s (%+v), want succeeded or skipped rate-limited", en.Status, en.Problem)
		}
	}
	if succeeded != 2 || skipped != 3 {
		t.Errorf("got %d succeeded and %d skipped, want 2 and 3", succeeded, skipped)
	}
	if calls := p.calls(); calls != 2 {
		t.Errorf("portal received %d calls, want 2 (the burst)", calls)
	}
	if b := e.breaker("p", "by_domain"); b.Window.Calls != 2 {
		t.Errorf("breaker window: got %+v, want the 2 calls made, none of the skipped", b.Window)
	}
}

// TestRetryPolicy: retries per SPEC 4.3 — as many as max_retries, backed
// off; a Retry-After honoured; never past the query's budget.
func TestRetryPolicy(t *testing.T) {
	t.Parallel()
	const retry = "retry: {max_retries: 2, initial_backoff: 50ms, max_backoff: 50ms}"

	t.Run("503", func(t *testing.T) {
		t.Parallel()
		var got arrivals
		p := newPortal(t, got.wrap(status(http.StatusServiceUnavailable)))
		e := startWith(t, source{id: "p", url: p.URL, extra: []string{retry}})
		checkEntry(t, e.byDomain(plate).entry(t, "p"), "failed", "source-unavailable")
		if n := p.calls(); n != 3 {
			t.Errorf("portal received %d calls, want 3 (1 + max_retries 2)", n)
		}
		checkGaps(t, got.times(), 25*time.Millisecond) // half of the backoff, its jitter's floor
		if b := e.breaker("p", "by_domain"); b.Window.Calls != 3 || b.Window.Failures != 3 {
			t.Errorf("breaker window: got %+v, want every attempt: 3 calls, 3 failures", b.Window)
		}
	})
	t.Run("Retry-After beyond the budget", func(t *testing.T) {
		t.Parallel()
		p := newPortal(t, status(http.StatusServiceUnavailable, "Retry-After", "10"))
		e := startWith(t, source{id: "p", url: p.URL, extra: []string{retry}})
		en := e.byDomain(plate, "timeout=1s").entry(t, "p")
		checkEntry(t, en, "failed", "source-unavailable")
		checkRetryAfter(t, "503 with Retry-After: 10", en, 10, 10)
		if n := p.calls(); n != 1 {
			t.Errorf("portal received %d calls, want 1: the pause exceeds the budget", n)
		}
	})
	t.Run("Retry-After honoured", func(t *testing.T) {
		t.Parallel()
		var got arrivals
		p := newPortal(t, got.wrap(firstThen(status(http.StatusServiceUnavailable, "Retry-After", "1"), one("P-1"))))
		e := startWith(t, source{id: "p", url: p.URL, extra: []string{retry}})
		checkEntry(t, e.byDomain(plate, "timeout=3s").entry(t, "p"), "succeeded", "")
		if n := p.calls(); n != 2 {
			t.Errorf("portal received %d calls, want 2", n)
		}
		checkGaps(t, got.times(), time.Second)
	})
	t.Run("stop at the budget", func(t *testing.T) {
		t.Parallel()
		p := newPortal(t, nil)
		p.set(p.slow(300*time.Millisecond, one("P-1")))
		e := startWith(t, source{id: "p", url: p.URL, extra: []string{"timeout: 200ms",
			"retry: {max_retries: 5, initial_backoff: 100ms, max_backoff: 100ms}"}})
		a := e.byDomain(plate, "timeout=500ms")
		// The first attempt times out after 200ms; the second, after a
		// backoff of 50 to 100ms, times out too or is cut by the budget
		// (the entry is then the first attempt's source-timeout, or
		// deadline-exceeded if the budget ends before the source's part is
		// assembled); a third would need a backoff shorter than the budget
		// left, at most 50ms.
		en := a.entry(t, "p")
		if en.Problem == nil || !strings.HasSuffix(en.Problem.Type, "/source-timeout") {
			checkEntry(t, en, "failed", "deadline-exceeded")
		} else {
			checkEntry(t, en, "failed", "source-timeout")
		}
		if n := p.calls(); n < 1 || n > 2 {
			t.Errorf("portal received %d calls, want 2 at most", n)
		}
		if a.took > 1500*time.Millisecond {
			t.Errorf("the answer took %v, want it within its 500ms budget and a margin", a.took)
		}
	})
}

// TestRecoveryUnderSaturation: a breaker whose portal has recovered closes
// even while its source's limiter refuses nearly every call: the limiter
// never holds the half-open probe slot (issue 3, point 3; SPEC 4.1, 4.2).
//
// The limiter is per source and the breaker per operation, so the budget is
// held at its limit by lookups by id, whose breaker is closed and whose
// calls do spend tokens, as well as by lookups by domain, whose breaker
// recovers. A probe handed out before the limiter is asked, and then
// refused by it, would hold the slot until its lease (the source's 5s
// timeout and 1s) ran out: longer than the test.
func TestRecoveryUnderSaturation(t *testing.T) {
	t.Parallel()
	const (
		rps, burst = 5, 1
		workers    = 8
		hammer     = 3 * time.Second
	)
	var recovered atomic.Bool
	mux := http.NewServeMux()
	mux.Handle("GET /actas", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if recovered.Load() {
			one("P-1").ServeHTTP(w, r)
			return
		}
		status(http.StatusServiceUnavailable).ServeHTTP(w, r)
	}))
	mux.Handle("GET /personas/{kind}/{id}", one("ID-1"))
	p := newPortal(t, mux)
	e := startWith(t, source{id: "p", url: p.URL, extra: []string{
		"timeout: 5s",
		"rate_limit: {rps: 5, burst: 1, max_wait: 0s}",
		"breaker: {min_calls: 2, open_for: 500ms}",
	}})

	// Trip the by_domain breaker: two failed calls, however many queries
	// the budget skips on the way.
	plates := 0
	eventually(t, 5*time.Second, "two calls to the failing portal", func() bool {
		en := e.byDomain(plateN(plates)).entry(t, "p")
		plates++
		if en.Status != "skipped" {
			checkEntry(t, en, "failed", "source-unavailable")
		}
		return p.calls() >= 2
	})
	if b := e.breaker("p", "by_domain"); b.LastTransition == nil || b.LastTransition.To != "open" {
		t.Fatalf("after 2 failures: breaker %s, last transition %+v; want it tripped", b.State, b.LastTransition)
	}
	recovered.Store(true)
	before := p.calls()

	// Hammer the source far beyond its budget while the breaker recovers:
	// half the workers by domain, half by id.
	var (
		next   atomic.Int64
		mu     sync.Mutex
		counts = map[string]int{} // by operation, status and problem
		wg     sync.WaitGroup
		begin  = time.Now()
		stop   = begin.Add(hammer)
	)
	next.Store(int64(plates))
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				n := int(next.Add(1))
				var a answer
				op := "by_domain"
				if w%2 == 0 {
					a = e.byDomain(plateN(n))
				} else {
					op = "by_id"
					a = e.query(fmt.Sprintf("id=%08d", 30_000_000+n)) // distinct DNIs
				}
				en := a.entry(t, "p")
				key := op + " " + en.Status
				if en.Problem != nil {
					key += " " + strings.TrimPrefix(en.Problem.Type, baseURI)
				}
				mu.Lock()
				counts[key]++
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		}()
	}
	var closedAt time.Duration
	for closedAt == 0 && time.Now().Before(stop) {
		if e.breaker("p", "by_domain").State == "closed" {
			closedAt = time.Since(begin)
		}
		time.Sleep(20 * time.Millisecond)
	}
	wg.Wait()
	elapsed := time.Since(begin)

	if closedAt == 0 {
		t.Errorf("the breaker did not close within %v of saturated traffic (answers: %v)", hammer, counts)
	}
	b := e.breaker("p", "by_domain")
	if lt := b.LastTransition; b.State != "closed" || lt == nil || lt.From != "half_open" || lt.To != "closed" {
		t.Errorf("by_domain breaker: %s, last transition %+v; want closed from half_open", b.State, b.LastTransition)
	}
	if b := e.breaker("p", "by_id"); b.State != "closed" || b.LastTransition != nil {
		t.Errorf("by_id breaker: %s, last transition %+v; want closed, never tripped", b.State, b.LastTransition)
	}
	total, limited, succeeded := 0, 0, 0
	for k, n := range counts {
		total += n
		switch k {
		case "by_domain succeeded", "by_id succeeded":
			succeeded += n
		case "by_domain skipped rate-limited", "by_id skipped rate-limited":
			limited += n
		case "by_domain skipped circuit-open":
		default:
			t.Errorf("%d answers %q, want only succeeded and skipped ones", n, k)
		}
	}
	// The limiter was saturated: it refused most calls of both operations.
	if limited*2 < total || counts["by_domain skipped rate-limited"] == 0 || counts["by_id skipped rate-limited"] == 0 {
		t.Errorf("%d of %d queries skipped rate-limited: the limiter was not saturated (%v)", limited, total, counts)
	}
	// The portal saw the budget, not the load; every call it got succeeded.
	calls := p.calls() - before
	if most := int(rps*elapsed.Seconds()) + burst + 2; calls > most {
		t.Errorf("portal received %d calls in %v, want at most %d (rps %d, burst %d)", calls, elapsed, most, rps, burst)
	}
	if calls != succeeded {
		t.Errorf("portal received %d calls, but %d queries succeeded: every call to the recovered portal should", calls, succeeded)
	}
	t.Logf("%d queries in %v: %v; by_domain closed after %v; %d portal calls", total, elapsed, counts, closedAt, calls)
}

// TestOpenAndPaused: a source whose breaker is open and whose portal asked
// for a pause is skipped circuit-open (SPEC 4.1).
func TestOpenAndPaused(t *testing.T) {
	t.Parallel()
	t.Run("tripped by a 503 with Retry-After", func(t *testing.T) {
		t.Parallel()
		p := newPortal(t, status(http.StatusServiceUnavailable, "Retry-After", "5"))
		e := startWith(t, source{id: "p", url: p.URL, extra: []string{"breaker: {min_calls: 1, open_for: 5s}"}})
		en := e.byDomain(plateN(0)).entry(t, "p")
		checkEntry(t, en, "failed", "source-unavailable")
		checkRetryAfter(t, "the 503", en, 5, 5)

		en = e.byDomain(plateN(1)).entry(t, "p")
		checkEntry(t, en, "skipped", "circuit-open")
		checkRetryAfter(t, "open and paused", en, 4, 5)
		if n := p.calls(); n != 1 {
			t.Errorf("portal received %d calls, want 1", n)
		}
	})
	t.Run("forced open while paused", func(t *testing.T) {
		t.Parallel()
		p := newPortal(t, status(http.StatusTooManyRequests, "Retry-After", "3"))
		e := startWith(t, source{id: "p", url: p.URL, extra: []string{"breaker: {open_for: 7s}"}})
		checkEntry(t, e.byDomain(plateN(0)).entry(t, "p"), "failed", "rate-limited")
		e.forceOpen("p", "by_domain")

		en := e.byDomain(plateN(1)).entry(t, "p")
		checkEntry(t, en, "skipped", "circuit-open")
		checkRetryAfter(t, "forced open: open_for", en, 7, 7)
		if n := p.calls(); n != 1 {
			t.Errorf("portal received %d calls, want 1", n)
		}
	})
}

// TestAPIKeys: with server.api_keys, every /v1/ client endpoint wants a
// known X-API-Key, and each key spends its own budget, announced on every
// answer; the operational endpoints and the admin API do not take keys
// (SPEC 4.2, 5).
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("P-1"))
	text := configYAML(adminToken, source{id: "p", url: p.URL})
	const keys = `server:
  admin_token: "` + adminToken + `"
  api_keys: [{name: a, key: k1-secret, rps: 1, burst: 2}, {name: b, key: k2-secret, rps: 1, burst: 2}]
`
	text = strings.Replace(text, `server: {admin_token: "`+adminToken+`"}`+"\n", keys, 1)
	cfg, err := config.Parse([]byte(text), "e2e.yaml", nil)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, text)
	}
	e := start(t, cfg, app.Options{})
	query := func(n int, key string) (*http.Response, problemDoc) {
		t.Helper()
		h := http.Header{}
		if key != "" {
			h.Set("X-API-Key", key)
		}
		resp, body := e.do(http.MethodGet, "/v1/infractions?domain="+plateN(n), h, "")
		var doc problemDoc
		if resp.StatusCode != http.StatusOK {
			doc = decodeProblem(t, body)
		}
		return resp, doc
	}
	const policy = `"default";q=2;w=2` // burst 2, refilled from empty in 2s at 1 rps

	for _, key := range []string{"", "wrong"} {
		resp, doc := query(0, key)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("X-API-Key %q: got %d, want 401", key, resp.StatusCode)
		}
		checkType(t, doc, "unauthorized")
		if h := resp.Header.Get("RateLimit"); h != "" {
			t.Errorf("X-API-Key %q: RateLimit %q on a 401, want none: no budget was spent", key, h)
		}
	}

	for i, want := range []string{`"default";r=1;t=1`, `"default";r=0;t=1`} {
		resp, _ := query(1+i, "k1-secret")
		if resp.StatusCode != http.StatusOK {
			t.Errorf("k1 request %d: got %d, want 200", i+1, resp.StatusCode)
		}
		if got := resp.Header.Get("RateLimit-Policy"); got != policy {
			t.Errorf("k1 request %d: RateLimit-Policy %q, want %q", i+1, got, policy)
		}
		if got := resp.Header.Get("RateLimit"); got != want {
			t.Errorf("k1 request %d: RateLimit %q, want %q", i+1, got, want)
		}
	}
	resp, doc := query(3, "k1-secret")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("k1 request 3: got %d, want 429", resp.StatusCode)
	}
	checkType(t, doc, "too-many-requests")
	if ra := resp.Header.Get("Retry-After"); ra != "1" || retryAfter(&doc) != 1 {
		t.Errorf("k1 request 3: Retry-After %q, retry_after %d; want 1 and 1", ra, retryAfter(&doc))
	}
	if got := resp.Header.Get("RateLimit"); got != `"default";r=0;t=1` {
		t.Errorf("k1 request 3: RateLimit %q, want %q", got, `"default";r=0;t=1`)
	}
	if got := resp.Header.Get("RateLimit-Policy"); got != policy {
		t.Errorf("k1 request 3: RateLimit-Policy %q, want %q", got, policy)
	}

	// Another key has its own budget; other client endpoints spend it too.
	resp, _ = query(4, "k2-secret")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != `"default";r=1;t=1` {
		t.Errorf("k2 request 1: got %d with RateLimit %q, want 200 with %q", resp.StatusCode, resp.Header.Get("RateLimit"), `"default";r=1;t=1`)
	}
	resp, _ = e.do(http.MethodGet, "/v1/sources", http.Header{"X-API-Key": {"k2-secret"}}, "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("RateLimit") != `"default";r=0;t=1` {
		t.Errorf("k2 GET /v1/sources: got %d with RateLimit %q, want 200 with %q", resp.StatusCode, resp.Header.Get("RateLimit"), `"default";r=0;t=1`)
	}
	if resp, _ := e.get("/v1/sources"); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/sources without a key: got %d, want 401", resp.StatusCode)
	}

	// Only the requests that passed reached the portal.
	if n := p.calls(); n != 3 {
		t.Errorf("portal received %d calls, want 3 (2 for k1, 1 for k2)", n)
	}

	// The operational surface takes no key.
	for _, path := range []string{"/healthz", "/metrics", "/openapi.yaml", "/problems/too-many-requests", "/"} {
		resp, _ := e.get(path)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s without a key: got %d, want 200", path, resp.StatusCode)
		}
		if h := resp.Header.Get("RateLimit"); h != "" {
			t.Errorf("GET %s: RateLimit %q, want none", path, h)
		}
	}
	// The admin API takes its own token, and the key is no substitute.
	if resp, _ := e.admin(http.MethodGet, "/breakers", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("admin with its token and no key: got %d, want 200", resp.StatusCode)
	}
	if resp, _ := e.do(http.MethodGet, "/v1/admin/breakers", http.Header{"X-API-Key": {"k2-secret"}}, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("admin with a client key and no token: got %d, want 401", resp.StatusCode)
	}
}

// decodeProblem decodes a problem document.
func decodeProblem(t *testing.T, body []byte) problemDoc {
	t.Helper()
	var doc problemDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Errorf("decoding problem: %v\n%s", err, body)
	}
	return doc
}

// TestVoucherQuotaExhausted: a voucher served with an exhausted RateLimit
// quota pauses the source like any other answer (SPEC 4.2: "on any
// answer"): the next voucher is 503 rate-limited, uncalled.
func TestVoucherQuotaExhausted(t *testing.T) {
	t.Parallel()
	p := newPortal(t, withHeader(voucherPDF(), "RateLimit", `"default";r=0;t=5`))
	e := startWith(t, source{id: "p", url: p.URL})
	resp, body := e.get("/v1/sources/p/infractions/V-1/voucher")
	if resp.StatusCode != http.StatusOK || string(body) != pdf {
		t.Fatalf("first voucher: got %d %q, want 200 and the PDF", resp.StatusCode, body)
	}
	h, doc := e.voucherProblem("p", "V-2", http.StatusServiceUnavailable, "rate-limited")
	if ra := h.Get("Retry-After"); ra == "" || retryAfter(&doc) < 4 || retryAfter(&doc) > 5 {
		t.Errorf("paused voucher: Retry-After %q, retry_after %d; want 4 to 5", ra, retryAfter(&doc))
	}
	if n := p.calls(); n != 1 {
		t.Errorf("portal received %d calls, want 1", n)
	}
}
