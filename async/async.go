// Package async runs asynchronous queries (SPEC 3.4): a query accepted now,
// whose skipped or failed sources are retained and tried again when their
// breakers let calls through, released at a bounded rate after a recovery,
// and whose result is delivered by webhook when every source succeeded or
// max_wait passed.
//
// Deliveries are signed per the Standard Webhooks convention, guarded by a
// breaker per callback origin (retained, not failed, while it is open),
// retried with exponential backoff, and moved to a dead letter queue after
// the last attempt: nothing is dropped silently.
//
// The work lives in a Store: in this process (MemoryStore, not durable) or
// in Redis (RedisStore), where accepted queries, pending deliveries and the
// DLQ survive a restart and work claimed by a replica that dies is taken over
// by another once its lease expires. Delivery is at least once: a duplicate
// carries the same webhook-id, so receivers can deduplicate.
//
// Stored values hold the query (plate or person id: it is needed to try the
// sources again) and its result; store keys never do.
//
// The deliveries of other work go the same way (Manager.Send): those of
// watches (SPEC 15) carry the watch's id instead of a query's, are indexed
// under it so that deleting the watch cancels them (Manager.CancelWatch),
// and keep their id when sent twice. Every delivery is signed with the
// secret of the API key that owns its work (Options.Secrets), else with
// webhooks.signing_secret.
package async

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/multas/aggregator"
)

// Status is the state of an asynchronous query.
type Status string

// The statuses of SPEC 3.4.
const (
	Pending   Status = "pending"
	Completed Status = "completed"
	Expired   Status = "expired"
)

// The event types of a delivery envelope.
const (
	EventCompleted = "query.completed"
	EventExpired   = "query.expired"
)

// The outcomes counted by Options.OnDelivery (the `outcome` label of
// aggregator_webhook_deliveries_total).
const (
	OutcomeDelivered    = "delivered"
	OutcomeFailed       = "failed"
	OutcomeRetained     = "retained"
	OutcomeDeadLettered = "dead_lettered"
)

// ErrNotFound is returned for an unknown query or DLQ entry.
var ErrNotFound = errors.New("async: not found")

// Query is an asynchronous query as stored: the lookup itself (needed to
// try its sources again), where to deliver it, and one part per source.
type Query struct {
	ID          string            `json:"id"`
	Status      Status            `json:"status"`
	Domain      string            `json:"domain,omitempty"`
	PersonID    string            `json:"person_id,omitempty"`
	IDKind      aggregator.IDKind `json:"id_kind,omitempty"`
	CallbackURL string            `json:"callback_url"`
	CreatedAt   time.Time         `json:"created_at"`
	ExpiresAt   time.Time         `json:"expires_at"`
	CompletedAt *time.Time        `json:"completed_at,omitempty"`
	// Parts are the sources of the query, in configured order.
	Parts []Part `json:"parts"`
	// Trace is the trace context of the request that created the query
	// (zero when it was not traced): its retained calls and its delivery
	// link to it.
	Trace TraceContext `json:"trace,omitzero"`
	// Signer is the name of the API key that created the query, whose
	// webhook secret signs its delivery; empty without API keys.
	Signer string `json:"signer,omitempty"`
}

// Part is one source's share of a query and its retention state.
type Part struct {
	Entry       aggregator.SourceResult `json:"entry"`
	Infractions []aggregator.Infraction `json:"infractions,omitempty"`
	// Tries counts the retention calls made after the first run.
	Tries int `json:"tries,omitempty"`
	// LastTry is when the source was last called (the first run included).
	LastTry time.Time `json:"last_try"`
	// NextTry is the earliest the source is called again, unless its
	// breaker recovers before.
	NextTry time.Time `json:"next_try"`
	// Slot is the release slot reserved for the next call, if any.
	Slot time.Time `json:"slot,omitzero"`
}

// Lookup is the query's validated lookup.
func (q *Query) Lookup() aggregator.Query {
	return aggregator.Query{Domain: q.Domain, ID: q.PersonID, IDKind: q.IDKind}
}

