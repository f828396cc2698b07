package watch

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/problem"
)

// What a watch keeps of its subject and of its infractions is sealed with
// the memory's keys (SPEC 14, 15), each value bound to the watch's id and
// to its part of the watch as associated data: a value copied to another
// watch, or to another part, does not open.
const (
	partSubject = "subject" // the plate or the person's id
	partKnown   = "known"   // the last known infractions, per source
	partHeld    = "held"    // the infractions of the check in progress
	partOut     = "out"     // a delivery not handed over yet
)

// associated is the associated data of part of watch id.
func associated(id, part string) []byte {
	return []byte("aggregator/watches/v1/" + id + "/" + part)
}

// errUnopenable is a sealed value that does not open, or does not decode
// into what this package seals.
var errUnopenable = errors.New("watch: sealed value unreadable")

// subject names q before sealing or hashing: its kind and its normalised
// value.
func subject(q aggregator.Query) string {
	if q.Domain != "" {
		return "domain:" + q.Domain
	}
	return "id:" + q.ID
}

// subjectHash is the HMAC that indexes the watches of q's subject (for
// erasure): under the current key, apart from the memory's own hashes.
func subjectHash(k *memory.Keys, q aggregator.Query) string { return k.Hash("watch/" + subject(q)) }

// subjectHashes are subjectHash under every key, current first.
func subjectHashes(k *memory.Keys, q aggregator.Query) []string {
	return k.Hashes("watch/" + subject(q))
}

func sealSubject(k *memory.Keys, id string, q aggregator.Query) ([]byte, error) {
	return k.Seal(associated(id, partSubject), []byte(subject(q)))
}

// openSubject opens the sealed subject of watch id: a lookup in the form
// aggregator.NewQuery gives it, or errUnopenable.
func openSubject(k *memory.Keys, id string, sealed []byte) (aggregator.Query, error) {
	plain, err := k.Open(associated(id, partSubject), sealed)
	if err != nil {
		return aggregator.Query{}, errUnopenable
	}
	kind, v, _ := strings.Cut(string(plain), ":")
	var q aggregator.Query
	var bad bool
	switch kind {
	case "domain":
		q, bad = parse(aggregator.NewQuery(v, "", true, false))
	case "id":
		q, bad = parse(aggregator.NewQuery("", v, false, true))
	default:
		bad = true
	}
	if bad || q.Value() != v {
		return aggregator.Query{}, errUnopenable
	}
	return q, nil
}

func parse(q aggregator.Query, bad []problem.InvalidParam) (aggregator.Query, bool) {
	return q, len(bad) > 0
}

// Infractions are infractions per source: the last known ones of a watch,
// or those its check in progress has read so far.
type Infractions map[string]Read

// Read is what one source answered.
type Read struct {
	AsOf        time.Time               `json:"as_of"`
	Infractions []aggregator.Infraction `json:"infractions"`
}

func sealInfractions(k *memory.Keys, id, part string, in Infractions) ([]byte, error) {
	plain, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	return k.Seal(associated(id, part), plain)
}

// openInfractions opens part of watch id, sealed by sealInfractions. It is
// strict, as what another version wrote may mean something else: unknown
// members, an infraction of another source, without an id or with a
// status that is not one of the four, and it is errUnopenable.
func openInfractions(k *memory.Keys, id, part string, sealed []byte) (Infractions, error) {
	plain, err := k.Open(associated(id, part), sealed)
	if err != nil {
		return nil, errUnopenable
	}
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.DisallowUnknownFields()
	var in Infractions
	if dec.Decode(&in) != nil || dec.More() || in == nil {
		return nil, errUnopenable
	}
	for source, r := range in {
		if !validText(source, maxName) || source == "" || r.AsOf.IsZero() || !validTime(r.AsOf) || r.Infractions == nil {
			return nil, errUnopenable
		}
		for _, inf := range r.Infractions {
			if inf.Source != source || strings.TrimSpace(inf.ID) == "" || !inf.Status.Valid() || inf.Stale {
				return nil, errUnopenable
			}
		}
	}
	return in, nil
}

// outbox is a delivery decided by a check and not yet handed over to the
// deliveries: sealed in the watch, so that a replica that dies in between
// leaves it to the next.
type outbox struct {
	Version int64           `json:"version"`
	Payload json.RawMessage `json:"payload"`
}

func sealOut(k *memory.Keys, id string, o outbox) ([]byte, error) {
	plain, err := json.Marshal(o)
	if err != nil {
		return nil, err
	}
	return k.Seal(associated(id, partOut), plain)
}

func openOut(k *memory.Keys, id string, sealed []byte) (outbox, error) {
	plain, err := k.Open(associated(id, partOut), sealed)
	if err != nil {
		return outbox{}, errUnopenable
	}
	var o outbox
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.DisallowUnknownFields()
	if dec.Decode(&o) != nil || dec.More() || o.Version < 1 || !json.Valid(o.Payload) {
		return outbox{}, errUnopenable
	}
	return o, nil
}
