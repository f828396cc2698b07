package async

import (
	"cmp"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// Store keeps the asynchronous work: queries, pending deliveries and the
// dead letter queue. Work is scheduled by due time and claimed with a
// lease: claimed work is hidden from other claims until the lease ends, so
// work claimed by a replica that died is claimed again by another.
type Store interface {
	// CreateQuery stores a new pending query, due for retention at due.
	CreateQuery(ctx context.Context, q *Query, due time.Time) error
	// Query returns a query; ErrNotFound when unknown or purged.
	Query(ctx context.Context, id string) (*Query, error)
	// SaveQuery updates a pending query and when it is next due. It
	// reports false, and changes nothing, when the query is no longer
	// pending.
	SaveQuery(ctx context.Context, q *Query, due time.Time) (bool, error)
	// FinishQuery records a completed or expired query, kept for keep,
	// takes it off the schedule and stores its delivery d, due at d.Due,
	// all at once. It reports false, and changes nothing, when the query
	// is no longer pending.
	FinishQuery(ctx context.Context, q *Query, d *Delivery, keep time.Duration) (bool, error)
	// ClaimQueries returns the ids of up to max pending queries due at
	// now, leased until now+lease.
	ClaimQueries(ctx context.Context, now time.Time, lease time.Duration, max int) ([]string, error)
	// ClaimDeliveries returns up to max deliveries due at now, leased
	// until now+lease.
	ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, max int) ([]*Delivery, error)
	// SaveDelivery stores d, due at d.Due. The delivery of a watch is
	// saved only while it is not cancelled (CancelWatch).
	SaveDelivery(ctx context.Context, d *Delivery) error
	// AddDelivery stores a new delivery d, due at d.Due, unless one with
	// its id is stored already (the same message sent again); it reports
	// whether it stored it. The delivery of a watch is indexed under it.
	AddDelivery(ctx context.Context, d *Delivery) (bool, error)
	// DeleteDelivery forgets a delivered delivery.
	DeleteDelivery(ctx context.Context, d *Delivery) error
	// DeadLetter replaces delivery d by the DLQ entry e, at once (unless d
	// is a watch's that was cancelled meanwhile).
	DeadLetter(ctx context.Context, d *Delivery, e DLQEntry) error
	// CancelWatch drops every delivery of watch id, pending or in the
	// DLQ, and reports how many it dropped.
	CancelWatch(ctx context.Context, id string) (int, error)
	// DLQ lists the dead letter queue, oldest failure first.
	DLQ(ctx context.Context) ([]DLQEntry, error)
	// DLQLen is the number of entries in the dead letter queue.
	DLQLen(ctx context.Context) (int, error)
	// Redeliver replaces DLQ entry id by the delivery fresh makes of it, at
	// once; ErrNotFound when there is no such entry.
	Redeliver(ctx context.Context, id string, fresh func(DLQEntry) *Delivery) error
	// DeleteDLQ drops DLQ entry id; ErrNotFound when there is none.
	DeleteDLQ(ctx context.Context, id string) error
	// NextDue is the earliest due time of any query or delivery; ok is
	// false when nothing is scheduled.
	NextDue(ctx context.Context) (at time.Time, ok bool, err error)
}

// MemoryStore keeps the work in this process: nothing survives a restart.
// Values are kept encoded, as a shared store would, so that no caller
// shares memory with another.
type MemoryStore struct {
	mu         sync.Mutex
	queries    map[string]memQuery
	queryDue   map[string]time.Time
	deliveries map[string][]byte
	deliverDue map[string]time.Time
	dlq        map[string]dlqRecord
	// watches indexes the deliveries of each watch, pending or in the DLQ.
	watches map[string]map[string]bool
}

type memQuery struct {
	doc     []byte
	pending bool
	// purge is when a finished query is forgotten.
	purge time.Time
}

// dlqRecord is a DLQ entry as stored, with the webhook-id and the trace
// context it keeps.
type dlqRecord struct {
	Entry     DLQEntry     `json:"entry"`
	MessageID string       `json:"message_id"`
	Trace     TraceContext `json:"trace,omitzero"`
	Signer    string       `json:"signer,omitempty"`
	Sealed    []byte       `json:"sealed,omitempty"`
}

