// Package watch runs the watches of SPEC 15: a vehicle or a person checked
// every interval on behalf of an API key, whose changes (an infraction
// that appeared, one paid, one gone) are delivered by signed webhook.
//
// A check is a query of the watch's sources with the semantics of an
// asynchronous query (package async): a source that fails is retained and
// called again when its breaker lets calls through, until min(max_wait,
// interval). It runs at background priority: never more than the
// configured share of a source's rate budget (a second limiter, BudgetKey),
// and a source that is open or paused is waited for, not called. When the
// check ends, each source that succeeded is compared with the infractions
// last known for the watch; a difference, or a source read for the first
// time (its baseline), makes one delivery, handed to the async deliveries
// (signed with the owner's key, retried, held by the receiver's breaker,
// dead-lettered). A source that failed is never read as "its infractions
// were removed".
//
// Watches live in a Store: this process's (MemoryStore) or Redis's
// (RedisStore), shared by the fleet. Due checks are found by time (a
// schedule ordered by due time), claimed under a lease that another
// replica takes over when this one dies, and fenced by a token each claim
// renews: a replica whose lease was taken over writes nothing. Checks are
// at least once; the last known infractions are replaced only by a
// compare-and-set on their version, and a delivery's id and webhook-id
// derive from the watch and that version, so a check run twice sends one
// message that receivers can tell apart.
//
// Nothing is kept in clear that names a person or a vehicle: a watch's
// subject is sealed (and indexed by an HMAC, for erasure), and so are its
// infractions, with the memory's keys (SPEC 14), bound to the watch's id.
// Store keys hold generated ids and hashes only.
package watch

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/problem"
)

// The errors of the Manager, for errors.Is.
var (
	// ErrNotFound: no such watch, or another key's (the API answers 404
	// alike), or one whose stored value cannot be read.
	ErrNotFound = errors.New("watch: not found")
	// ErrLimit: the key already has as many watches as it may.
	ErrLimit = errors.New("watch: the API key's watch limit is reached")
)

// EventChanged is the type of a watch's delivery.
const EventChanged = "infractions.changed"

// The outcomes of a check (the outcome label of
// aggregator_watch_checks_total).
const (
	// OutcomeUnchanged: every source succeeded, nothing changed.
	OutcomeUnchanged = "unchanged"
	// OutcomeChanged: something changed (or a source was read for the
	// first time): a delivery was made.
	OutcomeChanged = "changed"
	// OutcomePartial: some sources did not succeed by the check's end, and
	// nothing changed in those that did.
	OutcomePartial = "partial"
	// OutcomeFailed: no source succeeded.
	OutcomeFailed = "failed"
)

// Outcomes lists the outcomes of a check.
var Outcomes = []string{OutcomeUnchanged, OutcomeChanged, OutcomePartial, OutcomeFailed}

// Watch is a watch as stored, without what is sealed.
type Watch struct {
	ID string `json:"id"`
	// Owner is the name of the API key that created the watch (the key
	// itself is never stored).
	Owner string `json:"owner"`
	// SubjectHash is the HMAC of the subject under the key current when
	// the watch was made: the index that erasure reads.
	SubjectHash string `json:"subject_hash"`
	// Sources are the sources asked for; empty means every source that
	// answers the subject, those configured later included.
	Sources     []string      `json:"sources,omitempty"`
	CallbackURL string        `json:"callback_url"`
	Interval    time.Duration `json:"interval"`
	CreatedAt   time.Time     `json:"created_at"`
	// NextCheckAt is when the next check is due: the first at a random
	// point of the first interval, each next one interval after.
	NextCheckAt time.Time `json:"next_check_at"`
	// LastCheckAt is when the last check ended.
	LastCheckAt *time.Time `json:"last_check_at,omitempty"`
	// Status is, per source, its last success and its last problem.
	Status []SourceStatus `json:"status,omitempty"`
	// Check is the check in progress, if any.
	Check *Check `json:"check,omitempty"`
}

// SourceStatus is what a watch's checks last heard of one source.
type SourceStatus struct {
	Source        string           `json:"source"`
	LastSuccessAt *time.Time       `json:"last_success_at,omitempty"`
	Problem       *problem.Problem `json:"problem,omitempty"`
}

// Check is a check in progress: its sources, each retained until it
// succeeds or the check ends.
type Check struct {
	// Due is when the check was due; Started when it started (its lag is
	// the difference).
	Due     time.Time `json:"due"`
	Started time.Time `json:"started"`
	// Until is when the check ends, whatever its sources: min(async
	// max_wait, interval) after it started, and never past the next
	// check's due time.
	Until time.Time `json:"until"`
	Parts []Part    `json:"parts"`
}

// Part is one source's share of a check.
type Part struct {
	Source string `json:"source"`
	// Done is set once the source succeeded (its infractions are held,
	// sealed, until the check ends).
	Done  bool `json:"done,omitempty"`
	Tries int  `json:"tries,omitempty"`
	// LastTry is when the source was last called; NextTry the earliest it
	// is called again, unless its breaker recovers before.
	LastTry time.Time `json:"last_try,omitzero"`
	NextTry time.Time `json:"next_try,omitzero"`
}

// Interval is a duration written as Go prints it ("24h0m0s").
type Interval time.Duration

// MarshalJSON implements json.Marshaler.
func (d Interval) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Subject is the vehicle or person a watch is about, as the API shows it.
type Subject struct {
	Domain string `json:"domain,omitempty"`
	ID     string `json:"id,omitempty"`
}

func subjectOf(q aggregator.Query) Subject { return Subject{Domain: q.Domain, ID: q.ID} }

// View is a watch as the API shows it.
type View struct {
	WatchID     string       `json:"watch_id"`
	Subject     Subject      `json:"subject"`
	Sources     []SourceView `json:"sources"`
	CallbackURL string       `json:"callback_url"`
	Interval    Interval     `json:"interval"`
	NextCheckAt time.Time    `json:"next_check_at"`
	CreatedAt   time.Time    `json:"created_at"`
	// LastCheckAt is when the last check ended; null before the first.
	LastCheckAt *time.Time `json:"last_check_at"`
}

// SourceView is one source of a watch: what its checks last heard of it.
type SourceView struct {
	Source       string `json:"source"`
	Jurisdiction string `json:"jurisdiction"`
	// LastSuccessAt is when a check last read the source; null before.
	LastSuccessAt *time.Time `json:"last_success_at"`
	// Problem is why the source's last call did not succeed; null when
	// it did.
	Problem *problem.Problem `json:"problem"`
}

// Event is the Standard Webhooks envelope of a watch's delivery.
type Event struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData is what changed for a watch, as its check found it.
type EventData struct {
	WatchID   string    `json:"watch_id"`
	Subject   Subject   `json:"subject"`
	CheckedAt time.Time `json:"checked_at"`
	// Baseline is true when every source the delivery reports on is read
	// for the first time (BaselineSources): its infractions are what is
	// there, not what is new.
	Baseline bool `json:"baseline"`
	// BaselineSources are the sources read for the first time for the
	// watch (or whose last known infractions could no longer be opened):
	// their infractions are all in Changes.Added.
	BaselineSources []string `json:"baseline_sources"`
	Changes         Changes  `json:"changes"`
}
