// Package memory remembers each source's last answer for a subject (SPEC
// 14), so that a fresh one spares the portal a call and a recent one can
// stand in, marked as such, for a source that failed or was skipped.
//
// Nothing is kept in clear. A subject (a plate or a person id) is known by
// its HMAC-SHA256 under a key derived from memory.key, and every value (the
// normalised infractions and when they were read) is sealed with
// AES-256-GCM under a key of its own, bound to its store key (Keys). The
// previous keys of a rotation open and hash, never seal: a lookup tries the
// current key's hash first, then the previous ones'.
//
// The values live in a Store: this process's bounded LRU (NewLRU), or Redis
// (store/redis), which the fleet shares. Entries of one subject share one
// Redis Cluster hash slot. Forgetting a subject drops its entries and
// changes its generation, which every write checks against the one read
// before its portal was called, so that a lookup in flight never writes a
// forgotten subject back. Forgetting a source changes the source's
// generation, part of every entry's name: its old entries are never read
// again, and expire.
//
// A value that cannot be opened or read (corrupt, sealed under another key
// or for another store key, of another version) is absent, never an error.
package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/multas/aggregator"
)

// Defaults of Options and of the memory block.
const (
	DefaultMaxEntries    = 100000
	DefaultMaxEntryBytes = 65536
	// DefaultHold is how long a forgotten subject's generation is kept,
	// and the longest a lookup may run and still write its answer: no
	// lookup in flight when a subject is forgotten writes it back.
	DefaultHold = 10 * time.Minute
)

// skew is how far ahead of this replica's clock another's may write an
// as_of; a time further ahead is garbage.
const skew = 5 * time.Minute

// Policy is how one source remembers (its remember block), and what
// identifies the configuration its answers were read with.
type Policy struct {
	// Fresh: an answer younger than this is served without calling the
	// portal. Stale: an answer at most this old may stand in for a
	// source that failed, when the request allows it. 0 is never.
	Fresh, Stale time.Duration
	// Fingerprint identifies the source's request and response
	// configuration: an answer read under another is never served.
	Fingerprint string
}

// Remembers reports whether the source's answers are kept at all.
func (p Policy) Remembers() bool { return p.Fresh > 0 || p.Stale > 0 }

// TTL is how long an answer is kept: max(fresh, stale).
func (p Policy) TTL() time.Duration { return max(p.Fresh, p.Stale) }

// Store keeps the sealed entries of subjects (hashes, never a plate or an
// id), each entry named within its subject. It is implemented by *LRU and
// by store/redis's MemoryStore. Its methods are safe for concurrent use.
type Store interface {
	// Get returns the values of subject's entries, in order (nil for one
	// it does not have, or whose stored value cannot be read), and
	// subject's generation: one round trip for all of a query's sources.
	Get(ctx context.Context, subject string, entries []string) (values [][]byte, gen string, err error)
	// Generation returns subject's generation, which changes each time
	// the subject is forgotten.
	Generation(ctx context.Context, subject string) (string, error)
	// Put keeps value as subject's entry for ttl, unless the subject's
	// generation is no longer gen; it reports whether it kept it.
	Put(ctx context.Context, subject, entry string, value []byte, gen string, ttl time.Duration) (bool, error)
	// Forget drops every entry of subject and changes its generation,
	// which stays changed for at least hold.
	Forget(ctx context.Context, subject string, hold time.Duration) error
	// SourceGeneration is source's generation, part of its entries' names.
	SourceGeneration(ctx context.Context, source string) (string, error)
	// ForgetSource changes source's generation: none of its entries is
	// read again.
	ForgetSource(ctx context.Context, source string) error
}

