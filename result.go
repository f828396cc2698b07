package aggregator

import (
	"time"

	"github.com/multas/aggregator/problem"
)

// Infraction is one record found by one source, normalised (SPEC 3.1).
type Infraction struct {
	Source       string `json:"source"`
	Jurisdiction string `json:"jurisdiction"`
	ID           string `json:"id"`
	Date         string `json:"date,omitempty"`
	Description  string `json:"description,omitempty"`
	Place        string `json:"place,omitempty"`
	Amount       string `json:"amount,omitempty"`
	Currency     string `json:"currency,omitempty"`
	// Units is a fine stated in legal units (SPEC 12), never money.
	Units     *Units `json:"units,omitempty"`
	Status    Status `json:"status"`
	StatusRaw string `json:"status_raw,omitempty"`
	Voucher   string `json:"voucher,omitempty"`
	// Stale marks an infraction of a remembered answer standing in for a
	// source that failed or was skipped (SPEC 14).
	Stale bool `json:"stale,omitempty"`
}

// Units is an amount in legal units (Argentina's UF, Uruguay's UR,
// Mexico's UMA), which are not a currency: Value is a decimal string with
// two decimals, Code the unit.
type Units struct {
	Value string `json:"value"`
	Code  string `json:"code"`
}

// Status is the normalised payment status of an infraction.
type Status string

// The statuses of SPEC 3.1.
const (
	Unpaid    Status = "unpaid"
	Paid      Status = "paid"
	InProcess Status = "in_process"
	Unknown   Status = "unknown"
)

// Valid reports whether s is one of the normalised statuses.
func (s Status) Valid() bool {
	switch s {
	case Unpaid, Paid, InProcess, Unknown:
		return true
	}
	return false
}

// Outcome classifies what happened to one source call. The values are the
// `outcome` label of aggregator_source_calls_total.
type Outcome string

// The outcomes of SPEC 7.
const (
	Succeeded          Outcome = "succeeded"
	Timeout            Outcome = "timeout"
	Unavailable        Outcome = "unavailable"
	Rejected           Outcome = "rejected"
	Unreadable         Outcome = "error"
	RateLimited        Outcome = "rate_limited"
	SkippedOpen        Outcome = "skipped_open"
	SkippedRateLimited Outcome = "skipped_rate_limited"
	Deadline           Outcome = "deadline"
)

// Slug is the problem type that reports o to a client; empty for Succeeded.
func (o Outcome) Slug() problem.Slug {
	switch o {
	case Timeout:
		return problem.SourceTimeout
	case Unavailable:
		return problem.SourceUnavailable
	case Rejected:
		return problem.SourceRejected
	case Unreadable:
		return problem.SourceError
	case RateLimited, SkippedRateLimited:
		return problem.RateLimited
	case SkippedOpen:
		return problem.CircuitOpen
	case Deadline:
		return problem.DeadlineExceeded
	}
	return ""
}

// Skipped reports whether o means the source was not consulted at all.
func (o Outcome) Skipped() bool { return o == SkippedOpen || o == SkippedRateLimited }

// Entry statuses of SourceResult.Status.
const (
	EntrySucceeded = "succeeded"
	EntryFailed    = "failed"
	EntrySkipped   = "skipped"
)

// SourceResult is one source's part of an answer: the `sources[]` entry.
type SourceResult struct {
	Source       string           `json:"source"`
	Jurisdiction string           `json:"jurisdiction"`
	Operation    Operation        `json:"operation"`
	Status       string           `json:"status"`
	Count        *int             `json:"count,omitempty"`
	DurationMS   *int64           `json:"duration_ms,omitempty"`
	Problem      *problem.Problem `json:"problem,omitempty"`
	// Remembered is set when the entry's infractions come from the
	// source's remembered answer, not from its portal now (SPEC 14): a
	// fresh one on a succeeded entry, a stale one standing in on a failed
	// or skipped entry.
	Remembered *Remembered `json:"remembered,omitempty"`

	// Outcome is the classification behind Status, for metrics and logs.
	Outcome Outcome `json:"-"`
}

// Remembered says when a remembered answer was read from the portal.
type Remembered struct {
	AsOf time.Time `json:"as_of"`
}

// StoodIn reports whether e did not succeed and a remembered answer stands
// in for it.
func (e SourceResult) StoodIn() bool {
	return e.Remembered != nil && e.Status != EntrySucceeded
}

// Summary counts the sources of a query by entry status; Stale counts the
// failed or skipped entries a remembered answer stood in for.
type Summary struct {
	Total     int `json:"total"`
	Succeeded int `json:"succeeded"`
	Failed    int `json:"failed"`
	Skipped   int `json:"skipped"`
	Stale     int `json:"stale"`
}

// QueryEcho is the `query` member of a result: the normalised input.
type QueryEcho struct {
	Domain string `json:"domain,omitempty"`
	ID     string `json:"id,omitempty"`
}

// Result is the document of SPEC 3.1.
type Result struct {
	Query       QueryEcho      `json:"query"`
	Complete    bool           `json:"complete"`
	Summary     Summary        `json:"summary"`
	Infractions []Infraction   `json:"infractions"`
	Sources     []SourceResult `json:"sources"`
}

// NewResult assembles a Result from the per-source entries (in the order
// the sources are configured) and their infractions.
func NewResult(q Query, entries []SourceResult, infractions []Infraction) Result {
	r := Result{
		Query:       QueryEcho{Domain: q.Domain, ID: q.ID},
		Infractions: infractions,
		Sources:     entries,
	}
	if r.Infractions == nil {
		r.Infractions = []Infraction{}
	}
	if r.Sources == nil {
		r.Sources = []SourceResult{}
	}
	r.Summary.Total = len(entries)
	for _, e := range entries {
		switch e.Status {
		case EntrySucceeded:
			r.Summary.Succeeded++
		case EntryFailed:
			r.Summary.Failed++
		case EntrySkipped:
			r.Summary.Skipped++
		}
		if e.StoodIn() {
			r.Summary.Stale++
		}
	}
	r.Complete = r.Summary.Total > 0 && r.Summary.Succeeded == r.Summary.Total
	return r
}

// Answered reports whether r is worth a 200: at least one source succeeded
// or had a remembered answer stand in for it (SPEC 14); otherwise it is the
// 503 no-source-available.
func (r Result) Answered() bool {
	return r.Summary.Succeeded > 0 || r.Summary.Stale > 0
}
