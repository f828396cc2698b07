package mapping

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/html"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/document"
	"github.com/multas/aggregator/sources/normalize"
)

// Answer is one answer of a portal to a lookup.
type Answer struct {
	Status      int
	Body        []byte
	ContentType string
}

// Subject is the query an answer is read for: match compares items with
// it.
type Subject struct {
	Op aggregator.Operation
	// Value is the query's normalised plate or id.
	Value string
}

// Page is what Read made of an answer.
type Page struct {
	// Infractions are the answer's, in its order, those match dropped
	// excepted.
	Infractions []aggregator.Infraction
	// NotFound is true when the answer said "no infractions" (not_found,
	// or an errors rule with outcome not_found).
	NotFound bool
	// Items is how many items the answer held, before match; Dropped how
	// many match dropped.
	Items, Dropped int
	// Doc is the answer as received, parsed; nil when it was not needed
	// (a JSON answer read in place) or could not be parsed.
	Doc *document.Document
	// Health says how the answer's items mapped (SPEC 13).
	Health Health
}

// Health counts, for one answer, what SPEC 13's mapping health is made of.
type Health struct {
	// Mapped is the number of items mapped.
	Mapped int
	// rule is the index+1 of the errors rule that decided the answer, 0
	// for none.
	rule int
	// unmapped counts the items in which a configured field did not map,
	// by field and reason; affected counts the items in which any field
	// was missing, invalid or of an unknown status.
	unmapped [numFields][numReasons]int
	affected int
	// seen counts the items whose fields were read: those mapped, and
	// the one that made the answer unreadable.
	seen int
	// unknown holds the status texts that status_map did not know, with
	// how many items had each (at most maxUnknownTexts per answer).
	unknown []StatusCount
	// shape is the answer's (shape.go); nil without items.
	shape *Shape
}

// StatusCount is a status text that status_map does not know, and how
// many items had it. The text is the portal's, as mapped: it may be
// anything a portal writes.
type StatusCount struct {
	Text string
	N    int
}

// maxUnknownTexts bounds the unknown status texts a Health keeps.
const maxUnknownTexts = 8

// Shape is the structural names of the answer's items (of every page of
// a lookup); nil when it had none.
func (h *Health) Shape() *Shape { return h.shape }

// Affected is the number of items in which some configured field was
// missing, invalid or of an unknown status (SPEC 13 drift.unmapped_ratio).
func (h *Health) Affected() int { return h.affected }

// Seen is the number of items whose fields were read: those mapped, and
// one that did not normalise (which makes the answer unreadable).
func (h *Health) Seen() int { return h.seen }

// UnknownStatuses calls yield for each status text that status_map did
// not know (at most a few per answer), with how many items had it.
func (h *Health) UnknownStatuses(yield func(text string, n int)) {
	for _, u := range h.unknown {
		yield(u.Text, u.N)
	}
}

// addUnknown counts one item whose status text is not in status_map.
func (h *Health) addUnknown(text string, n int) {
	for i := range h.unknown {
		if h.unknown[i].Text == text {
			h.unknown[i].N += n
			return
		}
	}
	if len(h.unknown) < maxUnknownTexts {
		h.unknown = append(h.unknown, StatusCount{Text: text, N: n})
	}
}

// Rule is the index of the errors rule that decided the answer; ok is
// false when none did.
func (h *Health) Rule() (index int, ok bool) { return h.rule - 1, h.rule > 0 }

// Unmapped calls yield for every (field, reason) with a count, in field
// order.
func (h *Health) Unmapped(yield func(field, reason string, n int)) {
	for f := range numFields {
		for r := range numReasons {
			if n := h.unmapped[f][r]; n > 0 {
				yield(f.String(), r.String(), n)
			}
		}
	}
}

// ErrNoRule is what Read says of an answer that is not 2xx and that no
// errors rule decided: its status decides (a 404 is no infractions).
var ErrNoRule = errors.New("no errors rule matched: the status decides")

// ErrMaintenance is a 2xx answer that response.unavailable recognised.
var ErrMaintenance = errors.New("the answer is a maintenance page (response.unavailable matched)")

