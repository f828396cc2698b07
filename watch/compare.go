package watch

import (
	"time"

	"github.com/multas/aggregator"
)

// Changes are what differs between two reads of a watch's sources (SPEC
// 15): infractions that appeared, that are gone, and that changed.
type Changes struct {
	Added   []aggregator.Infraction `json:"added"`
	Removed []aggregator.Infraction `json:"removed"`
	Changed []Change                `json:"changed"`
}

// Change is an infraction as it was and as it is.
type Change struct {
	Before aggregator.Infraction `json:"before"`
	After  aggregator.Infraction `json:"after"`
}

// Len is the number of changes.
func (c Changes) Len() int { return len(c.Added) + len(c.Removed) + len(c.Changed) }

// empty is Changes with no change, its lists empty rather than null.
func empty() Changes {
	return Changes{Added: []aggregator.Infraction{}, Removed: []aggregator.Infraction{}, Changed: []Change{}}
}

// add appends the changes of o to c.
func (c *Changes) add(o Changes) {
	c.Added = append(c.Added, o.Added...)
	c.Removed = append(c.Removed, o.Removed...)
	c.Changed = append(c.Changed, o.Changed...)
}

// key names an infraction: its source and its id.
type key struct{ source, id string }

// unique is in without the infractions that repeat an earlier one's
// (source, id): in one answer, the first wins. Infractions are kept as
// a portal's answer gives them, never marked stale.
func unique(in []aggregator.Infraction) []aggregator.Infraction {
	seen := make(map[key]bool, len(in))
	out := make([]aggregator.Infraction, 0, len(in))
	for _, inf := range in {
		k := key{inf.Source, inf.ID}
		if seen[k] {
			continue
		}
		seen[k] = true
		inf.Stale = false
		out = append(out, inf)
	}
	return out
}

// Diff compares a source's infractions as they were (before) and as they
// are (after), both as unique gives them: added in the order of after,
// removed in the order of before, changed in the order of after.
func Diff(before, after []aggregator.Infraction) Changes {
	c := empty()
	was := make(map[key]aggregator.Infraction, len(before))
	for _, inf := range before {
		was[key{inf.Source, inf.ID}] = inf
	}
	is := make(map[key]bool, len(after))
	for _, inf := range after {
		k := key{inf.Source, inf.ID}
		is[k] = true
		old, ok := was[k]
		switch {
		case !ok:
			c.Added = append(c.Added, inf)
		case differs(old, inf):
			c.Changed = append(c.Changed, Change{Before: old, After: inf})
		}
	}
	for _, inf := range before {
		if !is[key{inf.Source, inf.ID}] {
			c.Removed = append(c.Removed, inf)
		}
	}
	return c
}

// differs reports whether an infraction changed in what a watch reports
// (SPEC 15): its status, its amount and currency, its units, or its date
// compared as an instant (the same time written with another offset is
// no change). Its description, place or voucher link changing is none.
func differs(a, b aggregator.Infraction) bool {
	if a.Status != b.Status || a.Amount != b.Amount || a.Currency != b.Currency {
		return true
	}
	switch {
	case (a.Units == nil) != (b.Units == nil):
		return true
	case a.Units != nil && *a.Units != *b.Units:
		return true
	}
	return !sameInstant(a.Date, b.Date)
}

// sameInstant compares two dates as instants when both are RFC 3339, and
// as text otherwise.
func sameInstant(a, b string) bool {
	if a == b {
		return true
	}
	ta, errA := time.Parse(time.RFC3339Nano, a)
	tb, errB := time.Parse(time.RFC3339Nano, b)
	return errA == nil && errB == nil && ta.Equal(tb)
}
