// Package drift keeps each source's mapping health (SPEC 13): how many
// items its answers held, which configured fields did not map and why,
// which status texts status_map does not know, and the shape of its
// answers over a window; and it tells when a portal changed: an answer
// shaped in a way the window has not seen, or a share of items that do
// not map, or of lookups without items, rising above its threshold.
//
// It hears of every answer a lookup read (Tracker.Observe, from the
// fan-out) and reports each change to Options.Record, which records it as
// a `mapping` event. It keeps names and counts only: never a value, and
// never a status text shaped like a plate, a CUIT or a DNI.
package drift

import (
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/mapping"
)

// Result is what a lookup made of the portal's answer, as
// aggregator_source_lookups_total counts it.
type Result string

// The results of a lookup that read the portal's answer.
const (
	// Items: the answer held items.
	Items Result = "items"
	// Empty: it said there were none (a not_found marker, a 404, an empty
	// array).
	Empty Result = "empty"
	// Error: it could not be read, or an errors rule refused it.
	Error Result = "error"
)

// Results lists the results in a stable order.
var Results = []Result{Items, Empty, Error}

// Lookup is one answer that a lookup read from a portal. Calls that got
// no answer to read (a timeout, a refused connection, a 5xx or a 429
// that no errors rule matched) are not lookups here: they say nothing of
// the mapping.
type Lookup struct {
	Source    string
	Operation aggregator.Operation
	Result    Result
	// Items is the number of items mapped.
	Items int
	// Health is how the answer's items mapped: its errors rule, unmapped
	// fields, unknown status texts and shape.
	Health mapping.Health
}

// Defaults of Settings (SPEC 13, `defaults.drift`).
const (
	DefaultWindow        = time.Hour
	DefaultUnmappedRatio = 0.2
)

// Settings are one source's drift thresholds.
type Settings struct {
	// Window is how far back a source's shape and ratios look;
	// DefaultWindow when zero.
	Window time.Duration
	// UnmappedRatio is the share of items with a configured field
	// missing, invalid or of an unknown status above which a change is
	// recorded (1 never).
	UnmappedRatio float64
	// EmptyRatio is the share of lookups answered without any item (empty
	// or refused) above which a change is recorded; 0 is off.
	EmptyRatio float64
}

// Reason says what changed.
type Reason string

// The reasons of a change, the `reason` of its mapping event.
const (
	// Shape: an answer's items hold names the window has not seen.
	Shape Reason = "shape"
	// UnmappedRatio: the share of items that do not map rose above
	// drift.unmapped_ratio.
	UnmappedRatio Reason = "unmapped_ratio"
	// EmptyRatio: the share of lookups without items rose above
	// drift.empty_ratio.
	EmptyRatio Reason = "empty_ratio"
)

// Change is a portal's answers changing: what a mapping event says.
type Change struct {
	Time      time.Time
	Source    string
	Operation aggregator.Operation
	Reason    Reason
	// Added are the answer's names that the window had not seen; Removed
	// the window's names that the answer lacks (Shape only; at most
	// mapping.MaxNames each).
	Added, Removed []string
	// Unmapped counts the window's items by field and reason.
	Unmapped map[string]map[string]int
	// Ratio is the share that rose (ratio reasons), over Count items or
	// lookups in the window.
	Ratio float64
	Count int
	// Window is the source's drift window.
	Window time.Duration
}

// Options configure a Tracker.
type Options struct {
	// Now is the clock; time.Now when nil.
	Now func() time.Time
	// Record hears of every change, in the goroutine of the lookup that
	// brought it about, outside the tracker's locks; nil drops them.
	Record func(Change)
}

// Tracker keeps the mapping health of every source. It is safe for
// concurrent use.
type Tracker struct {
	opts Options

	mu      sync.RWMutex
	sources map[string]*source
}

// New returns a Tracker with no source configured.
func New(opts Options) *Tracker {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Tracker{opts: opts, sources: map[string]*source{}}
}

