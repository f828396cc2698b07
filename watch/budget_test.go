package watch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/async"
	"github.com/multas/aggregator/ratelimit"
)

func TestShare(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		s     ratelimit.Settings
		share float64
		want  ratelimit.Settings
	}{
		{"half", ratelimit.Settings{RPS: 10, Burst: 20, MaxWait: time.Second, MaxPause: time.Minute}, 0.5,
			ratelimit.Settings{RPS: 5, Burst: 10, MaxPause: time.Minute}},
		{"burst from the rate", ratelimit.Settings{RPS: 3.5}, 0.5, ratelimit.Settings{RPS: 1.75, Burst: 2}},
		{"at least one call", ratelimit.Settings{RPS: 1, Burst: 1}, 0.25, ratelimit.Settings{RPS: 0.25, Burst: 1}},
		{"no budget", ratelimit.Settings{RPS: 0, Burst: 5}, 0.5, ratelimit.Settings{}},
		{"all of it", ratelimit.Settings{RPS: 4, Burst: 4}, 1, ratelimit.Settings{RPS: 4, Burst: 4}},
	}
	for _, tt := range tests {
		if got := Share(tt.s, tt.share); got != tt.want {
			t.Errorf("%s: Share(%+v, %v) = %+v, want %+v", tt.name, tt.s, tt.share, got, tt.want)
		}
	}
}

// Watch checks are background work: while interactive queries run as hard
// as they can, the checks of 400 due watches take no more than
// budget_share of the source's rate budget, and the interactive queries
// keep the rest (they ask for about 160 calls a second, eight times the
// budget).
func TestBudgetShareHoldsUnderInteractiveLoad(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "caba")
	caba := f.portals[0]
	const rps, burst, share = 20, 10, 0.5
	// Interactive calls wait for a token (max_wait): their demand stays in
	// the limiter however late a busy machine runs their goroutines, so
	// what they get is what the watch side left them, not what they
	// happened to ask for.
	settings := ratelimit.Settings{RPS: rps, Burst: burst, MaxWait: time.Second}
	limits := ratelimit.NewMemoryStore()
	main := ratelimit.New(limits, time.Now)
	main.Configure("caba", settings)
	budgets := ratelimit.New(limits, time.Now)
	budgets.Configure(BudgetKey("caba"), Share(settings, share))
	r := f.replica(replicaOpts{limiter: main, budgets: budgets, clock: async.WallClock(), now: time.Now, workers: 16,
		jitter: func(time.Duration) time.Duration { return 500 * time.Millisecond }})
	ctx := context.Background()
	for i := range 400 {
		if _, err := r.m.Create(ctx, Request{Owner: "fleet", Query: aggregator.Query{Domain: fmt.Sprintf("AB%03dCD", i)},
			CallbackURL: f.recv.srv.URL, Interval: time.Hour}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	const run = 3 * time.Second
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Since(start) < run; i++ {
				iq := aggregator.Query{Domain: fmt.Sprintf("AC%03dDE", (g*1000+i)%1000)}
				set, _ := r.eng.Select(iq, nil)
				r.eng.Query(ctx, iq, set, time.Second)
				time.Sleep(50 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	caba.mu.Lock()
	watched, interactive := 0, 0
	for p, n := range caba.hits {
		if strings.HasPrefix(p, "AB") {
			watched += n
		} else {
			interactive += n
		}
	}
	caba.mu.Unlock()
	// The share's rate and burst, and a call or two of a clock's grain.
	if most := int(share*rps*elapsed) + int(share*burst) + 2; watched > most {
		t.Errorf("watch checks made %d portal calls in %.1fs, want at most %d (budget_share %v of %v rps)", watched, elapsed, most, share, rps)
	}
	if watched == 0 {
		t.Error("no watch check reached the portal")
	}
	if least := int((1-share)*rps*elapsed) - 2; interactive < least {
		t.Errorf("interactive queries made %d portal calls in %.1fs, want at least %d: crowded out", interactive, elapsed, least)
	}
	if most := int(rps*elapsed) + burst + 2; watched+interactive > most {
		t.Errorf("%d portal calls in %.1fs, over the source's own budget (%d)", watched+interactive, elapsed, most)
	}
	t.Logf("in %.1fs: %d watch checks' calls, %d interactive", elapsed, watched, interactive)
}
