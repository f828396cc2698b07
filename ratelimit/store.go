package ratelimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Store holds the budgets and pauses of the Limiter, keyed by source, and
// makes every decision about one key atomically. MemoryStore is the
// in-process one; a store shared by replicas lets them share the budgets.
// Keys come only from the configured sources, so a store stays bounded.
type Store interface {
	// Reserve takes one token of key's budget for a call that goes at at
	// (now, or the end of a pause) if the token is due within maxWait of
	// at: it returns the wait from at until the call may go (0 = at) and
	// true. Otherwise it consumes nothing and returns the time from at until
	// a token would be due, and false. s is normalized: RPS > 0, Burst >= 1.
	Reserve(ctx context.Context, key string, s Settings, maxWait time.Duration, at time.Time) (wait time.Duration, ok bool, err error)
	// SetPause makes key paused until until; an existing pause that ends
	// later is kept (a pause only ever extends).
	SetPause(ctx context.Context, key string, until time.Time) error
	// PausedUntil returns the end of key's pause, or the zero time when it
	// has none or its pause ended by now.
	PausedUntil(ctx context.Context, key string, now time.Time) (time.Time, error)
}

// ReasonStore is a Store that also keeps why each key was paused, for the
// operators' views (SPEC 10: paused sources, until when, why). The
// Limiter writes the reason of the pause in force after SetPause.
type ReasonStore interface {
	// SetPauseReason records reason as why key is paused until until.
	SetPauseReason(ctx context.Context, key, reason string, until time.Time) error
	// PauseReason returns why key is paused, "" when it is not by now or
	// nobody said why.
	PauseReason(ctx context.Context, key string, now time.Time) (string, error)
}

var (
	_ Store       = (*MemoryStore)(nil)
	_ ReasonStore = (*MemoryStore)(nil)
)

// MemoryStore is the in-process Store: one token bucket and one pause per
// key. It is safe for concurrent use and holds one small entry per key it
// was given, which the Limiter keeps to its configured sources.
type MemoryStore struct {
	mu      sync.RWMutex
	entries map[string]*memoryEntry
}

type memoryEntry struct {
	bucket bucket
	pause  atomic.Int64 // end of the pause in Unix nanoseconds; 0 = none
	reason atomic.Pointer[pauseReason]
}

// pauseReason is why a pause that ends at until was set.
type pauseReason struct {
	text  string
	until int64 // Unix nanoseconds
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{entries: make(map[string]*memoryEntry)}
}

func (m *MemoryStore) lookup(key string) *memoryEntry {
	m.mu.RLock()
	e := m.entries[key]
	m.mu.RUnlock()
	return e
}

func (m *MemoryStore) entry(key string) *memoryEntry {
	if e := m.lookup(key); e != nil {
		return e
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		e = &memoryEntry{}
		m.entries[key] = e
	}
	return e
}

// Reserve implements Store.
func (m *MemoryStore) Reserve(_ context.Context, key string, s Settings, maxWait time.Duration, at time.Time) (time.Duration, bool, error) {
	if !(s.RPS > 0) {
		return 0, true, nil
	}
	wait, ok, _ := m.entry(key).bucket.take(at, s.RPS, max(s.Burst, 1), maxWait)
	return wait, ok, nil
}

// SetPause implements Store.
func (m *MemoryStore) SetPause(_ context.Context, key string, until time.Time) error {
	e := m.entry(key)
	n := until.UnixNano()
	for {
		cur := e.pause.Load()
		if n <= cur || e.pause.CompareAndSwap(cur, n) {
			return nil
		}
	}
}

// SetPauseReason implements ReasonStore: the reason of the pause that
// ends last is kept.
func (m *MemoryStore) SetPauseReason(_ context.Context, key, reason string, until time.Time) error {
	e := m.entry(key)
	next := &pauseReason{text: reason, until: until.UnixNano()}
	for {
		cur := e.reason.Load()
		if cur != nil && cur.until > next.until || e.reason.CompareAndSwap(cur, next) {
			return nil
		}
	}
}

// PauseReason implements ReasonStore.
func (m *MemoryStore) PauseReason(_ context.Context, key string, now time.Time) (string, error) {
	e := m.lookup(key)
	if e == nil {
		return "", nil
	}
	if r := e.reason.Load(); r != nil && r.until > now.UnixNano() {
		return r.text, nil
	}
	return "", nil
}

// PausedUntil implements Store.
func (m *MemoryStore) PausedUntil(_ context.Context, key string, now time.Time) (time.Time, error) {
	e := m.lookup(key)
	if e == nil {
		return time.Time{}, nil
	}
	n := e.pause.Load()
	if n == 0 || n <= now.UnixNano() {
		return time.Time{}, nil
	}
	return time.Unix(0, n).In(now.Location()), nil
}
