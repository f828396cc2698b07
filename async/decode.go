package async

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/memory"
)

// The decoders of the values RedisStore reads back. Redis contents are
// untrusted (SPEC 9): another version, another replica or anyone with
// access may have written them. A value is accepted only when it decodes
// into what this package writes, with the id it is stored under, values
// within their ranges and times that can be written back (RFC 3339 years
// 0–9999); anything else is absent. What is accepted is safe to work on:
// its lookup is a valid plate or person id, its callback an absolute http
// or https URL, and encoding it again cannot fail.
//
// The trace context a value keeps is optional: a document without one
// (written before it was kept) is read as untraced, and one whose trace
// context is not exactly what this package writes is read without it
// (traceDropped, for the log): the work goes on, only its spans are not
// linked. A trace member of another JSON shape makes the document
// unreadable, like any other member of the wrong shape.

// Bounds of decoded values: far beyond what the package writes.
const (
	maxParts    = 1000
	maxAttempts = 1000
	maxText     = 4096
)

// decodeQuery decodes the document of query id.
func decodeQuery(doc []byte, id string) (_ *Query, ok, traceDropped bool) {
	var q Query
	if json.Unmarshal(doc, &q) != nil || !q.valid(id) {
		return nil, false, false
	}
	return &q, true, dropUnsound(&q.Trace)
}

// dropUnsound forgets *tc when it is not sound, and reports whether it did.
func dropUnsound(tc *TraceContext) bool {
	if tc.sound() {
		return false
	}
	*tc = TraceContext{}
	return true
}

func (q *Query) valid(id string) bool {
	if q.ID != id || !validID(id, "q_") || !validCallback(q.CallbackURL) {
		return false
	}
	switch q.Status {
	case Pending:
		if q.CompletedAt != nil {
			return false
		}
	case Completed, Expired:
		if q.CompletedAt == nil || !validTime(*q.CompletedAt) {
			return false
		}
	default:
		return false
	}
	if !validSigner(q.Signer) || !validLookup(q) || q.CreatedAt.IsZero() || !validTime(q.CreatedAt) || !validTime(q.ExpiresAt) || q.ExpiresAt.Before(q.CreatedAt) ||
		len(q.Parts) > maxParts {
		return false
	}
	op := q.Lookup().Operation()
	for i := range q.Parts {
		if !q.Parts[i].valid(op) {
			return false
		}
	}
	return true
}

// validLookup reports whether q holds one lookup, in the normalised form
// aggregator.NewQuery gives it.
func validLookup(q *Query) bool {
	switch {
	case q.Domain != "" && q.PersonID == "" && q.IDKind == "":
		d, err := aggregator.ParseDomain(q.Domain)
		return err == nil && d == q.Domain
	case q.Domain == "" && q.PersonID != "":
		v, kind, err := aggregator.ParseID(q.PersonID)
		return err == nil && v == q.PersonID && kind == q.IDKind
	}
	return false
}

func (p *Part) valid(op aggregator.Operation) bool {
	e := p.Entry
	switch e.Status {
	case aggregator.EntrySucceeded, aggregator.EntryFailed, aggregator.EntrySkipped:
	default:
		return false
	}
	if e.Source == "" || !validText(e.Source) || !validText(e.Jurisdiction) || e.Operation != op ||
		e.Count != nil && *e.Count < 0 || e.DurationMS != nil && *e.DurationMS < 0 ||
		e.Remembered != nil && (e.Remembered.AsOf.IsZero() || !validTime(e.Remembered.AsOf)) {
		return false
	}
	if pr := e.Problem; pr != nil {
		if pr.Status < 400 || pr.Status > 599 || pr.RetryAfter != nil && *pr.RetryAfter < 0 ||
			!validText(pr.Type) || !validText(pr.Title) || !validText(pr.Detail) || !validText(pr.Instance) {
			return false
		}
	}
	for _, in := range p.Infractions {
		if in.Source != e.Source || !in.Status.Valid() {
			return false
		}
	}
	return p.Tries >= 0 && validTime(p.LastTry) && validTime(p.NextTry) && validTime(p.Slot)
}

