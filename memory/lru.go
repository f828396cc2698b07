package memory

import (
	"container/list"
	"context"
	"strconv"
	"sync"
	"time"
)

// LRU is the Store of a replica without a shared store: at most max
// entries in this process, the least recently used dropped first, each
// expiring after its ttl. Like every Store it holds subject hashes and
// sealed values only.
type LRU struct {
	max int
	now func() time.Time

	mu      sync.Mutex
	order   *list.List               // of *lruEntry, most recently used first
	entries map[lruKey]*list.Element // every entry
	// subjects indexes the entries by subject, so that Forget finds them.
	subjects map[string]map[string]*list.Element
	// gens holds the generations of forgotten subjects until their hold
	// ends; a subject without one has generation floor. Past max
	// generations, all are dropped and floor moves past them, which
	// changes every subject's generation at once (so no write of a lookup
	// in flight is let through by the drop).
	gens    map[string]lruGen
	counter uint64 // last generation given
	floor   uint64
	sources map[string]string
}

type lruKey struct{ subject, entry string }

type lruEntry struct {
	key     lruKey
	value   []byte
	expires time.Time
}

type lruGen struct {
	gen   uint64
	until time.Time
}

var _ Store = (*LRU)(nil)

// NewLRU returns an LRU of at most max entries (DefaultMaxEntries when
// not positive) on the clock now (time.Now when nil).
func NewLRU(max int, now func() time.Time) *LRU {
	if max <= 0 {
		max = DefaultMaxEntries
	}
	if now == nil {
		now = time.Now
	}
	return &LRU{
		max: max, now: now, order: list.New(), entries: map[lruKey]*list.Element{},
		subjects: map[string]map[string]*list.Element{}, gens: map[string]lruGen{}, sources: map[string]string{},
	}
}

// Len is the number of entries held (aggregator_memory_entries).
func (l *LRU) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.order.Len()
}

// Get implements Store.
func (l *LRU) Get(_ context.Context, subject string, entries []string) ([][]byte, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	values := make([][]byte, len(entries))
	for i, entry := range entries {
		el, ok := l.entries[lruKey{subject, entry}]
		if !ok {
			continue
		}
		if e := el.Value.(*lruEntry); now.Before(e.expires) {
			l.order.MoveToFront(el)
			values[i] = e.value
		} else {
			l.remove(el)
		}
	}
	return values, l.generation(subject), nil
}

// Generation implements Store.
func (l *LRU) Generation(_ context.Context, subject string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.generation(subject), nil
}

func (l *LRU) generation(subject string) string {
	g, ok := l.gens[subject]
	if !ok || !l.now().Before(g.until) {
		return strconv.FormatUint(l.floor, 10)
	}
	return strconv.FormatUint(g.gen, 10)
}

// Put implements Store.
func (l *LRU) Put(_ context.Context, subject, entry string, value []byte, gen string, ttl time.Duration) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if gen != l.generation(subject) || ttl <= 0 {
		return false, nil
	}
	k := lruKey{subject, entry}
	expires := l.now().Add(ttl)
	if el, ok := l.entries[k]; ok {
		e := el.Value.(*lruEntry)
		e.value, e.expires = value, expires
		l.order.MoveToFront(el)
		return true, nil
	}
	for l.order.Len() >= l.max {
		l.remove(l.order.Back())
	}
	el := l.order.PushFront(&lruEntry{key: k, value: value, expires: expires})
	l.entries[k] = el
	if l.subjects[subject] == nil {
		l.subjects[subject] = map[string]*list.Element{}
	}
	l.subjects[subject][entry] = el
	return true, nil
}

func (l *LRU) remove(el *list.Element) {
	e := l.order.Remove(el).(*lruEntry)
	delete(l.entries, e.key)
	if s := l.subjects[e.key.subject]; s != nil {
		delete(s, e.key.entry)
		if len(s) == 0 {
			delete(l.subjects, e.key.subject)
		}
	}
}

// Forget implements Store.
func (l *LRU) Forget(_ context.Context, subject string, hold time.Duration) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, el := range l.subjects[subject] {
		l.remove(el)
	}
	now := l.now()
	if len(l.gens) >= l.max {
		for s, g := range l.gens {
			if !now.Before(g.until) {
				delete(l.gens, s)
			}
		}
	}
	l.counter++
	if len(l.gens) >= l.max {
		clear(l.gens)
		l.floor = l.counter
		return nil
	}
	l.gens[subject] = lruGen{gen: l.counter, until: now.Add(hold)}
	return nil
}

// SourceGeneration implements Store.
func (l *LRU) SourceGeneration(_ context.Context, source string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g, ok := l.sources[source]; ok {
		return g, nil
	}
	return "0", nil
}

// ForgetSource implements Store. The source's entries are dropped at once,
// too: they would never be read again.
func (l *LRU) ForgetSource(_ context.Context, source string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counter++
	l.sources[source] = strconv.FormatUint(l.counter, 10)
	prefix := source + ":"
	for el := l.order.Front(); el != nil; {
		next := el.Next()
		if e := el.Value.(*lruEntry); len(e.key.entry) > len(prefix) && e.key.entry[:len(prefix)] == prefix {
			l.remove(el)
		}
		el = next
	}
	return nil
}
