package metrics_test

import (
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/metrics"
)

// TestRecent checks the dashboard's per-source figures: outcomes counted
// over the window only, skipped calls counted but not timed, quantiles
// interpolated within buckets as histogram_quantile does.
func TestRecent(t *testing.T) {
	t.Parallel()
	m := metrics.New(nil)
	start := time.Now()
	// Before the window: 5 slow failures, which must not count.
	for range 5 {
		m.SourceCall("caba", aggregator.ByDomain, aggregator.Unavailable, 8*time.Second)
	}
	m.Sample(start)
	m.Sample(start.Add(metrics.RecentWindow / 2))
	// In the window: 90 calls of 20 ms, 10 of 400 ms, and 3 skipped.
	for range 90 {
		m.SourceCall("caba", aggregator.ByDomain, aggregator.Succeeded, 20*time.Millisecond)
	}
	for range 10 {
		m.SourceCall("caba", aggregator.ByID, aggregator.Timeout, 400*time.Millisecond)
	}
	for range 3 {
		m.SourceCall("caba", aggregator.ByDomain, aggregator.SkippedOpen, 0)
	}
	m.SourceCall("cordoba", aggregator.ByDomain, aggregator.SkippedRateLimited, 0)
	for range 7 {
		m.MemoryHit("caba", "fresh")
	}
	m.MemoryHit("cordoba", "stale")

	now := start.Add(metrics.RecentWindow + time.Second)
	r := m.Recent(now)
	if r.Window != metrics.RecentWindow+time.Second {
		t.Errorf("window %v, want %v (since the newest sample at least a window old)", r.Window, metrics.RecentWindow+time.Second)
	}
	caba := r.Sources["caba"]
	want := map[string]int64{"succeeded": 90, "timeout": 10, "skipped_open": 3}
	if len(caba.Outcomes) != len(want) || caba.Calls != 103 || caba.Timed != 100 {
		t.Errorf("caba = %+v, want outcomes %v, 103 calls, 100 timed", caba, want)
	}
	for o, n := range want {
		if caba.Outcomes[o] != n {
			t.Errorf("caba %s = %d, want %d", o, caba.Outcomes[o], n)
		}
	}
	// The 50th of 100 falls in (10 ms, 25 ms]: 10 + 15·50/90 ms; the 95th
	// in (250 ms, 500 ms]: 250 + 250·5/10 ms.
	if got, want := caba.P50, 10*time.Millisecond+15*time.Millisecond*50/90; absDiff(got, want) > 10*time.Microsecond {
		t.Errorf("p50 = %v, want %v", got, want)
	}
	if got, want := caba.P95, 375*time.Millisecond; absDiff(got, want) > 10*time.Microsecond {
		t.Errorf("p95 = %v, want %v", got, want)
	}
	if c := r.Sources["cordoba"]; c.Calls != 1 || c.Timed != 0 || c.Outcomes["skipped_rate_limited"] != 1 {
		t.Errorf("cordoba = %+v, want one skipped call, not timed", c)
	}
	// Remembered answers are counted apart: no calls.
	if got := caba.Remembered; len(got) != 1 || got["fresh"] != 7 {
		t.Errorf("caba remembered = %v, want 7 fresh", got)
	}
	if got := r.Sources["cordoba"].Remembered; len(got) != 1 || got["stale"] != 1 {
		t.Errorf("cordoba remembered = %v, want 1 stale", got)
	}
	if _, ok := r.Sources["mendoza"]; ok {
		t.Error("a source without calls has figures")
	}

	// Without a sample a window old, since the metrics began, when every
	// count was zero: the 5 early failures count too.
	fresh := m.Recent(start.Add(time.Second))
	if fresh.Sources["caba"].Outcomes["unavailable"] != 5 {
		t.Errorf("without an old sample: %+v, want everything since the start", fresh.Sources["caba"])
	}
}

func absDiff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}