// record is e as stored.
func (e DLQEntry) record() dlqRecord {
	r := dlqRecord{Entry: e, MessageID: e.MessageID, Trace: e.Trace, Signer: e.Signer, Sealed: e.Sealed}
	if e.Sealed != nil {
		r.Entry.Payload = nil // never stored in clear
	}
	return r
}

// entry is the DLQ entry r stores.
func (r dlqRecord) entry() DLQEntry {
	e := r.Entry
	e.MessageID, e.Trace, e.Signer, e.Sealed = r.MessageID, r.Trace, r.Signer, r.Sealed
	return e
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty in-process store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{
		queries: make(map[string]memQuery), queryDue: make(map[string]time.Time),
		deliveries: make(map[string][]byte), deliverDue: make(map[string]time.Time),
		dlq: make(map[string]dlqRecord), watches: make(map[string]map[string]bool),
	}
}

// CreateQuery implements Store.
func (s *MemoryStore) CreateQuery(_ context.Context, q *Query, due time.Time) error {
	doc, err := json.Marshal(q)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries[q.ID] = memQuery{doc: doc, pending: true}
	s.queryDue[q.ID] = due
	return nil
}

// Query implements Store.
func (s *MemoryStore) Query(_ context.Context, id string) (*Query, error) {
	s.mu.Lock()
	m, ok := s.queries[id]
	if ok && !m.pending && !time.Now().Before(m.purge) {
		delete(s.queries, id)
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
	}
	var q Query
	if err := json.Unmarshal(m.doc, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// SaveQuery implements Store.
func (s *MemoryStore) SaveQuery(_ context.Context, q *Query, due time.Time) (bool, error) {
	doc, err := json.Marshal(q)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.queries[q.ID]; !ok || !m.pending {
		return false, nil
	}
	s.queries[q.ID] = memQuery{doc: doc, pending: true}
	s.queryDue[q.ID] = due
	return true, nil
}

// FinishQuery implements Store.
func (s *MemoryStore) FinishQuery(_ context.Context, q *Query, d *Delivery, keep time.Duration) (bool, error) {
	doc, err := json.Marshal(q)
	if err != nil {
		return false, err
	}
	dd, err := json.Marshal(d)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m, ok := s.queries[q.ID]; !ok || !m.pending {
		return false, nil
	}
	// Purging runs on the wall clock: it is housekeeping, not behaviour.
	s.queries[q.ID] = memQuery{doc: doc, purge: time.Now().Add(keep)}
	delete(s.queryDue, q.ID)
	s.deliveries[d.ID] = dd
	s.deliverDue[d.ID] = d.Due
	s.purgeLocked()
	return true, nil
}

func (s *MemoryStore) purgeLocked() {
	now := time.Now()
	for id, m := range s.queries {
		if !m.pending && !now.Before(m.purge) {
			delete(s.queries, id)
		}
	}
}

// claim leases up to max ids of due that are due at now, earliest first.
func claim(due map[string]time.Time, now time.Time, lease time.Duration, max int) []string {
	var ids []string
	for id, at := range due {
		if !at.After(now) {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b string) int { return due[a].Compare(due[b]) })
	if len(ids) > max {
		ids = ids[:max]
	}
	for _, id := range ids {
		due[id] = now.Add(lease)
	}
	return ids
}

// ClaimQueries implements Store.
func (s *MemoryStore) ClaimQueries(_ context.Context, now time.Time, lease time.Duration, max int) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return claim(s.queryDue, now, lease, max), nil
}

// ClaimDeliveries implements Store.
func (s *MemoryStore) ClaimDeliveries(_ context.Context, now time.Time, lease time.Duration, max int) ([]*Delivery, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Delivery
	for _, id := range claim(s.deliverDue, now, lease, max) {
		var d Delivery
		if err := json.Unmarshal(s.deliveries[id], &d); err != nil {
			delete(s.deliverDue, id)
			continue
		}
		out = append(out, &d)
	}
	return out, nil
}

// SaveDelivery implements Store.
func (s *MemoryStore) SaveDelivery(_ context.Context, d *Delivery) error {
	dd, err := json.Marshal(d)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.WatchID != "" && !s.watches[d.WatchID][d.ID] {
		return nil // cancelled
	}
	s.deliveries[d.ID] = dd
	s.deliverDue[d.ID] = d.Due
	return nil
}

// AddDelivery implements Store.
func (s *MemoryStore) AddDelivery(_ context.Context, d *Delivery) (bool, error) {
	dd, err := json.Marshal(d)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.deliveries[d.ID]; ok {
		return false, nil
	}
	s.deliveries[d.ID] = dd
	s.deliverDue[d.ID] = d.Due
	s.index(d.WatchID, d.ID)
	return true, nil
}

// index records delivery id as one of watch wid's ("" is no watch).
func (s *MemoryStore) index(wid, id string) {
	if wid == "" {
		return
	}
	if s.watches[wid] == nil {
		s.watches[wid] = make(map[string]bool)
	}
	s.watches[wid][id] = true
}

// DeleteDelivery implements Store.
func (s *MemoryStore) DeleteDelivery(_ context.Context, d *Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.deliveries, d.ID)
	delete(s.deliverDue, d.ID)
	if d.WatchID != "" {
		delete(s.watches[d.WatchID], d.ID)
		if len(s.watches[d.WatchID]) == 0 {
			delete(s.watches, d.WatchID)
		}
	}
	return nil
}