// Result assembles the document of SPEC 3.1 from the parts.
func (q *Query) Result() aggregator.Result {
	entries := make([]aggregator.SourceResult, len(q.Parts))
	var infractions []aggregator.Infraction
	for i, p := range q.Parts {
		entries[i] = p.Entry
		infractions = append(infractions, p.Infractions...)
	}
	return aggregator.NewResult(q.Lookup(), entries, infractions)
}

// done reports whether every source has succeeded.
func (q *Query) done() bool {
	for _, p := range q.Parts {
		if p.Entry.Status != aggregator.EntrySucceeded {
			return false
		}
	}
	return len(q.Parts) > 0
}

// View is a query as GET /v1/queries/{qid} shows it.
type View struct {
	ID          string            `json:"id"`
	Status      Status            `json:"status"`
	CreatedAt   time.Time         `json:"created_at"`
	ExpiresAt   time.Time         `json:"expires_at"`
	CompletedAt *time.Time        `json:"completed_at"`
	Result      aggregator.Result `json:"result"`
}

// View returns what the API shows of q.
func (q *Query) View() View {
	return View{ID: q.ID, Status: q.Status, CreatedAt: q.CreatedAt, ExpiresAt: q.ExpiresAt,
		CompletedAt: q.CompletedAt, Result: q.Result()}
}

// Event is the Standard Webhooks envelope of a delivery.
type Event struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData is the data member of an Event.
type EventData struct {
	ID     string            `json:"id"`
	Status Status            `json:"status"`
	Result aggregator.Result `json:"result"`
}

// Delivery is one webhook message on its way to a callback: of an
// asynchronous query (QueryID) or of a watch (WatchID), never both.
type Delivery struct {
	ID string `json:"id"`
	// MessageID is the webhook-id: the same on every attempt, and when the
	// message is redelivered from the DLQ.
	MessageID   string `json:"message_id"`
	QueryID     string `json:"query_id,omitempty"`
	WatchID     string `json:"watch_id,omitempty"`
	CallbackURL string `json:"callback_url"`
	// Signer names the API key whose webhook secret signs the message
	// (Options.Secrets); empty, or a key without one, means the default.
	Signer string `json:"signer,omitempty"`
	// Payload is the exact body sent on every attempt; nil when it is
	// kept Sealed.
	Payload json.RawMessage `json:"payload"`
	// Sealed is the payload sealed with Options.Keys (the memory's, SPEC
	// 14), for the deliveries of watches: what they report about a vehicle
	// or a person is never stored in clear. It is opened for each attempt.
	Sealed    []byte    `json:"sealed,omitempty"`
	Attempts  int       `json:"attempts"`
	LastError string    `json:"last_error,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	// Due is when the delivery is next looked at.
	Due time.Time `json:"due"`
	// Retained is set once the origin's breaker held the delivery back:
	// from then on it is released work, paced at release_rps.
	Retained bool `json:"retained,omitempty"`
	// Slot is the release slot reserved for the next attempt, if any.
	Slot time.Time `json:"slot,omitzero"`
	// Trace is the query's: each attempt links to the request that
	// created it.
	Trace TraceContext `json:"trace,omitzero"`
}

// DLQEntry is a delivery that failed its last attempt (SPEC 7): a query's
// (QueryID) or a watch's (WatchID, SPEC 15).
type DLQEntry struct {
	ID          string          `json:"id"`
	QueryID     string          `json:"query_id,omitempty"`
	WatchID     string          `json:"watch_id,omitempty"`
	CallbackURL string          `json:"callback_url"`
	Attempts    int             `json:"attempts"`
	LastError   string          `json:"last_error"`
	CreatedAt   time.Time       `json:"created_at"`
	FailedAt    time.Time       `json:"failed_at"`
	Payload     json.RawMessage `json:"payload"`
	// MessageID is the webhook-id a redelivery keeps.
	MessageID string `json:"-"`
	// Trace is the query's, which a redelivery keeps.
	Trace TraceContext `json:"-"`
	// Signer is the delivery's, which a redelivery keeps.
	Signer string `json:"-"`
	// Sealed is the delivery's sealed payload, which a redelivery keeps;
	// DLQ opens it into Payload for the operators.
	Sealed []byte `json:"-"`
}
