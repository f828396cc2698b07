package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/multas/aggregator/drift"
)

// The mapping health of SPEC 13: what every replica's lookups read, per
// source. The label values are configuration names (source ids, field
// names, errors rule indexes) and fixed vocabularies: never a value.

func (m *Metrics) newMappingHealth() {
	m.items = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aggregator_source_items_total",
		Help: "Items mapped from the portals' answers, by source.",
	}, []string{"source"})
	m.lookups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aggregator_source_lookups_total",
		Help: "Lookups whose answer was read, by source and result: items, empty (no infractions) or error (refused or unreadable).",
	}, []string{"source", "result"})
	m.unmapped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aggregator_source_unmapped_total",
		Help: "Items in which a configured field did not map, by source, field and reason (missing, invalid, unknown_status, suspect_text).",
	}, []string{"source", "field", "reason"})
	m.rules = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aggregator_source_errors_matched_total",
		Help: "Answers decided by a response.errors rule, by source and the rule's index.",
	}, []string{"source", "rule"})
	m.shapes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "aggregator_source_shape_changes_total",
		Help: "Answers whose items held structural names that the source's drift window had not seen, as this replica saw them.",
	}, []string{"source"})
}

// AddSource starts the mapping health series of a source at zero, so that
// they exist before its first lookup: its items, lookups by result and
// shape changes, and each of its errors rules (rules of them).
func (m *Metrics) AddSource(source string, rules int) {
	m.items.WithLabelValues(source)
	for _, r := range drift.Results {
		m.lookups.WithLabelValues(source, string(r))
	}
	m.shapes.WithLabelValues(source)
	for i := range rules {
		m.rules.WithLabelValues(source, strconv.Itoa(i))
	}
}

// SourceLookup counts one answer a lookup read (fanout.Options.Lookups).
func (m *Metrics) SourceLookup(l drift.Lookup) {
	m.lookups.WithLabelValues(l.Source, string(l.Result)).Inc()
	if l.Items > 0 {
		m.items.WithLabelValues(l.Source).Add(float64(l.Items))
	}
	l.Health.Unmapped(func(field, reason string, n int) {
		m.unmapped.WithLabelValues(l.Source, field, reason).Add(float64(n))
	})
	if rule, ok := l.Health.Rule(); ok {
		m.rules.WithLabelValues(l.Source, strconv.Itoa(rule)).Inc()
	}
}

// MappingChange counts a change the drift tracker noticed: a shape change
// in aggregator_source_shape_changes_total.
func (m *Metrics) MappingChange(c drift.Change) {
	if c.Reason == drift.Shape {
		m.shapes.WithLabelValues(c.Source).Inc()
	}
}