// DeadLetter implements Store.
func (s *MemoryStore) DeadLetter(_ context.Context, d *Delivery, e DLQEntry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if d.WatchID != "" && !s.watches[d.WatchID][d.ID] {
		return nil // cancelled
	}
	delete(s.deliveries, d.ID)
	delete(s.deliverDue, d.ID)
	s.dlq[e.ID] = e.record()
	s.index(e.WatchID, e.ID)
	return nil
}

// CancelWatch implements Store.
func (s *MemoryStore) CancelWatch(_ context.Context, id string) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for did := range s.watches[id] {
		if _, ok := s.deliveries[did]; ok {
			n++
		}
		if _, ok := s.dlq[did]; ok {
			n++
		}
		delete(s.deliveries, did)
		delete(s.deliverDue, did)
		delete(s.dlq, did)
	}
	delete(s.watches, id)
	return n, nil
}

// DLQ implements Store.
func (s *MemoryStore) DLQ(_ context.Context) ([]DLQEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]DLQEntry, 0, len(s.dlq))
	for _, r := range s.dlq {
		out = append(out, r.entry())
	}
	sortDLQ(out)
	return out, nil
}

func sortDLQ(entries []DLQEntry) {
	slices.SortFunc(entries, func(a, b DLQEntry) int {
		if c := a.FailedAt.Compare(b.FailedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
}

// DLQLen implements Store.
func (s *MemoryStore) DLQLen(_ context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.dlq), nil
}

// Redeliver implements Store.
func (s *MemoryStore) Redeliver(_ context.Context, id string, fresh func(DLQEntry) *Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.dlq[id]
	if !ok {
		return ErrNotFound
	}
	d := fresh(r.entry())
	dd, err := json.Marshal(d)
	if err != nil {
		return err
	}
	delete(s.dlq, id)
	s.deliveries[d.ID] = dd
	s.deliverDue[d.ID] = d.Due
	s.index(d.WatchID, d.ID)
	return nil
}

// DeleteDLQ implements Store.
func (s *MemoryStore) DeleteDLQ(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.dlq[id]; !ok {
		return ErrNotFound
	}
	delete(s.dlq, id)
	return nil
}

// NextDue implements Store.
func (s *MemoryStore) NextDue(_ context.Context) (time.Time, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var next time.Time
	ok := false
	for _, m := range []map[string]time.Time{s.queryDue, s.deliverDue} {
		for _, at := range m {
			if !ok || at.Before(next) {
				next, ok = at, true
			}
		}
	}
	return next, ok, nil
}
