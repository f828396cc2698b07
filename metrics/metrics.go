// Package metrics exposes the service's Prometheus metrics (SPEC 7). Every
// label value is bounded by configuration (source ids, breaker keys,
// operations, outcomes): never a plate or a person id.
package metrics

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
)

// Metrics records what the service does.
type Metrics struct {
	reg         *prometheus.Registry
	calls       *prometheus.CounterVec
	callSeconds *prometheus.HistogramVec
	queries     *prometheus.CounterVec
	querySecs   *prometheus.HistogramVec
	transitions *prometheus.CounterVec
	breakers    *breakerCollector
	httpReqs    *prometheus.CounterVec
	httpSecs    *prometheus.HistogramVec
	// Deliveries counts webhook deliveries by outcome.
	Deliveries *prometheus.CounterVec
	// DLQ is the number of entries in the dead letter queue.
	DLQ prometheus.Gauge
	// StoreDegraded is 1 while the shared store is unreachable.
	StoreDegraded prometheus.Gauge
	buildInfo     *prometheus.GaugeVec
	memoryHits    *prometheus.CounterVec
	// memoryEntries counts the entries held in this process.
	memoryEntries atomic.Pointer[func() int]
	// Mapping health (SPEC 13, mapping.go).
	items, lookups, unmapped, rules, shapes *prometheus.CounterVec
	watches                                 watchMetrics

	// created is when every count was zero; recent holds the snapshots
	// behind Recent.
	created time.Time
	recent  recent
}

// New registers every metric on a fresh registry, with the Go runtime and
// process collectors, and a collector that reads breakers at scrape time.
func New(breakers *breaker.Set) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		reg:      reg,
		created:  time.Now(),
		breakers: &breakerCollector{set: breakers},
		httpReqs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aggregator_http_requests_total",
			Help: "HTTP requests served, by route pattern, method and status code.",
		}, []string{"route", "method", "code"}),
		httpSecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aggregator_http_request_duration_seconds",
			Help:    "Duration of the HTTP requests served, by route pattern.",
			Buckets: []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2, 3, 5, 10},
		}, []string{"route"}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aggregator_source_calls_total",
			Help: "Source calls by source, operation and outcome (skipped calls included).",
		}, []string{"source", "operation", "outcome"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "aggregator_source_call_duration_seconds",
			Help: "Duration of the calls made to source portals.",
			// From 1 ms: a healthy portal nearby answers in a few, and the
			// dashboard's p50 interpolates within these buckets.
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2, 5, 10},
		}, []string{"source", "operation"}),
		queries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aggregator_queries_total",
			Help: "Queries by operation and outcome (complete, partial, unavailable, invalid).",
		}, []string{"operation", "outcome"}),
		querySecs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "aggregator_query_duration_seconds",
			Help:    "Duration of synchronous queries, fan-out included.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2, 3, 5, 10},
		}, []string{"operation"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aggregator_breaker_transitions_total",
			Help: "Breaker transitions by breaker, operation, from and to.",
		}, []string{"breaker", "operation", "from", "to"}),
		Deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aggregator_webhook_deliveries_total",
			Help: "Webhook delivery attempts by outcome.",
		}, []string{"outcome"}),
		DLQ: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aggregator_dlq_entries",
			Help: "Entries in the webhook dead letter queue.",
		}),
		StoreDegraded: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aggregator_store_degraded",
			Help: "1 while the shared state store is unreachable and local state is used.",
		}),
		buildInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aggregator_build_info",
			Help: "Always 1; its labels say which build is running.",
		}, []string{"version", "revision", "goversion"}),
	}
	m.memoryHits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aggregator_memory_hits_total",
		Help: "Remembered answers used instead of a portal's, by source and kind: fresh (the portal not called) or stale (standing in for a source that failed or was skipped).",
	}, []string{"source", "kind"})
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "aggregator_memory_entries",
		Help: "Remembered answers held in this process's memory (0 when Redis holds them).",
	}, func() float64 {
		if f := m.memoryEntries.Load(); f != nil {
			return float64((*f)())
		}
		return 0
	})
	m.newMappingHealth()
	reg.MustRegister(m.calls, m.callSeconds, m.queries, m.querySecs, m.transitions, m.Deliveries, m.DLQ, m.StoreDegraded,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.httpReqs, m.httpSecs, m.breakers, m.buildInfo, m.memoryHits, entries, m.items, m.lookups, m.unmapped, m.rules, m.shapes)
	m.watches = newWatchMetrics()
	reg.MustRegister(m.watches.collectors()...)
	m.SetBuildInfo(BuildInfo{})
	return m
}

// BuildInfo identifies the running build (SPEC 10, Build info).
type BuildInfo struct {
	// Version is the release ("devel" for a build that is not one).
	Version string
	// Revision is the VCS commit the binary was built from.
	Revision string
	// GoVersion is the Go toolchain that built it (runtime.Version()).
	GoVersion string
}

// SetBuildInfo exposes b as aggregator_build_info{version,revision,goversion} 1,
// in place of what was set before; an empty field is "unknown".
func (m *Metrics) SetBuildInfo(b BuildInfo) {
	orUnknown := func(s string) string {
		if s == "" {
			return "unknown"
		}
		return s
	}
	m.buildInfo.Reset()
	m.buildInfo.WithLabelValues(orUnknown(b.Version), orUnknown(b.Revision), orUnknown(b.GoVersion)).Set(1)
}