// RuleError is an answer that an errors rule decided to be a failure.
type RuleError struct {
	// Rule is the rule's index in `errors`.
	Rule int
	// Outcome is the rule's: rejected, unavailable, error or
	// rate_limited.
	Outcome Outcome
	// Detail is the text the rule's detail selector found, made plain
	// (at most 200 characters): for the client's problem only, never for
	// logs, events, traces or metrics.
	Detail string
	// RetryAfter is the pause of a rate_limited outcome.
	RetryAfter time.Duration
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("the answer matched errors[%d] (outcome %s)", e.Rule, e.Outcome)
}

// NeedsBody reports whether an answer with status must be read whole for
// Read: every 2xx answer, and every answer when errors rules exist.
func (m *Mapping) NeedsBody(status int) bool {
	return status >= 200 && status < 300 || len(m.rules) > 0
}

// Format is the format of the answers as received.
func (m *Mapping) Format() document.Format { return m.format }

// Charset is the configured charset (zero when none).
func (m *Mapping) Charset() document.Charset { return m.charset }

// Namespaces are the configured XPath prefixes.
func (m *Mapping) Namespaces() map[string]string { return m.namespaces }

// MaxItems is the most items a lookup maps.
func (m *Mapping) MaxItems() int { return m.maxItems }

// Read maps an answer. A 2xx answer gives its page (or an error: it
// cannot be read, ErrMaintenance, a *RuleError); any other answer gives
// a *RuleError, a page (an errors rule with outcome not_found), or
// ErrNoRule. Work stops when ctx ends: the error then wraps ctx's.
func (m *Mapping) Read(ctx context.Context, a Answer, s Subject) (Page, error) {
	r := run{m: m, ctx: ctx, subj: s}
	err := r.read(a)
	if r.fastPath {
		r.page.Health.shape = r.fast.shape(m.shapes, r.page.Items > 0)
	} else {
		r.page.Health.shape = r.names.shape(r.page.Items > 0)
	}
	return r.page, err
}

// textPerItem is about what one item's normalised values take: a date (25
// bytes), an amount and a few short texts.
const textPerItem = 48

// run is one reading of one answer.
type run struct {
	m      *Mapping
	ctx    context.Context
	subj   Subject
	page   Page
	budget int // text the items may still produce, in bytes
	vals   []document.Value
	parts  []document.Value
	tables map[*html.Node]*headerRow
	ins    *Inspection     // when inspecting: every problem is recorded
	texts  normalize.Texts // the items' values: a few allocations for all
	// The shape of the items (shape.go): hashed on the fast path, named
	// item by item on the general one.
	fastPath bool
	fast     fastShape
	names    shapeBuilder
}

func (r *run) read(a Answer) error {
	m := r.m
	// A 204 has no content to map: its status decides.
	ok := a.Status >= 200 && a.Status < 300 && a.Status != 204
	if ok && m.fast && r.ins == nil {
		text, err := document.ToUTF8(m.format, m.charset, a.Body, a.ContentType)
		if err != nil {
			return err
		}
		return r.fastJSON(text)
	}
	d, perr := document.Parse(r.ctx, m.format, m.charset, a.Body, a.ContentType)
	if perr != nil {
		d = nil // rules on the status alone still apply
	}
	r.page.Doc = d
	if done, err := r.rules(d, a.Status); done {
		return err
	}
	if !ok {
		return ErrNoRule
	}
	if perr != nil {
		return perr
	}
	r.budget = 8*d.Size() + 64<<10
	for i, u := range m.unwrap {
		root, err := d.Root()
		if err != nil {
			return err
		}
		text, found, err := d.FirstText(u.sel, root)
		switch {
		case err != nil:
			return r.stopped(err)
		case !found || strings.TrimSpace(text) == "":
			return fmt.Errorf("unwrap[%d] %q found no document in the answer", i, u.sel)
		}
		if d, err = document.ParseText(r.ctx, u.format, []byte(text)); err != nil {
			return fmt.Errorf("unwrap[%d]: the document found is not %s: %w", i, u.format, err)
		}
		r.budget += 8 * d.Size()
	}
	return r.items(d)
}