// Options configure a Memory; zero values are the documented defaults.
type Options struct {
	// Keys hash subjects and seal values; required.
	Keys *Keys
	// Store keeps the entries; an LRU of DefaultMaxEntries when nil.
	Store Store
	// MaxEntryBytes bounds a sealed entry: a larger answer is not kept.
	MaxEntryBytes int
	// Hold is DefaultHold when zero.
	Hold time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Memory remembers the sources' answers. A nil *Memory remembers nothing.
type Memory struct {
	keys  *Keys
	store Store
	opts  Options
}

// New returns a Memory over opts.Store.
func New(opts Options) (*Memory, error) {
	if opts.Keys == nil {
		return nil, errors.New("memory: Options.Keys is required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Store == nil {
		opts.Store = NewLRU(DefaultMaxEntries, opts.Now)
	}
	if opts.MaxEntryBytes <= 0 {
		opts.MaxEntryBytes = DefaultMaxEntryBytes
	}
	if opts.Hold <= 0 {
		opts.Hold = DefaultHold
	}
	return &Memory{keys: opts.Keys, store: opts.Store, opts: opts}, nil
}

// Keys are the memory's keys (watches seal with them too).
func (m *Memory) Keys() *Keys { return m.keys }

// Answer is a source's remembered answer to a subject.
type Answer struct {
	// AsOf is when the portal gave it.
	AsOf time.Time
	// Infractions are as the source normalised them then.
	Infractions []aggregator.Infraction
}

// Age is how old a is at now (never negative).
func (a Answer) Age(now time.Time) time.Duration { return max(now.Sub(a.AsOf), 0) }

// Ticket lets Keep write the answer of a lookup: it holds the subject's
// generation as it was before the portal was called. The zero Ticket
// writes nothing.
type Ticket struct {
	source  string
	policy  Policy
	subject string // hash under the current key
	entry   string
	gen     string
	began   time.Time
}

// Valid reports whether t may write.
func (t Ticket) Valid() bool { return t.subject != "" }

// Source is the source whose lookup t is.
func (t Ticket) Source() string { return t.source }

// subject names q's subject before hashing: its kind and its normalised
// value (a CUIT and a DNI never collide: their lengths differ).
func subject(q aggregator.Query) string {
	if q.Domain != "" {
		return "domain:" + q.Domain
	}
	return "id:" + q.ID
}

// entryName is the name of source's entry within a subject: the source,
// the operation, the configuration's fingerprint and the source's
// generation.
func entryName(source string, op aggregator.Operation, p Policy, gen string) string {
	fp := p.Fingerprint
	if fp == "" {
		fp = "0"
	}
	return source + ":" + string(op) + ":" + fp + ":" + gen
}

// associated is the associated data of an entry's value: its store key.
func associated(subject, entry string) []byte {
	return []byte("aggregator/memory/v1/" + subject + "/" + entry)
}

// begin starts a lookup of q in source: the entry's name and the ticket.
func (m *Memory) begin(ctx context.Context, source string, p Policy, q aggregator.Query) (Ticket, bool) {
	if m == nil || !p.Remembers() {
		return Ticket{}, false
	}
	sgen, err := m.store.SourceGeneration(ctx, source)
	if err != nil {
		return Ticket{}, false
	}
	return Ticket{
		source: source, policy: p, subject: m.keys.Hash(subject(q)),
		entry: entryName(source, q.Operation(), p, sgen), began: m.opts.Now(),
	}, true
}

// Want names one source's part of a RecallAll.
type Want struct {
	Source string
	Policy Policy
}

// Recalled is what RecallAll found for one Want: the answer when Found,
// and the ticket that lets Keep write the answer of a lookup that starts
// now (not valid when memory cannot be used for it).
type Recalled struct {
	Answer Answer
	Found  bool
	Ticket Ticket
}

// Recall is RecallAll for one source.
func (m *Memory) Recall(ctx context.Context, source string, p Policy, q aggregator.Query) (Answer, bool, Ticket) {
	r := m.RecallAll(ctx, q, []Want{{Source: source, Policy: p}})[0]
	return r.Answer, r.Found, r.Ticket
}

// RecallAll reads what each source of wants remembers of q, in one read
// of the store: the current key's entries, then, for those not found, the
// previous keys'.
func (m *Memory) RecallAll(ctx context.Context, q aggregator.Query, wants []Want) []Recalled {
	out := make([]Recalled, len(wants))
	var entries []string
	var idx []int
	for i, w := range wants {
		t, ok := m.begin(ctx, w.Source, w.Policy, q)
		if !ok {
			continue
		}
		out[i].Ticket = t
		entries = append(entries, t.entry)
		idx = append(idx, i)
	}
	if len(entries) == 0 {
		return out
	}
	for k, h := range m.keys.Hashes(subject(q)) {
		values, gen, err := m.store.Get(ctx, h, entries)
		if k == 0 {
			if err != nil {
				for _, i := range idx {
					out[i].Ticket = Ticket{} // no write on a generation unknown
				}
				return out
			}
			for _, i := range idx {
				out[i].Ticket.gen = gen
			}
		}
		if err != nil || len(values) != len(entries) {
			continue
		}
		var left []string
		var leftIdx []int
		for j, v := range values {
			i := idx[j]
			if v != nil {
				if a, ok := m.open(h, entries[j], wants[i].Source, v); ok {
					out[i].Answer, out[i].Found = a, true
					continue
				}
			}
			left, leftIdx = append(left, entries[j]), append(leftIdx, i)
		}
		if len(left) == 0 {
			break
		}
		entries, idx = left, leftIdx
	}
	return out
}

// Ticket is Recall's ticket without reading anything: for lookups that
// never use memory but write it (retained sources, watches).
func (m *Memory) Ticket(ctx context.Context, source string, p Policy, q aggregator.Query) Ticket {
	t, ok := m.begin(ctx, source, p, q)
	if !ok {
		return Ticket{}
	}
	gen, err := m.store.Generation(ctx, t.subject)
	if err != nil {
		return Ticket{}
	}
	t.gen = gen
	return t
}

// Keep remembers infractions as the answer of t's lookup, read now, unless
// the subject was forgotten since t was taken, t's lookup began longer
// than Hold ago, or the sealed value is larger than MaxEntryBytes. It
// reports whether it kept it.
func (m *Memory) Keep(ctx context.Context, t Ticket, infractions []aggregator.Infraction) (bool, error) {
	if m == nil || !t.Valid() {
		return false, nil
	}
	now := m.opts.Now()
	if now.Sub(t.began) >= m.opts.Hold {
		return false, nil
	}
	plain, err := encodeValue(now, infractions)
	if err != nil {
		return false, err
	}
	if len(plain)+Overhead > m.opts.MaxEntryBytes {
		return false, nil
	}
	sealed, err := m.keys.Seal(associated(t.subject, t.entry), plain)
	if err != nil {
		return false, err
	}
	return m.store.Put(ctx, t.subject, t.entry, sealed, t.gen, t.policy.TTL())
}

// Forget forgets q's subject in every source, under every key, and, for a
// person, under each of the ids they are known by (aggregator.PersonIDs).
func (m *Memory) Forget(ctx context.Context, q aggregator.Query) error {
	if m == nil {
		return nil
	}
	subjects := []aggregator.Query{q}
	if q.Domain == "" {
		subjects = subjects[:0]
		for _, id := range aggregator.PersonIDs(q.ID) {
			subjects = append(subjects, aggregator.Query{ID: id})
		}
	}
	// The first failure ends it: the store is unreachable, and the caller
	// says the erasure was not done (it may be asked again: forgetting
	// twice is forgetting once).
	for _, s := range subjects {
		for _, h := range m.keys.Hashes(subject(s)) {
			if err := m.store.Forget(ctx, h, m.opts.Hold); err != nil {
				return err
			}
		}
	}
	return nil
}

// ForgetSource forgets everything source remembered.
func (m *Memory) ForgetSource(ctx context.Context, source string) error {
	if m == nil {
		return nil
	}
	return m.store.ForgetSource(ctx, source)
}

// value is an entry's plaintext.
type value struct {
	AsOf        time.Time               `json:"as_of"`
	Infractions []aggregator.Infraction `json:"infractions"`
}

func encodeValue(asOf time.Time, infractions []aggregator.Infraction) ([]byte, error) {
	v := value{AsOf: asOf.UTC(), Infractions: make([]aggregator.Infraction, len(infractions))}
	for i, in := range infractions {
		in.Stale = false
		v.Infractions[i] = in
	}
	return json.Marshal(v)
}

// open opens and reads the value of source's entry under subject; ok is
// false when it cannot be opened or is not a value a replica writes.
func (m *Memory) open(subject, entry, source string, sealed []byte) (Answer, bool) {
	if len(sealed) > m.opts.MaxEntryBytes {
		return Answer{}, false
	}
	plain, err := m.keys.Open(associated(subject, entry), sealed)
	if err != nil {
		return Answer{}, false
	}
	return decodeValue(plain, source, m.opts.Now())
}

// decodeValue reads an opened value. It is strict, since a value another
// version of the product wrote may mean something else: unknown members,
// an as_of missing or ahead of now by more than the clocks' skew, an
// infraction of another source, without an id or with a status that is
// not one of the four, and the value is absent.
func decodeValue(plain []byte, source string, now time.Time) (Answer, bool) {
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.DisallowUnknownFields()
	var v value
	if dec.Decode(&v) != nil || dec.More() || v.AsOf.IsZero() || v.AsOf.After(now.Add(skew)) || v.Infractions == nil {
		return Answer{}, false
	}
	for _, in := range v.Infractions {
		if in.Source != source || strings.TrimSpace(in.ID) == "" || !in.Status.Valid() || in.Stale {
			return Answer{}, false
		}
	}
	return Answer(v), true
}

// The kinds of memory hit (the kind label of aggregator_memory_hits_total).
const (
	// HitFresh: a remembered answer was a source's entry, its portal not
	// called.
	HitFresh = "fresh"
	// HitStale: a remembered answer stood in for a source that failed or
	// was skipped.
	HitStale = "stale"
)
