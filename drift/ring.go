package drift

import "time"

// buckets is how many buckets a ring divides its span in: counts over
// "the last hour" are over the last 59 to 60 minutes.
const buckets = 60

// ring counts over a sliding span of time, in buckets.
type ring[T any] struct {
	width time.Duration
	idx   [buckets]int64 // which bucket of time each slot holds, plus one (0: none)
	vals  [buckets]T
}

func newRing[T any](span time.Duration) *ring[T] {
	return &ring[T]{width: max(span/buckets, time.Nanosecond)}
}

func (r *ring[T]) index(now time.Time) int64 { return now.UnixNano() / int64(r.width) }

// at is the bucket of now, emptied when it held an older one.
func (r *ring[T]) at(now time.Time) *T {
	i := r.index(now)
	slot := int(i % buckets)
	if slot < 0 {
		slot += buckets
	}
	if r.idx[slot] != i+1 {
		var zero T
		r.idx[slot], r.vals[slot] = i+1, zero
	}
	return &r.vals[slot]
}

// each calls f on every bucket within the span before now.
func (r *ring[T]) each(now time.Time, f func(*T)) {
	i := r.index(now) + 1
	for slot := range buckets {
		if j := r.idx[slot]; j != 0 && j <= i && j > i-buckets {
			f(&r.vals[slot])
		}
	}
}

// counts are what a source's answers held, for one bucket of time.
type counts struct {
	// items mapped; seen: items read (mapped or refused); affected: those
	// with a configured field missing, invalid or of an unknown status.
	items, seen, affected int
	results               [3]int // by resultIndex
	unmapped              map[unmappedKey]int
}

type unmappedKey struct{ field, reason string }

func resultIndex(r Result) int {
	switch r {
	case Items:
		return 0
	case Empty:
		return 1
	}
	return 2
}

func (c *counts) lookups() int { return c.results[0] + c.results[1] + c.results[2] }

func (c *counts) addUnmapped(field, reason string, n int) {
	if c.unmapped == nil {
		c.unmapped = map[unmappedKey]int{}
	}
	c.unmapped[unmappedKey{field, reason}] += n
}

// merge adds o's counts to c, the unmapped ones too when unmapped.
func (c *counts) merge(o *counts, unmapped bool) {
	c.items += o.items
	c.seen += o.seen
	c.affected += o.affected
	for i, n := range o.results {
		c.results[i] += n
	}
	if !unmapped {
		return
	}
	for k, n := range o.unmapped {
		c.addUnmapped(k.field, k.reason, n)
	}
}

// unmappedMap is the unmapped counts by field, then reason.
func (c *counts) unmappedMap() map[string]map[string]int {
	out := map[string]map[string]int{}
	for k, n := range c.unmapped {
		if out[k.field] == nil {
			out[k.field] = map[string]int{}
		}
		out[k.field][k.reason] = n
	}
	return out
}

// countRing counts a source's answers.
type countRing struct{ ring[counts] }

func newCountRing(span time.Duration) *countRing { return &countRing{*newRing[counts](span)} }

// sum is the counts over the span, the unmapped ones too when unmapped
// (they cost a map).
func (r *countRing) sum(now time.Time, unmapped bool) counts {
	var out counts
	r.each(now, func(c *counts) { out.merge(c, unmapped) })
	return out
}

// statusRing counts the items of one status text.
type statusRing struct{ ring[int] }

func newStatusRing(span time.Duration) *statusRing { return &statusRing{*newRing[int](span)} }

func (r *statusRing) add(now time.Time, n int) { *r.at(now) += n }

func (r *statusRing) sum(now time.Time) int {
	out := 0
	r.each(now, func(n *int) { out += *n })
	return out
}
