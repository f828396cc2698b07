package watch

import (
	"context"
	"errors"
	"time"

	"github.com/multas/aggregator"
)

// Request is a validated watch to create (SPEC 15): the server has
// checked its subject, sources, callback and interval.
type Request struct {
	// Owner is the name of the API key that asks.
	Owner string
	Query aggregator.Query
	// Sources restricts the watch to these source ids; nil is every source
	// that answers the subject, now and later.
	Sources     []string
	CallbackURL string
	// Interval is how often the subject is checked; 0 is DefaultInterval.
	Interval time.Duration
}

// Page is one page of a key's watches.
type Page struct {
	Watches []View `json:"watches"`
	// NextCursor continues the listing; null on the last page.
	NextCursor *string `json:"next_cursor"`
}

// ErrCursor is a listing cursor that is not one a Page gave.
var ErrCursor = errors.New("watch: invalid cursor")

// Create stores a new watch whose first check is at a random point of its
// first interval, so that watches created together do not check together.
// It returns ErrLimit when the owner has MaxPerKey watches already.
func (m *Manager) Create(ctx context.Context, r Request) (View, error) {
	interval := r.Interval
	if interval <= 0 {
		interval = m.opts.DefaultInterval
	}
	now := m.clock.Now()
	w := Watch{
		ID: newID(now), Owner: r.Owner, SubjectHash: subjectHash(m.opts.Keys, r.Query),
		Sources: r.Sources, CallbackURL: r.CallbackURL, Interval: interval, CreatedAt: now,
	}
	w.NextCheckAt = now.Add(min(max(m.opts.Jitter(interval), 0), interval-1))
	sealed, err := sealSubject(m.opts.Keys, w.ID, r.Query)
	if err != nil {
		return View{}, err
	}
	if err := m.store.Create(ctx, &Record{Watch: w, Subject: sealed}, w.NextCheckAt, m.opts.MaxPerKey); err != nil {
		return View{}, err
	}
	m.opts.Logger.Info("watch created", "watch_id", w.ID, "owner", w.Owner, "interval", interval.String(),
		"next_check_at", w.NextCheckAt.Format(time.RFC3339))
	m.poke()
	return m.view(&w, r.Query), nil
}

// Get returns watch id of owner; ErrNotFound for another owner's.
func (m *Manager) Get(ctx context.Context, owner, id string) (View, error) {
	r, q, err := m.owned(ctx, owner, id)
	if err != nil {
		return View{}, err
	}
	return m.view(&r.Watch, q), nil
}

// owned reads watch id of owner, and its subject.
func (m *Manager) owned(ctx context.Context, owner, id string) (*Record, aggregator.Query, error) {
	if !ValidID(id) {
		return nil, aggregator.Query{}, ErrNotFound
	}
	r, err := m.store.Get(ctx, id)
	if err != nil {
		return nil, aggregator.Query{}, err
	}
	if r.Watch.Owner != owner {
		return nil, aggregator.Query{}, ErrNotFound
	}
	q, err := openSubject(m.opts.Keys, id, r.Subject)
	if err != nil {
		m.opts.Logger.Warn("watch subject cannot be opened (sealed under a key no longer configured, or corrupt): the watch is not shown", "watch_id", id)
		return nil, aggregator.Query{}, ErrNotFound
	}
	return r, q, nil
}

// List returns up to limit of owner's watches, in the order they were
// made, after cursor ("" from the first); ErrCursor for a cursor that is
// not one a Page gave.
func (m *Manager) List(ctx context.Context, owner, cursor string, limit int) (Page, error) {
	if cursor != "" && !ValidID(cursor) {
		return Page{}, ErrCursor
	}
	records, more, err := m.store.List(ctx, owner, cursor, limit)
	if err != nil {
		return Page{}, err
	}
	p := Page{Watches: make([]View, 0, len(records))}
	for _, r := range records {
		q, err := openSubject(m.opts.Keys, r.Watch.ID, r.Subject)
		if err != nil {
			m.opts.Logger.Warn("watch subject cannot be opened: the watch is not listed", "watch_id", r.Watch.ID)
			continue
		}
		p.Watches = append(p.Watches, m.view(&r.Watch, q))
	}
	if more && len(records) > 0 {
		next := records[len(records)-1].Watch.ID
		p.NextCursor = &next
	}
	return p, nil
}

