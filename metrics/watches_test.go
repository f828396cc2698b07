package metrics

import (
	"testing"
	"time"

	"github.com/multas/aggregator/breaker"
)

// The watch metrics of SPEC 15 exist from the start (each outcome at
// zero), and WatchStats reads them back for the dashboard.
func TestWatchMetrics(t *testing.T) {
	t.Parallel()
	m := New(breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{}))
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, f := range fams {
		series[f.GetName()] = len(f.GetMetric())
	}
	for name, n := range map[string]int{"aggregator_watches": 1, "aggregator_watch_checks_total": 4,
		"aggregator_watch_changes_total": 1, "aggregator_watch_lag_seconds": 1} {
		if series[name] != n {
			t.Errorf("%s: %d series at start, want %d", name, series[name], n)
		}
	}
	m.WatchCount(3)
	for _, d := range []time.Duration{200 * time.Millisecond, 300 * time.Millisecond, 2 * time.Minute} {
		m.WatchLag(d)
	}
	m.WatchChecked("changed", 2)
	m.WatchChecked("unchanged", 0)
	m.WatchChecked("changed", 1)
	s := m.WatchStats()
	if s.Checks["changed"] != 2 || s.Checks["unchanged"] != 1 || s.Checks["failed"] != 0 || s.Changes != 3 || s.Started != 3 {
		t.Errorf("WatchStats = %+v", s)
	}
	if s.LagP50 <= 100*time.Millisecond || s.LagP50 > 500*time.Millisecond || s.LagP95 < time.Minute {
		t.Errorf("lag p50 %v p95 %v, want within the buckets of 0.2s–0.3s and 2m", s.LagP50, s.LagP95)
	}
}