// Configure sets a source's settings (zero values being the defaults
// they document), keeping what was observed.
func (t *Tracker) Configure(id string, s Settings) {
	if s.Window <= 0 {
		s.Window = DefaultWindow
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	src := t.sources[id]
	if src == nil {
		t.sources[id] = newSource(s)
		return
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.settings.Window != s.Window {
		src.win = newCountRing(s.Window)
	}
	src.settings = s
}

// source returns id's state, created with the default settings when id
// was not configured.
func (t *Tracker) source(id string) *source {
	t.mu.RLock()
	src := t.sources[id]
	t.mu.RUnlock()
	if src != nil {
		return src
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if src = t.sources[id]; src == nil {
		src = newSource(Settings{Window: DefaultWindow, UnmappedRatio: DefaultUnmappedRatio})
		t.sources[id] = src
	}
	return src
}

// Observe takes one answer a lookup read, and records the changes it
// brings about.
func (t *Tracker) Observe(l Lookup) {
	src := t.source(l.Source)
	now := t.opts.Now()
	src.mu.Lock()
	changes := src.observe(now, l)
	src.mu.Unlock()
	if t.opts.Record == nil {
		return
	}
	for _, c := range changes {
		t.opts.Record(c)
	}
}

// reportSpan is how far back a Report looks.
const reportSpan = time.Hour

// Report is a source's mapping health over the last hour (GET
// /v1/admin/sources `mapping`).
type Report struct {
	// Items is the number of items mapped.
	Items int
	// Unmapped counts the items in which a configured field did not map,
	// by field and reason.
	Unmapped map[string]map[string]int
	// UnknownStatuses are the status texts that status_map did not know,
	// most frequent first.
	UnknownStatuses []StatusText
	// ShapeChangedAt is when an answer last changed the source's shape,
	// zero when none did within the hour.
	ShapeChangedAt time.Time
}

// StatusText is a status text that status_map does not know: the
// portal's words, at most MaxStatusText characters.
type StatusText struct {
	Text     string
	Count    int
	LastSeen time.Time
}

// Report returns source id's mapping health over the last hour.
func (t *Tracker) Report(id string) Report {
	now := t.opts.Now()
	t.mu.RLock()
	src := t.sources[id]
	t.mu.RUnlock()
	r := Report{Unmapped: map[string]map[string]int{}, UnknownStatuses: []StatusText{}}
	if src == nil {
		return r
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	c := src.hour.sum(now, true)
	r.Items = c.items
	r.Unmapped = c.unmappedMap()
	for text, st := range src.statuses {
		if n := st.counts.sum(now); n > 0 {
			r.UnknownStatuses = append(r.UnknownStatuses, StatusText{Text: text, Count: n, LastSeen: st.last})
		}
	}
	sort.Slice(r.UnknownStatuses, func(i, j int) bool {
		a, b := r.UnknownStatuses[i], r.UnknownStatuses[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		return a.Text < b.Text
	})
	if !src.shapeChangedAt.IsZero() && now.Sub(src.shapeChangedAt) < reportSpan {
		r.ShapeChangedAt = src.shapeChangedAt
	}
	return r
}

// Bounds of what a source keeps.
const (
	// MaxStatusTexts bounds the unknown status texts kept per source.
	MaxStatusTexts = 50
	// MaxStatusText bounds a status text kept, in characters.
	MaxStatusText = 60
	// maxShapes bounds the distinct shapes a window keeps; the oldest
	// makes room.
	maxShapes = 64
)

// source is one source's health.
type source struct {
	mu       sync.Mutex
	settings Settings
	// win counts over the drift window (ratios), hour over the last hour
	// (Report).
	win, hour *countRing
	shapes    map[uint64]*seenShape
	statuses  map[string]*seenStatus
	// The ratios' states: known once a first answer set them, above while
	// the share is over the threshold (a change is recorded only when it
	// rises above).
	unmapped, empty threshold
	// shapeChangedAt is the time of the last shape change.
	shapeChangedAt time.Time
}

type seenShape struct {
	shape *mapping.Shape
	last  time.Time
}

type seenStatus struct {
	counts *statusRing
	last   time.Time
}

type threshold struct{ known, above bool }

// cross moves t to the share r against limit, and reports whether it
// rose above it: the first share a window sees sets the state.
func (t *threshold) cross(r, limit float64) bool {
	above := r > limit
	rose := t.known && above && !t.above
	t.known, t.above = true, above
	return rose
}

func newSource(s Settings) *source {
	return &source{settings: s, win: newCountRing(s.Window), hour: newCountRing(reportSpan),
		shapes: map[uint64]*seenShape{}, statuses: map[string]*seenStatus{}}
}

// observe counts l and returns the changes it brings about; src.mu is
// held.
func (src *source) observe(now time.Time, l Lookup) []Change {
	var changes []Change
	s := src.settings
	h := &l.Health
	before := src.win.sum(now, false)
	if before.seen == 0 {
		src.unmapped.known = false // a window without items starts afresh
	}
	if before.lookups() == 0 {
		src.empty.known = false
	}
	c := counts{items: l.Items, seen: h.Seen(), affected: h.Affected()}
	c.results[resultIndex(l.Result)] = 1
	win, hour := src.win.at(now), src.hour.at(now)
	win.merge(&c, false)
	hour.merge(&c, false)
	h.Unmapped(func(field, reason string, n int) {
		win.addUnmapped(field, reason, n)
		hour.addUnmapped(field, reason, n)
	})

	if ch, ok := src.shape(now, h.Shape()); ok {
		changes = append(changes, ch)
	}
	sum := src.win.sum(now, false)
	if c.seen > 0 && sum.seen > 0 {
		r := float64(sum.affected) / float64(sum.seen)
		if src.unmapped.cross(r, s.UnmappedRatio) {
			changes = append(changes, Change{Reason: UnmappedRatio, Ratio: r, Count: sum.seen})
		}
	}
	if s.EmptyRatio > 0 && sum.lookups() > 0 {
		without := sum.results[resultIndex(Empty)] + sum.results[resultIndex(Error)]
		r := float64(without) / float64(sum.lookups())
		if src.empty.cross(r, s.EmptyRatio) {
			changes = append(changes, Change{Reason: EmptyRatio, Ratio: r, Count: sum.lookups()})
		}
	}
	h.UnknownStatuses(func(text string, n int) { src.status(now, text, n) })
	if len(changes) > 0 {
		all := src.win.sum(now, true)
		unmapped := all.unmappedMap()
		for i := range changes {
			ch := &changes[i]
			ch.Time, ch.Source, ch.Operation, ch.Window = now, l.Source, l.Operation, s.Window
			ch.Unmapped = unmapped
		}
	}
	return changes
}

// shape records an answer's shape, and reports a change when it holds
// names that the window's shapes do not.
func (src *source) shape(now time.Time, sh *mapping.Shape) (Change, bool) {
	window := src.settings.Window
	for sum, seen := range src.shapes {
		if now.Sub(seen.last) >= window {
			delete(src.shapes, sum)
		}
	}
	if sh == nil {
		return Change{}, false // answers without items do not count
	}
	if seen, ok := src.shapes[sh.Sum()]; ok {
		seen.last = now
		return Change{}, false
	}
	known := map[string]bool{}
	for _, seen := range src.shapes {
		for _, n := range seen.shape.Names() {
			known[n] = true
		}
	}
	first := len(src.shapes) == 0
	src.remember(now, sh)
	if first {
		return Change{}, false // a source's first answers set its shape
	}
	var added, removed []string
	names := sh.Names()
	for _, n := range names {
		if !known[n] {
			added = append(added, n)
		}
	}
	if len(added) == 0 {
		return Change{}, false // within the window's shape
	}
	for n := range known {
		if !sh.Has(n) {
			removed = append(removed, n)
		}
	}
	slices.Sort(removed)
	if len(removed) > mapping.MaxNames {
		removed = removed[:mapping.MaxNames]
	}
	src.shapeChangedAt = now
	return Change{Reason: Shape, Added: added, Removed: removed}, true
}

// remember keeps sh among the window's shapes, the oldest making room.
func (src *source) remember(now time.Time, sh *mapping.Shape) {
	if len(src.shapes) >= maxShapes {
		delete(src.shapes, leastRecent(src.shapes, func(s *seenShape) time.Time { return s.last }))
	}
	src.shapes[sh.Sum()] = &seenShape{shape: sh, last: now}
}

// status counts n items with an unknown status text, unless the text may
// be personal data.
func (src *source) status(now time.Time, raw string, n int) {
	text, ok := StatusWords(raw)
	if !ok {
		return
	}
	st := src.statuses[text]
	if st == nil {
		if len(src.statuses) >= MaxStatusTexts {
			delete(src.statuses, leastRecent(src.statuses, func(s *seenStatus) time.Time { return s.last }))
		}
		st = &seenStatus{counts: newStatusRing(reportSpan)}
		src.statuses[text] = st
	}
	st.counts.add(now, n)
	st.last = now
}

// leastRecent is the key of m whose value was seen least recently.
func leastRecent[K comparable, V any](m map[K]V, last func(V) time.Time) K {
	var oldest K
	var at time.Time
	for k, v := range m {
		if t := last(v); at.IsZero() || t.Before(at) {
			oldest, at = k, t
		}
	}
	return oldest
}

// StatusWords is a status text as it may be kept: without control and
// format characters, white space collapsed, at most MaxStatusText
// characters; ok is false for a text that holds something shaped like a
// plate, a CUIT or a DNI, or nothing.
func StatusWords(raw string) (text string, ok bool) {
	raw = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(raw, "\uFFFD"))
	raw = strings.Join(strings.Fields(raw), " ")
	if raw == "" || Personal(raw) {
		return "", false
	}
	if utf8.RuneCountInString(raw) > MaxStatusText {
		raw = string([]rune(raw)[:MaxStatusText])
	}
	return raw, true
}

// Personal reports whether text holds something shaped like a plate, a
// CUIT or a DNI: seven digits or more in a row (separators '.', '-', '/',
// '_' and spaces between them ignored), or one to three words that run
// together into an Argentine plate ("AB 123 CD", "abc-123").
func Personal(text string) bool {
	digits := 0
	for i := 0; i < len(text); i++ {
		switch c := text[i]; {
		case c >= '0' && c <= '9':
			if digits++; digits >= 7 {
				return true
			}
		case c == '.' || c == '-' || c == '/' || c == '_' || c == ' ':
		default:
			digits = 0
		}
	}
	words := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for i := range words {
		joined := ""
		for j := i; j < len(words) && j < i+3; j++ {
			joined += words[j]
			if _, err := aggregator.ParseDomain(joined); err == nil {
				return true
			}
		}
	}
	return false
}
