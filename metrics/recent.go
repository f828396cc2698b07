package metrics

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// RecentWindow is how far back Recent looks: the dashboard's per-source
// latency and outcome rates (SPEC 10) are over the last five minutes.
const RecentWindow = 5 * time.Minute

// SampleEvery is how often Sample should be called (App does, in the
// background): Recent's window is RecentWindow to within it.
const SampleEvery = 10 * time.Second

// SourceRecent is what one source's calls did over the recent window, as
// this replica counted them (aggregator_source_calls_total and
// aggregator_source_call_duration_seconds, all operations together).
type SourceRecent struct {
	// Outcomes counts the calls by outcome (skipped ones included); only
	// outcomes that happened are present.
	Outcomes map[string]int64
	// Calls is the sum of Outcomes.
	Calls int64
	// Timed is how many calls reached the portal and were timed; P50 and
	// P95 are meaningful only when it is positive.
	Timed int64
	// P50 and P95 are latency quantiles, interpolated within the
	// histogram's buckets as Prometheus's histogram_quantile does.
	P50, P95 time.Duration
	// Remembered counts the answers taken from memory by kind (fresh,
	// stale; aggregator_memory_hits_total): fresh ones are no calls.
	Remembered map[string]int64
}

// Recent is every source's SourceRecent over Window.
type Recent struct {
	// Window is the time the figures cover: RecentWindow, or less while
	// the replica has not been up that long.
	Window  time.Duration
	Sources map[string]SourceRecent
}

// recent keeps snapshots of the source call metrics, so that Recent can
// tell what happened since one of them without touching the hot path.
type recent struct {
	mu      sync.Mutex
	samples []snapshot // oldest first
}

// snapshot is the cumulative source call counts at one instant.
type snapshot struct {
	at       time.Time
	outcomes map[[2]string]float64 // source, outcome
	hists    map[string]histogram  // source
	hits     map[[2]string]float64 // source, kind
}

type histogram struct {
	count  float64
	bounds []float64 // upper bounds, +Inf last
	cum    []float64 // cumulative counts per bound
}

// Sample takes a snapshot of the source call metrics at now and forgets
// those no longer needed for Recent.
func (m *Metrics) Sample(now time.Time) {
	s := m.snapshot(now)
	m.recent.mu.Lock()
	defer m.recent.mu.Unlock()
	m.recent.samples = append(m.recent.samples, s)
	// Keep the newest sample at least RecentWindow old, and all after it.
	keep := 0
	for i, old := range m.recent.samples {
		if now.Sub(old.at) >= RecentWindow {
			keep = i
		}
	}
	m.recent.samples = slices.Delete(m.recent.samples, 0, keep)
}

// Recent reports what every source's calls did between the newest sample
// at least RecentWindow old (the oldest one while there is none, and the
// metrics' creation, when they were all zero, before any) and now.
func (m *Metrics) Recent(now time.Time) Recent {
	cur := m.snapshot(now)
	m.recent.mu.Lock()
	base := snapshot{at: m.created} // every count was zero then
	for _, s := range m.recent.samples {
		if now.Sub(s.at) >= RecentWindow {
			base = s
		}
	}
	m.recent.mu.Unlock()

	out := Recent{Window: max(now.Sub(base.at), 0), Sources: map[string]SourceRecent{}}
	for k, v := range cur.outcomes {
		n := int64(math.Round(v - base.outcomes[k]))
		if n <= 0 {
			continue
		}
		sr := out.Sources[k[0]]
		if sr.Outcomes == nil {
			sr.Outcomes = map[string]int64{}
		}
		sr.Outcomes[k[1]] += n
		sr.Calls += n
		out.Sources[k[0]] = sr
	}
	for k, v := range cur.hits {
		n := int64(math.Round(v - base.hits[k]))
		if n <= 0 {
			continue
		}
		sr := out.Sources[k[0]]
		if sr.Remembered == nil {
			sr.Remembered = map[string]int64{}
		}
		sr.Remembered[k[1]] += n
		out.Sources[k[0]] = sr
	}
	for source, h := range cur.hists {
		d := h.minus(base.hists[source])
		if d.count < 1 {
			continue
		}
		sr := out.Sources[source]
		sr.Timed = int64(math.Round(d.count))
		sr.P50, sr.P95 = d.quantile(0.5), d.quantile(0.95)
		out.Sources[source] = sr
	}
	return out
}

// snapshot reads the source call metrics, summed over operations.
func (m *Metrics) snapshot(now time.Time) snapshot {
	s := snapshot{at: now, outcomes: map[[2]string]float64{}, hists: map[string]histogram{}, hits: map[[2]string]float64{}}
	collect(m.memoryHits, func(labels map[string]string, pm *dto.Metric) {
		s.hits[[2]string{labels["source"], labels["kind"]}] += pm.GetCounter().GetValue()
	})
	collect(m.calls, func(labels map[string]string, pm *dto.Metric) {
		s.outcomes[[2]string{labels["source"], labels["outcome"]}] += pm.GetCounter().GetValue()
	})
	collect(m.callSeconds, func(labels map[string]string, pm *dto.Metric) {
		h := s.hists[labels["source"]]
		h.add(pm.GetHistogram())
		s.hists[labels["source"]] = h
	})
	return s
}

// collect hands every series of c to f with its labels.
func collect(c prometheus.Collector, f func(map[string]string, *dto.Metric)) {
	ch := make(chan prometheus.Metric, 64)
	go func() {
		c.Collect(ch)
		close(ch)
	}()
	for metric := range ch {
		var pm dto.Metric
		if metric.Write(&pm) != nil {
			continue
		}
		labels := make(map[string]string, len(pm.GetLabel()))
		for _, l := range pm.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		f(labels, &pm)
	}
}

// minus is h's counts since base (same buckets; a missing base is zero).
func (h histogram) minus(base histogram) histogram {
	out := histogram{count: h.count - base.count, bounds: h.bounds, cum: slices.Clone(h.cum)}
	if len(base.cum) == len(h.cum) {
		for i := range out.cum {
			out.cum[i] -= base.cum[i]
		}
	}
	return out
}

// quantile estimates the q-quantile by linear interpolation within the
// bucket that holds it; in the +Inf bucket, the highest finite bound.
func (h histogram) quantile(q float64) time.Duration {
	if h.count <= 0 || len(h.bounds) < 2 {
		return 0
	}
	rank := q * h.count
	lower, below := 0.0, 0.0
	for i, upper := range h.bounds {
		if h.cum[i] >= rank {
			if math.IsInf(upper, 1) {
				return seconds(h.bounds[len(h.bounds)-2])
			}
			in := h.cum[i] - below
			if in <= 0 {
				return seconds(upper)
			}
			return seconds(lower + (upper-lower)*(rank-below)/in)
		}
		lower, below = upper, h.cum[i]
	}
	return seconds(h.bounds[len(h.bounds)-2])
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
