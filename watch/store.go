package watch

import (
	"container/heap"
	"context"
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// Record is a watch as a Store keeps it: its document and its sealed
// parts.
type Record struct {
	Watch Watch
	// Subject is the sealed subject.
	Subject []byte
	// Held are the sealed infractions of the check in progress; nil when
	// none is.
	Held []byte
	// Known are the sealed last known infractions, and Version theirs: 0
	// (and nil) before the first.
	Known   []byte
	Version int64
	// Out is a sealed delivery a check decided on and that was not handed
	// over to the deliveries yet; nil when there is none.
	Out []byte
}

// Claim is a record claimed for work, under a lease, with the token that
// fences what its worker writes.
type Claim struct {
	Record
	Token int64
}

// Update is what a worker writes back.
type Update struct {
	Watch Watch
	// Held replaces the held infractions (nil: none).
	Held []byte
	// Due is when the watch is next looked at.
	Due time.Time
	// Known, when not nil, replaces the last known infractions, only if
	// their version is still Version-1 (compare-and-set); Out is then the
	// delivery of the new version (nil: none).
	Known   []byte
	Version int64
	Out     []byte
}

// Store keeps the watches. Each watch is scheduled by due time; Claim
// leases the due ones (hidden from other claims until the lease ends) and
// renews their token, which every write of the worker must present: a
// worker whose lease was taken over writes nothing.
type Store interface {
	// Create stores a new watch, due at due, unless its owner has
	// maxPerOwner watches already (ErrLimit).
	Create(ctx context.Context, r *Record, due time.Time, maxPerOwner int) error
	// Get returns watch id; ErrNotFound when there is none, or it cannot
	// be read.
	Get(ctx context.Context, id string) (*Record, error)
	// List returns up to n of owner's watches whose ids come after after
	// ("" from the first), in id order. Watches that cannot be read are
	// left out; more reports whether any id comes after the last listed.
	List(ctx context.Context, owner, after string, n int) (records []*Record, more bool, err error)
	// Delete forgets watch id entirely; ErrNotFound when there is none.
	Delete(ctx context.Context, id string) error
	// BySubject lists the ids of the watches whose subject hash is hash.
	BySubject(ctx context.Context, hash string) ([]string, error)
	// Count is the number of watches.
	Count(ctx context.Context) (int, error)
	// Claim leases up to max watches due at now until now+lease.
	Claim(ctx context.Context, now time.Time, lease time.Duration, max int) ([]*Claim, error)
	// Save writes u for watch id if token is still its token (and, with
	// u.Known, if the version matches); it reports whether it wrote.
	Save(ctx context.Context, id string, token int64, u *Update) (bool, error)
	// ClearOut forgets the delivery of version once handed over, and
	// schedules the watch at due, if token is still the watch's.
	ClearOut(ctx context.Context, id string, token, version int64, due time.Time) (bool, error)
	// NextDue is the earliest due time; ok is false when nothing is
	// scheduled.
	NextDue(ctx context.Context) (at time.Time, ok bool, err error)
}

// MemoryStore keeps the watches in this process: nothing survives a
// restart. Documents are kept encoded, as a shared store would, so that no
// caller shares memory with another; due watches are found on a heap.
type MemoryStore struct {
	mu      sync.Mutex
	records map[string]*memRecord
	owners  map[string]map[string]bool
	hashes  map[string]map[string]bool
	due     dueHeap
}

type memRecord struct {
	doc                       []byte
	subject, held, known, out []byte
	version, token            int64
	due                       *dueItem
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty in-process store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{records: make(map[string]*memRecord), owners: make(map[string]map[string]bool),
		hashes: make(map[string]map[string]bool)}
}

// Create implements Store.
func (s *MemoryStore) Create(_ context.Context, r *Record, due time.Time, maxPerOwner int) error {
	doc, err := json.Marshal(&r.Watch)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	w := &r.Watch
	if len(s.owners[w.Owner]) >= maxPerOwner {
		return ErrLimit
	}
	m := &memRecord{doc: doc, subject: slices.Clone(r.Subject)}
	m.due = &dueItem{id: w.ID, at: due}
	heap.Push(&s.due, m.due)
	s.records[w.ID] = m
	add(s.owners, w.Owner, w.ID)
	add(s.hashes, w.SubjectHash, w.ID)
	return nil
}

func add(index map[string]map[string]bool, k, id string) {
	if index[k] == nil {
		index[k] = make(map[string]bool)
	}
	index[k][id] = true
}

func remove(index map[string]map[string]bool, k, id string) {
	delete(index[k], id)
	if len(index[k]) == 0 {
		delete(index, k)
	}
}

// record decodes m, the record of id.
func (m *memRecord) record(id string) (*Record, bool) {
	w, ok := decodeWatch(m.doc, id)
	if !ok {
		return nil, false
	}
	return &Record{Watch: *w, Subject: slices.Clone(m.subject), Held: slices.Clone(m.held),
		Known: slices.Clone(m.known), Version: m.version, Out: slices.Clone(m.out)}, true
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, id string) (*Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.records[id]
	if !ok {
		return nil, ErrNotFound
	}
	r, ok := m.record(id)
	if !ok {
		return nil, ErrNotFound
	}
	return r, nil
}

// List implements Store.
func (s *MemoryStore) List(_ context.Context, owner, after string, n int) ([]*Record, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.owners[owner] {
		if id > after {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	more := len(ids) > n
	if more {
		ids = ids[:n]
	}
	out := make([]*Record, 0, len(ids))
	for _, id := range ids {
		if r, ok := s.records[id].record(id); ok {
			out = append(out, r)
		}
	}
	return out, more, nil
}

// Delete implements Store.
func (s *MemoryStore) Delete(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.records[id]
	if !ok {
		return ErrNotFound
	}
	var w Watch
	_ = json.Unmarshal(m.doc, &w) // written by Create and Save: it decodes
	delete(s.records, id)
	remove(s.owners, w.Owner, id)
	remove(s.hashes, w.SubjectHash, id)
	heap.Remove(&s.due, m.due.index)
	return nil
}

// BySubject implements Store.
func (s *MemoryStore) BySubject(_ context.Context, hash string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id := range s.hashes[hash] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// Count implements Store.
func (s *MemoryStore) Count(_ context.Context) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.records), nil
}

// Claim implements Store.
func (s *MemoryStore) Claim(_ context.Context, now time.Time, lease time.Duration, max int) ([]*Claim, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Claim
	for len(out) < max && s.due.Len() > 0 && !s.due[0].at.After(now) {
		it := s.due[0]
		it.at = now.Add(lease)
		heap.Fix(&s.due, 0)
		m := s.records[it.id]
		r, ok := m.record(it.id)
		if !ok {
			continue // unreadable: it stays, leased, and is skipped again
		}
		m.token++
		out = append(out, &Claim{Record: *r, Token: m.token})
	}
	return out, nil
}

// Save implements Store.
func (s *MemoryStore) Save(_ context.Context, id string, token int64, u *Update) (bool, error) {
	doc, err := json.Marshal(&u.Watch)
	if err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.records[id]
	if !ok || m.token != token || u.Known != nil && m.version != u.Version-1 {
		return false, nil
	}
	if u.Known != nil {
		m.known, m.version, m.out = slices.Clone(u.Known), u.Version, slices.Clone(u.Out)
	}
	m.doc, m.held = doc, slices.Clone(u.Held)
	m.due.at = u.Due
	heap.Fix(&s.due, m.due.index)
	return true, nil
}

// ClearOut implements Store.
func (s *MemoryStore) ClearOut(_ context.Context, id string, token, version int64, due time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.records[id]
	if !ok || m.token != token || m.version != version {
		return false, nil
	}
	m.out = nil
	m.due.at = due
	heap.Fix(&s.due, m.due.index)
	return true, nil
}

// NextDue implements Store.
func (s *MemoryStore) NextDue(_ context.Context) (time.Time, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.due.Len() == 0 {
		return time.Time{}, false, nil
	}
	return s.due[0].at, true, nil
}

// dueItem is one watch on the schedule.
type dueItem struct {
	id    string
	at    time.Time
	index int
}

// dueHeap orders the schedule by due time (container/heap).
type dueHeap []*dueItem

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *dueHeap) Push(x any) {
	it := x.(*dueItem)
	it.index = len(*h)
	*h = append(*h, it)
}
func (h *dueHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return it
}