// Delete forgets watch id of owner, and cancels its deliveries that have
// not gone; ErrNotFound for another owner's.
func (m *Manager) Delete(ctx context.Context, owner, id string) error {
	if !ValidID(id) {
		return ErrNotFound
	}
	r, err := m.store.Get(ctx, id)
	if err != nil {
		return err
	}
	if r.Watch.Owner != owner {
		return ErrNotFound
	}
	if err := m.drop(ctx, id); err != nil {
		return err
	}
	m.opts.Logger.Info("watch deleted", "watch_id", id, "owner", owner)
	return nil
}

// drop deletes watch id and cancels its deliveries: deleted first, so
// that a check ending meanwhile cannot write it back, and the check that
// hands a delivery over after it cancels that delivery itself.
func (m *Manager) drop(ctx context.Context, id string) error {
	if err := m.store.Delete(ctx, id); err != nil && !errors.Is(err, ErrNotFound) {
		return err
	}
	m.count(ctx)
	return m.opts.Deliveries.CancelWatch(ctx, id)
}

// Forget deletes every watch of q's subject, with its last known
// infractions and its deliveries not gone yet (SPEC 14's erasure): under
// every key, and, for a person, under each id they are known by.
func (m *Manager) Forget(ctx context.Context, q aggregator.Query) error {
	subjects := []aggregator.Query{q}
	if q.Domain == "" {
		subjects = subjects[:0]
		for _, id := range aggregator.PersonIDs(q.ID) {
			subjects = append(subjects, aggregator.Query{ID: id})
		}
	}
	n := 0
	for _, s := range subjects {
		for _, h := range subjectHashes(m.opts.Keys, s) {
			ids, err := m.store.BySubject(ctx, h)
			if err != nil {
				return err
			}
			for _, id := range ids {
				if err := m.drop(ctx, id); err != nil {
					return err
				}
				n++
			}
		}
	}
	if n > 0 {
		m.opts.Logger.Info("watches forgotten with their subject", "watches", n)
	}
	return nil
}

// view is what the API shows of w, whose subject is q.
func (m *Manager) view(w *Watch, q aggregator.Query) View {
	v := View{WatchID: w.ID, Subject: subjectOf(q), CallbackURL: w.CallbackURL, Interval: Interval(w.Interval),
		NextCheckAt: w.NextCheckAt, CreatedAt: w.CreatedAt, LastCheckAt: w.LastCheckAt, Sources: []SourceView{}}
	for _, mem := range m.selection(w, q) {
		sv := SourceView{Source: mem.Source.ID(), Jurisdiction: mem.Source.Jurisdiction()}
		if st := statusOf(w, sv.Source); st != nil {
			sv.LastSuccessAt, sv.Problem = st.LastSuccessAt, st.Problem
		}
		v.Sources = append(v.Sources, sv)
	}
	return v
}

// statusOf is w's status of source, nil when it has none.
func statusOf(w *Watch, source string) *SourceStatus {
	for i := range w.Status {
		if w.Status[i].Source == source {
			return &w.Status[i]
		}
	}
	return nil
}

// Stats is the fleet's watches as operators see them.
type Stats struct {
	// Watches is the number of watches.
	Watches int
	// Backlog is how long the oldest due check has waited to start; 0
	// when none is overdue.
	Backlog time.Duration
}

// Stats reads the fleet's number of watches and its backlog.
func (m *Manager) Stats(ctx context.Context) (Stats, error) {
	n, err := m.store.Count(ctx)
	if err != nil {
		return Stats{}, err
	}
	s := Stats{Watches: n}
	next, ok, err := m.store.NextDue(ctx)
	if err != nil {
		return Stats{}, err
	}
	if now := m.clock.Now(); ok && next.Before(now) {
		s.Backlog = now.Sub(next)
	}
	return s, nil
}
