// Package breaker holds one circuit breaker per (breaker_key, operation),
// decides what counts against a portal's capacity (SPEC 4.1), and reports
// every transition as an event.
//
// The state lives behind Store so that replicas can share it; the Set on
// top of it owns the settings, the clock, classification and events.
package breaker

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/multas/aggregator"
)

// ID names one breaker.
type ID struct {
	Key       string
	Operation aggregator.Operation
}

func (id ID) String() string { return id.Key + "/" + string(id.Operation) }

// State is a breaker's state as the admin API names it.
type State string

// The breaker states of SPEC 7.
const (
	Closed     State = "closed"
	HalfOpen   State = "half_open"
	Open       State = "open"
	ForcedOpen State = "forced_open"
)

// Gauge is the value of aggregator_breaker_state: 0 closed, 1 half-open,
// 2 open (forced or not).
func (s State) Gauge() float64 {
	switch s {
	case HalfOpen:
		return 1
	case Open, ForcedOpen:
		return 2
	}
	return 0
}

// Settings are the effective breaker settings of one breaker (SPEC 6).
type Settings struct {
	Window              time.Duration
	MinCalls            int
	FailureRatio        float64
	ConsecutiveFailures int
	OpenFor             time.Duration
	SlowCall            time.Duration
	FailureStatuses     []int

	// ProbeLease bounds how long a half-open probe holds the single probe
	// slot; past it, the next call may probe. It is not configured but
	// derived from the source's timeout and retries, so that a probe whose
	// caller vanished can never wedge the breaker.
	ProbeLease time.Duration
}

// Equal reports whether two settings are the same.
func (s Settings) Equal(o Settings) bool {
	return s.Window == o.Window && s.MinCalls == o.MinCalls && s.FailureRatio == o.FailureRatio &&
		s.ConsecutiveFailures == o.ConsecutiveFailures && s.OpenFor == o.OpenFor &&
		s.SlowCall == o.SlowCall && s.ProbeLease == o.ProbeLease &&
		slices.Equal(s.FailureStatuses, o.FailureStatuses)
}

func (s Settings) lease() time.Duration {
	if s.ProbeLease > 0 {
		return s.ProbeLease
	}
	return 30 * time.Second
}

// ErrOpen is matched (errors.Is) by every refusal of a breaker.
var ErrOpen = errors.New("circuit open")

// MaxRetryAfterFloor bounds how far a portal's Retry-After can push an
// open time past open_for: a portal cannot hold its breaker open for
// years (the Redis store's scripts apply the same bound).
const MaxRetryAfterFloor = 24 * time.Hour

// ErrUnknown is returned for a breaker that was never configured.
var ErrUnknown = errors.New("unknown breaker")

// OpenError is a breaker's refusal: the call must not go.
type OpenError struct {
	State State
	// RetryAfter is when the breaker may let a call through again.
	RetryAfter time.Duration
	// Probing is true when the refusal is because a probe is in flight.
	Probing bool
}

func (e *OpenError) Error() string {
	if e.Probing {
		return "circuit half-open: probe in flight"
	}
	return fmt.Sprintf("circuit %s: retry after %s", e.State, e.RetryAfter)
}

// Is makes errors.Is(err, ErrOpen) true.
func (e *OpenError) Is(target error) bool { return target == ErrOpen }

// Verdict is what a finished call means for the portal's capacity.
type Verdict int

// The three verdicts: a neutral call is not recorded at all.
const (
	Neutral Verdict = iota
	Success
	Failure
)

// Report describes a finished call, as the fan-out saw it.
type Report struct {
	Outcome aggregator.Outcome
	// Status is the portal's HTTP status, 0 when it did not answer.
	Status int
	// Elapsed is how long the call took.
	Elapsed time.Duration
	// RetryAfter is the portal's Retry-After, if its answer had one: the
	// floor of the open time if this call trips the breaker.
	RetryAfter time.Duration
}

// Classify applies SPEC 4.1: what counts as a failure, what never counts.
func Classify(r Report, s Settings) Verdict {
	switch r.Outcome {
	case aggregator.Succeeded:
		if s.SlowCall > 0 && r.Elapsed > s.SlowCall {
			return Failure
		}
		return Success
	case aggregator.Timeout:
		return Failure
	case aggregator.Unavailable:
		if r.Status == 0 || slices.Contains(s.FailureStatuses, r.Status) {
			return Failure
		}
	}
	// 4xx, 429, unreadable answers, calls cut by the caller's own deadline
	// and 5xx outside failure_statuses say nothing about capacity.
	return Neutral
}

// Evidence backs the reason of a transition; absent members do not apply.
type Evidence struct {
	Calls               int     `json:"calls,omitempty"`
	Failures            int     `json:"failures,omitempty"`
	Ratio               float64 `json:"ratio,omitempty"`
	WindowSeconds       float64 `json:"window_seconds,omitempty"`
	ConsecutiveFailures int     `json:"consecutive_failures,omitempty"`
	RetryAfter          float64 `json:"retry_after,omitempty"`
}

// KindStore marks a store event: a replica leaving shared state for its
// own (From "shared", To "local") or coming back, with no breaker key nor
// operation. Breaker transitions have no Kind.
const KindStore = "store"

// KindMapping marks a mapping event (SPEC 13): a source's answers
// changed. BreakerKey and Operation name the source's breaker key and the
// lookup's operation, From and To are empty, Reason is the drift reason
// (shape, unmapped_ratio, empty_ratio), and Source, Added, Removed and
// Unmapped say what changed: names and counts, never a value.
const KindMapping = "mapping"

// Event is one transition of one breaker, or of the shared store, or a
// change of a source's answers (Kind).
type Event struct {
	Time       time.Time            `json:"time"`
	BreakerKey string               `json:"breaker_key"`
	Operation  aggregator.Operation `json:"operation"`
	From       State                `json:"from"`
	To         State                `json:"to"`
	Reason     string               `json:"reason"`
	Evidence   Evidence             `json:"evidence"`
	Kind       string               `json:"kind,omitempty"`

	// Mapping events only (nil, and absent, on the others).
	Source   string                    `json:"source,omitempty"`
	Added    []string                  `json:"added,omitzero"`
	Removed  []string                  `json:"removed,omitzero"`
	Unmapped map[string]map[string]int `json:"unmapped,omitzero"`
}

// Status is a breaker's state as read at one instant.
type Status struct {
	State State
	Since time.Time
	// OpenUntil is when an open breaker turns half-open (zero otherwise).
	OpenUntil time.Time
	// OpenTotal is the cumulative time spent open or forced open, up to now.
	OpenTotal time.Duration
	// Calls and Failures are the recorded calls in the rolling window.
	Calls, Failures int
	Last            *Event
}

// Ratio is Failures/Calls, 0 without calls.
func (s Status) Ratio() float64 {
	if s.Calls == 0 {
		return 0
	}
	return float64(s.Failures) / float64(s.Calls)
}
