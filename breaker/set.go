package breaker

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// Options configure a Set. Zero values are sensible defaults.
type Options struct {
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Logger receives every transition as a structured line.
	Logger *slog.Logger
	// Events keeps transitions for the admin API; a 1000-event ring when nil.
	Events EventLog
	// OnTransition, when set, is called after each transition is recorded
	// (outside any lock), e.g. to count it in metrics.
	OnTransition func(Event)
	// OnStoreError, when set, hears of every error of the store. The Set
	// fails open: a call whose breaker cannot be read goes ahead.
	OnStoreError func(error)
}

// Set is every configured breaker, with its settings and the sources that
// share it. Breakers exist from Add on, before any traffic.
type Set struct {
	store Store
	opts  Options

	mu       sync.RWMutex
	ids      []ID
	settings map[ID]Settings
	sources  map[ID][]string
}

// NewSet returns a Set whose state lives in store.
func NewSet(store Store, opts Options) *Set {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Events == nil {
		r := NewRing(1000)
		r.began = opts.Now() // this process's log: nothing before it
		opts.Events = r
	}
	s := &Set{store: store, opts: opts, settings: make(map[ID]Settings), sources: make(map[ID][]string)}
	if n, ok := store.(Notifier); ok {
		n.Notify(s.publish)
	}
	return s
}

// Add declares breaker id, used by source, with its settings. Sources that
// share a breaker key call Add with the same id.
func (s *Set) Add(id ID, source string, settings Settings) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.settings[id]; !ok {
		s.ids = append(s.ids, id)
		sort.Slice(s.ids, func(i, j int) bool {
			if s.ids[i].Key != s.ids[j].Key {
				return s.ids[i].Key < s.ids[j].Key
			}
			return s.ids[i].Operation < s.ids[j].Operation
		})
	}
	s.settings[id] = settings
	s.sources[id] = append(s.sources[id], source)
}

// IDs lists every breaker, sorted by key then operation.
func (s *Set) IDs() []ID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]ID(nil), s.ids...)
}

// Sources lists the sources that share breaker id.
func (s *Set) Sources(id ID) []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return append([]string(nil), s.sources[id]...)
}

// Settings returns the effective settings of id.
func (s *Set) Settings(id ID) (Settings, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st, ok := s.settings[id]
	return st, ok
}

// SetSettings changes the settings of id from the next call on.
func (s *Set) SetSettings(id ID, settings Settings) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.settings[id]; !ok {
		return false
	}
	s.settings[id] = settings
	return true
}

// Events is the log of transitions.
func (s *Set) Events() EventLog { return s.opts.Events }

// Call is a permitted call in flight; Done must be called exactly once.
type Call struct {
	set    *Set
	id     ID
	permit Permit
	once   sync.Once
}

// Probe reports whether this call is the half-open probe.
func (c *Call) Probe() bool { return c.permit.Probe }

// Allow asks breaker id for a permit. A refusal is an *OpenError.
func (s *Set) Allow(ctx context.Context, id ID) (*Call, error) {
	st, ok := s.Settings(id)
	if !ok {
		return nil, ErrUnknown
	}
	p, events, err := s.store.Allow(ctx, id, st, s.opts.Now())
	s.publish(events)
	if err != nil {
		if _, refused := err.(*OpenError); refused {
			return nil, err
		}
		s.storeError(err)
		return &Call{set: s, id: id}, nil
	}
	return &Call{set: s, id: id, permit: p}, nil
}

// Done records how the call went, even when ctx has ended: the verdict is
// never lost to the caller's deadline.
func (c *Call) Done(ctx context.Context, r Report) {
	c.once.Do(func() {
		if c.permit.Token == nil {
			return // the store failed at Allow: nothing to record
		}
		st, _ := c.set.Settings(c.id)
		events, err := c.set.store.Done(ctx, c.id, c.permit, Classify(r, st), r, st, c.set.opts.Now())
		if err != nil {
			c.set.storeError(err)
		}
		c.set.publish(events)
	})
}

// Status reads breaker id now.
func (s *Set) Status(ctx context.Context, id ID) (Status, error) {
	st, ok := s.Settings(id)
	if !ok {
		return Status{}, ErrUnknown
	}
	status, events, err := s.store.Status(ctx, id, st, s.opts.Now())
	s.publish(events)
	return status, err
}

// Reset forces id closed, its counts cleared.
func (s *Set) Reset(ctx context.Context, id ID) error {
	return s.admin(ctx, id, s.store.Reset)
}

// ForceOpen forces id open until it is reset.
func (s *Set) ForceOpen(ctx context.Context, id ID) error {
	return s.admin(ctx, id, s.store.ForceOpen)
}

func (s *Set) admin(ctx context.Context, id ID, op func(context.Context, ID, Settings, time.Time) ([]Event, error)) error {
	st, ok := s.Settings(id)
	if !ok {
		return ErrUnknown
	}
	events, err := op(ctx, id, st, s.opts.Now())
	s.publish(events)
	return err
}

func (s *Set) storeError(err error) {
	if s.opts.OnStoreError != nil {
		s.opts.OnStoreError(err)
	}
}

func (s *Set) publish(events []Event) {
	for _, e := range events {
		s.opts.Events.Append(e)
		// The record carries the transition's own time.
		r := slog.NewRecord(e.Time, slog.LevelInfo, "breaker transition", 0)
		r.AddAttrs(
			slog.String("breaker_key", e.BreakerKey),
			slog.String("operation", string(e.Operation)),
			slog.String("from", string(e.From)),
			slog.String("to", string(e.To)),
			slog.String("reason", e.Reason),
			slog.Any("evidence", e.Evidence),
		)
		if h := s.opts.Logger.Handler(); h.Enabled(context.Background(), slog.LevelInfo) {
			_ = h.Handle(context.Background(), r)
		}
		if s.opts.OnTransition != nil {
			s.opts.OnTransition(e)
		}
	}
}