// Registry is where every metric of the service is registered.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format, or in
// OpenMetrics (with the trace_id exemplars of the latency histograms) to a
// scraper that asks for it. It
// reads every breaker before gathering, so that a transition which that
// read brings about (open to half-open once open_for has passed) is
// counted in the same scrape that shows the new state.
func (m *Metrics) Handler() http.Handler {
	h := promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.breakers.refresh(r.Context())
		h.ServeHTTP(w, r)
	})
}

// HTTPRequest records one request served. route is the route pattern
// (never the URL: paths and queries carry plates and ids). A method other
// than the eight of RFC 9110 and PATCH is counted as "other": a client may
// send any token as a method, and each would be a new series.
//
// ctx is the request's: its sampled span is the duration's exemplar.
func (m *Metrics) HTTPRequest(ctx context.Context, route, method string, code int, d time.Duration) {
	m.httpReqs.WithLabelValues(route, methodLabel(method), strconv.Itoa(code)).Inc()
	observe(ctx, m.httpSecs.WithLabelValues(route), d.Seconds())
}

// methodLabel bounds the method label to the standard methods.
func methodLabel(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return method
	}
	return "other"
}

// SourceCall implements fanout.Observer.
func (m *Metrics) SourceCall(source string, op aggregator.Operation, o aggregator.Outcome, d time.Duration) {
	m.SourceCallContext(context.Background(), source, op, o, d)
}

// SourceCallContext implements fanout.ContextObserver: ctx's sampled span
// is the duration's exemplar.
func (m *Metrics) SourceCallContext(ctx context.Context, source string, op aggregator.Operation, o aggregator.Outcome, d time.Duration) {
	m.calls.WithLabelValues(source, string(op), string(o)).Inc()
	if !o.Skipped() && d > 0 {
		observe(ctx, m.callSeconds.WithLabelValues(source, string(op)), d.Seconds())
	}
}

// MemoryHit implements fanout.MemoryObserver: source's entry came from
// memory (kind "fresh" or "stale"), and its portal was spared a call.
func (m *Metrics) MemoryHit(source, kind string) {
	m.memoryHits.WithLabelValues(source, kind).Inc()
}

// RemembersFor makes source's memory hits series exist at zero, so that
// they are there before the first hit.
func (m *Metrics) RemembersFor(source string, kinds ...string) {
	for _, k := range kinds {
		m.memoryHits.WithLabelValues(source, k)
	}
}

// CountMemoryEntries has aggregator_memory_entries read entries at every
// scrape.
func (m *Metrics) CountMemoryEntries(entries func() int) {
	m.memoryEntries.Store(&entries)
}

// observe records v in h, with the trace_id of ctx's span as exemplar when
// that span is sampled (SPEC 10, Correlation).
func observe(ctx context.Context, h prometheus.Observer, v float64) {
	if sc := trace.SpanContextFromContext(ctx); sc.IsSampled() {
		if eo, ok := h.(prometheus.ExemplarObserver); ok {
			eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
			return
		}
	}
	h.Observe(v)
}

// Query records one synchronous query; ctx is the request's, whose
// sampled span is the duration's exemplar.
func (m *Metrics) Query(ctx context.Context, op aggregator.Operation, outcome string, d time.Duration) {
	m.queries.WithLabelValues(string(op), outcome).Inc()
	if d > 0 {
		observe(ctx, m.querySecs.WithLabelValues(string(op)), d.Seconds())
	}
}

// Transition counts one breaker transition.
func (m *Metrics) Transition(e breaker.Event) {
	m.transitions.WithLabelValues(e.BreakerKey, string(e.Operation), string(e.From), string(e.To)).Inc()
}

// breakerCollector reads every breaker at scrape time, so open seconds grow
// while a breaker is open, not only at transitions.
type breakerCollector struct {
	set *breaker.Set
}

var (
	stateDesc = prometheus.NewDesc("aggregator_breaker_state",
		"Breaker state: 0 closed, 1 half-open, 2 open (forced or not).", []string{"breaker", "operation"}, nil)
	openDesc = prometheus.NewDesc("aggregator_breaker_open_seconds_total",
		"Cumulative time the breaker has spent open, current at every scrape.", []string{"breaker", "operation"}, nil)
)

// refresh reads every breaker, publishing the transitions that are due.
func (c *breakerCollector) refresh(ctx context.Context) {
	if c.set == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, id := range c.set.IDs() {
		_, _ = c.set.Status(ctx, id)
	}
}

func (c *breakerCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- stateDesc
	ch <- openDesc
}

func (c *breakerCollector) Collect(ch chan<- prometheus.Metric) {
	if c.set == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, id := range c.set.IDs() {
		st, err := c.set.Status(ctx, id)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(stateDesc, prometheus.GaugeValue, st.State.Gauge(), id.Key, string(id.Operation))
		ch <- prometheus.MustNewConstMetric(openDesc, prometheus.CounterValue, st.OpenTotal.Seconds(), id.Key, string(id.Operation))
	}
}