// decodeDelivery decodes delivery id.
func decodeDelivery(doc []byte, id string) (_ *Delivery, ok, traceDropped bool) {
	var d Delivery
	if json.Unmarshal(doc, &d) != nil || d.ID != id || !validID(id, "dlv_") || !validOwner(d.QueryID, d.WatchID, d.MessageID) ||
		!validSigner(d.Signer) || !validCallback(d.CallbackURL) || !validBody(d.Payload, d.Sealed) ||
		d.Attempts < 0 || d.Attempts > maxAttempts || len(d.LastError) > maxText || !utf8.ValidString(d.LastError) ||
		d.CreatedAt.IsZero() || !validTime(d.CreatedAt) || !validTime(d.Due) || !validTime(d.Slot) {
		return nil, false, false
	}
	return &d, true, dropUnsound(&d.Trace)
}

// decodeDLQ decodes DLQ entry id, as DeadLetter writes it.
func decodeDLQ(v []byte, id string) (_ DLQEntry, ok, traceDropped bool) {
	var r dlqRecord
	if json.Unmarshal(v, &r) != nil {
		return DLQEntry{}, false, false
	}
	e := r.Entry
	if e.ID != id || !validID(id, "dlv_") || !validOwner(e.QueryID, e.WatchID, "") || !validSigner(r.Signer) ||
		!validCallback(e.CallbackURL) ||
		!validBody(e.Payload, r.Sealed) || e.Attempts < 0 || e.Attempts > maxAttempts ||
		len(e.LastError) > maxText || !utf8.ValidString(e.LastError) ||
		!validTime(e.CreatedAt) || !validTime(e.FailedAt) || e.CreatedAt.IsZero() || e.FailedAt.IsZero() ||
		r.MessageID != "" && !validOwner(e.QueryID, e.WatchID, r.MessageID) {
		return DLQEntry{}, false, false
	}
	traceDropped = dropUnsound(&r.Trace)
	return r.entry(), true, traceDropped
}

// validCallback reports whether raw has the shape of an accepted
// callback_url (the address it reaches is checked when it is dialled).
func validCallback(raw string) bool {
	return guard{allowPrivate: true}.check(context.Background(), raw) == ""
}

// validOwner reports whether a delivery belongs to exactly one query
// (qid) or watch (wid), and, unless msg is "", whether msg has the shape
// of its webhook-id: "msg_" and the query id, or "msg_", the watch id, "_"
// and the version of the watch's last known infractions (WatchMessage).
func validOwner(qid, wid, msg string) bool {
	switch {
	case qid != "" && wid == "":
		q, ok := strings.CutPrefix(msg, "msg_")
		return validID(qid, "q_") && (msg == "" || ok && validID(q, "q_"))
	case qid == "" && wid != "":
		if !validID(wid, "w_") {
			return false
		}
		if msg == "" {
			return true
		}
		v, ok := strings.CutPrefix(msg, "msg_"+wid+"_")
		n, err := strconv.ParseInt(v, 10, 64)
		return ok && err == nil && n > 0 && strconv.FormatInt(n, 10) == v
	}
	return false
}

// validSigner reports whether s can name an API key.
func validSigner(s string) bool { return len(s) <= 256 && utf8.ValidString(s) }

// validBody reports whether a delivery's body is exactly one of a payload
// in clear and a sealed one (the memory's layout: at least its overhead).
func validBody(p json.RawMessage, sealed []byte) bool {
	if sealed == nil {
		return validPayload(p)
	}
	return (p == nil || string(bytes.TrimSpace(p)) == "null") && len(sealed) >= memory.Overhead && len(sealed) <= maxSealed
}

// maxSealed bounds a sealed payload.
const maxSealed = 16 << 20

// validPayload reports whether p is a JSON object (an event envelope).
func validPayload(p json.RawMessage) bool {
	p = bytes.TrimSpace(p)
	return len(p) > 0 && p[0] == '{' && json.Valid(p)
}

// validTime reports whether t can be encoded again (RFC 3339 years 0–9999).
func validTime(t time.Time) bool {
	y := t.Year()
	return y >= 0 && y <= 9999
}

func validText(s string) bool { return len(s) <= maxText && utf8.ValidString(s) }