// stopped is err, said to be the deadline when the context ended.
func (r *run) stopped(err error) error {
	if cerr := r.ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w (mapping stopped)", cerr)
	}
	return err
}

// rules applies the errors rules to the answer as received (d, nil when
// it does not parse: only rules on the status alone can match it): done
// is true when one matched (err is then a *RuleError, or nil for
// not_found).
func (r *run) rules(d *document.Document, status int) (done bool, err error) {
	if len(r.m.rules) == 0 {
		return false, nil
	}
	var root document.Node
	if d != nil {
		var err error
		if root, err = d.Root(); err != nil {
			d = nil
		}
	}
	for i := range r.m.rules {
		ru := &r.m.rules[i]
		if len(ru.status) > 0 && !containsInt(ru.status, status) {
			continue
		}
		if ru.when != nil {
			if d == nil {
				continue // an answer that does not parse holds nothing
			}
			matched, err := r.when(d, root, ru)
			if err != nil {
				return true, r.stopped(err)
			}
			if !matched {
				continue
			}
		}
		r.page.Health.rule = i + 1
		if ru.outcome == NotFound {
			r.page.NotFound = true
			return true, nil
		}
		e := &RuleError{Rule: i, Outcome: ru.outcome, RetryAfter: ru.retryAfter}
		if ru.detail != nil && d != nil {
			if v, ok, _ := d.First(*ru.detail, root); ok {
				e.Detail = normalize.Detail(v.Text)
			}
		}
		return true, e
	}
	return false, nil
}

// when reports whether rule ru's condition holds in d.
func (r *run) when(d *document.Document, root document.Node, ru *rule) (bool, error) {
	if ru.equals == nil && ru.contains == "" && ru.matches == nil {
		return d.Present(*ru.when, root)
	}
	vals, err := d.Values(*ru.when, root, true, 0, r.vals[:0])
	r.vals = vals
	if err != nil {
		return false, err
	}
	for _, v := range vals {
		switch {
		case ru.equals != nil:
			if equal(d.Format(), v, *ru.equals) {
				return true, nil
			}
		case ru.contains != "":
			if strings.Contains(strings.ToLower(v.Text), ru.contains) {
				return true, nil
			}
		case ru.matches.MatchString(v.Text):
			return true, nil
		}
	}
	return len(vals) == 0 && ru.equals != nil && ru.equals.kind == 0, nil
}

// equal compares a value with an equals scalar: in JSON as is (a string
// equals a string, a number a number, true true); in markup, as text.
func equal(f document.Format, v document.Value, s scalar) bool {
	if f != document.JSON {
		return v.Text == s.text
	}
	switch s.kind {
	case 's':
		return !v.Number && !v.Bool && !v.NotText && v.Text == s.text
	case 'b':
		return v.Bool && v.Text == s.text
	case 'n':
		if !v.Number {
			return false
		}
		n, ok := parseFloat(v.Text)
		return ok && n == s.num
	}
	return false
}

func containsInt(list []int, v int) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// Add adds the counts of o to h (the pages of one lookup); the rule is
// the last one that decided a page, the shape the union of theirs.
func (h *Health) Add(o Health) {
	h.Mapped += o.Mapped
	h.affected += o.affected
	h.seen += o.seen
	if o.rule > 0 {
		h.rule = o.rule
	}
	for f := range numFields {
		for r := range numReasons {
			h.unmapped[f][r] += o.unmapped[f][r]
		}
	}
	if len(o.unknown) > 0 {
		// h may share its texts with the Health it was copied from.
		h.unknown = slices.Clone(h.unknown)
		for _, u := range o.unknown {
			h.addUnknown(u.Text, u.N)
		}
	}
	h.shape = union(h.shape, o.shape)
}

// Mapped lists the fields the mapping reads, by config name, in field
// order.
func (m *Mapping) Mapped() []string {
	var names []string
	for f := range numFields {
		if m.fields[f].configured {
			names = append(names, f.String())
		}
	}
	return names
}
