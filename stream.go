package aggregator

import "github.com/multas/aggregator/problem"

// Part is one source's share of an answer: its sources[] entry and the
// infractions it found (or, standing in for it, the ones it remembered).
// A streamed answer sends each part as its source finishes (SPEC 14,
// Streaming).
type Part struct {
	SourceResult
	Infractions []Infraction `json:"infractions"`
}

// The types of the events of a streamed answer: the `type` member of each
// event's data, and the SSE event name.
const (
	EventSource  = "source"
	EventSummary = "summary"
)

// SourceEvent is one source's part as a stream sends it.
type SourceEvent struct {
	Type string `json:"type"` // EventSource
	Part
}

// SummaryEvent is the last event of a stream: the result's counts, which
// equal those of the JSON answer to the same query, and, when no source
// succeeded and none was stood in for, the no-source-available problem
// that the JSON answer would have been.
type SummaryEvent struct {
	Type     string           `json:"type"` // EventSummary
	Query    QueryEcho        `json:"query"`
	Complete bool             `json:"complete"`
	Summary  Summary          `json:"summary"`
	Problem  *problem.Problem `json:"problem,omitempty"`
}

// NewSummaryEvent is the summary of r, without a problem.
func NewSummaryEvent(r Result) SummaryEvent {
	return SummaryEvent{Type: EventSummary, Query: r.Query, Complete: r.Complete, Summary: r.Summary}
}
