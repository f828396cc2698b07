package metrics

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// watchMetrics are the metrics of SPEC 15's watches.
type watchMetrics struct {
	count   prometheus.Gauge
	checks  *prometheus.CounterVec
	changes prometheus.Counter
	lag     prometheus.Histogram
}

// The outcomes of a watch's check (package watch's Outcomes): their series
// exist at zero from the start.
var watchOutcomes = []string{"unchanged", "changed", "partial", "failed"}

func newWatchMetrics() watchMetrics {
	w := watchMetrics{
		count: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aggregator_watches",
			Help: "Watches of the fleet (the same on every replica sharing a store: read it with max).",
		}),
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aggregator_watch_checks_total",
			Help: "Watch checks that ended, by outcome: unchanged, changed (a delivery was made), partial (a source did not succeed, nothing changed in the others), failed (no source succeeded).",
		}, []string{"outcome"}),
		changes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aggregator_watch_changes_total",
			Help: "Changes (infractions added, removed or changed) that watch checks delivered; a source's baseline is none.",
		}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "aggregator_watch_lag_seconds",
			Help:    "How late due watch checks started.",
			Buckets: []float64{.1, .5, 1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200},
		}),
	}
	for _, o := range watchOutcomes {
		w.checks.WithLabelValues(o)
	}
	return w
}

func (w watchMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{w.count, w.checks, w.changes, w.lag}
}

// WatchChecked counts a watch check that ended with outcome, and the
// changes it delivered.
func (m *Metrics) WatchChecked(outcome string, changes int) {
	m.watches.checks.WithLabelValues(outcome).Inc()
	m.watches.changes.Add(float64(changes))
}

// WatchLag records how late a due watch check started.
func (m *Metrics) WatchLag(d time.Duration) { m.watches.lag.Observe(d.Seconds()) }

// WatchCount sets the fleet's number of watches.
func (m *Metrics) WatchCount(n int) { m.watches.count.Set(float64(n)) }

// WatchStats are this replica's watch checks since it started, for the
// dashboard.
type WatchStats struct {
	// Checks counts the checks by outcome; Changes the changes delivered.
	Checks  map[string]int64
	Changes int64
	// Started is how many checks started; LagP50 and LagP95 how late,
	// interpolated within the histogram's buckets.
	Started        int64
	LagP50, LagP95 time.Duration
}

// WatchStats reads the watch metrics.
func (m *Metrics) WatchStats() WatchStats {
	s := WatchStats{Checks: map[string]int64{}}
	collect(m.watches.checks, func(labels map[string]string, pm *dto.Metric) {
		s.Checks[labels["outcome"]] = int64(pm.GetCounter().GetValue())
	})
	var pm dto.Metric
	if m.watches.changes.Write(&pm) == nil {
		s.Changes = int64(pm.GetCounter().GetValue())
	}
	pm.Reset()
	if m.watches.lag.Write(&pm) == nil {
		var h histogram
		h.add(pm.GetHistogram())
		s.Started = int64(h.count)
		s.LagP50, s.LagP95 = h.quantile(0.5), h.quantile(0.95)
	}
	return s
}

// add adds the counts of ph to h, whose buckets it takes on first use.
func (h *histogram) add(ph *dto.Histogram) {
	if h.bounds == nil {
		for _, b := range ph.GetBucket() {
			h.bounds = append(h.bounds, b.GetUpperBound())
		}
		h.bounds = append(h.bounds, math.Inf(1))
		h.cum = make([]float64, len(h.bounds))
	}
	for i, b := range ph.GetBucket() {
		if i < len(h.cum)-1 {
			h.cum[i] += float64(b.GetCumulativeCount())
		}
	}
	h.cum[len(h.cum)-1] += float64(ph.GetSampleCount())
	h.count += float64(ph.GetSampleCount())
}
