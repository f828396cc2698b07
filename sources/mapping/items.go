package mapping

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unsafe"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/document"
	"github.com/multas/aggregator/sources/normalize"
)

// fieldLimit bounds the text read for one value from markup: enough for
// normalize.MaxText characters and the mark that the value was cut.
const fieldLimit = 4*normalize.MaxText + 8

// errTooMuchText is an answer whose items would produce much more text
// than the answer holds (SPEC 9): selectors that read the same text over
// and over.
var errTooMuchText = errors.New("the items map to far more text than the answer holds (check selectors that read the whole document)")

// item is one item selected, with the entry that selected it.
type item struct {
	e    *entry
	node document.Node
}

// items maps the items of d, the document they are read in (after
// unwrap): markers first, then every entry's matches.
func (r *run) items(d *document.Document) error {
	m := r.m
	root, err := d.Root()
	if err != nil {
		return err
	}
	if m.unavail != nil {
		found, err := d.Present(*m.unavail, root)
		if err != nil {
			return r.stopped(err)
		}
		if found {
			return ErrMaintenance
		}
	}
	if m.notFound != nil {
		found, err := d.Present(*m.notFound, root)
		if err != nil {
			return r.stopped(err)
		}
		if found {
			r.page.NotFound = true
			return nil
		}
	}
	var all []item
	var nodes []document.Node
	for i := range m.entries {
		e := &m.entries[i]
		found, err := d.Items(e.sel, root)
		if err != nil {
			return r.stopped(err)
		}
		if len(all)+len(found) > m.maxItems {
			return fmt.Errorf("the answer holds more than %d items (response.max_items)", m.maxItems)
		}
		for _, n := range found {
			all = append(all, item{e: e, node: n})
		}
		nodes = append(nodes, found...)
		if r.ins != nil && e.sel.Format() == document.JSON {
			r.ins.indexWarnings(d, e.sel)
		}
	}
	d.Exclude(nodes)
	r.page.Items = len(all)
	if len(all) == 0 {
		switch {
		case m.final == document.HTML:
			return r.noItems()
		case m.final == document.XML && m.notFound != nil:
			return r.noItems()
		}
		return nil
	}
	r.page.Infractions = make([]aggregator.Infraction, 0, len(all))
	for i, it := range all {
		if err := r.item(d, i, it); err != nil {
			if r.ins == nil || r.ctx.Err() != nil || errors.Is(err, errTooMuchText) {
				return err
			}
			r.ins.itemFailed(err)
		}
	}
	return nil
}

// noItems is the error of a markup answer whose items matched nothing,
// and that no marker recognised: not a page this mapping knows.
func (r *run) noItems() error {
	var sels []string
	for _, e := range r.m.entries {
		sels = append(sels, strconv.Quote(e.sel.String()))
	}
	marker := "no not_found marker"
	if r.m.notFound != nil {
		marker = fmt.Sprintf("not_found %q did not match either", r.m.notFound.String())
	}
	return fmt.Errorf("items %s matched nothing, and %s: not an answer this mapping knows (a captcha or an error page?)",
		strings.Join(sels, ", "), marker)
}

// item maps item number i.
func (r *run) item(d *document.Document, i int, it item) error {
	e := it.e
	n := it.node
	if e.embedded {
		text, ok := d.Text(e.sel, n)
		if !ok || strings.TrimSpace(text) == "" {
			return r.itemError(i, fmt.Errorf("holds no %s document", e.format))
		}
		sub, err := document.ParseText(r.ctx, e.format, []byte(text))
		if err != nil {
			return r.itemError(i, fmt.Errorf("not a %s document: %w", e.format, err))
		}
		r.budget += 8 * sub.Size()
		if n, err = sub.Element(); err != nil {
			return r.itemError(i, err)
		}
		d = sub
	}
	if r.m.columns && r.isHeaderRow(d, n) {
		return nil
	}
	r.names.itemNames(n)
	if mt := r.m.match; mt != nil && mt.op == r.subj.Op {
		keep, err := r.matches(d, e, n)
		if err != nil {
			return r.itemError(i, err)
		}
		if !keep {
			r.page.Dropped++
			return nil
		}
	}
	var vals [numFields]fieldValue
	for f := range numFields {
		v, err := r.field(d, e, n, f)
		if err != nil {
			if r.ins == nil {
				return r.itemError(i, err)
			}
			v = fieldValue{broken: err}
		}
		vals[f] = v
	}
	if err := r.ctx.Err(); err != nil {
		return r.stopped(err)
	}
	if r.budget < 0 {
		return errTooMuchText
	}
	var inf aggregator.Infraction
	if err := r.fill(&vals, &inf); err != nil {
		return r.itemError(i, err)
	}
	r.page.Infractions = append(r.page.Infractions, inf)
	r.page.Health.Mapped++
	return nil
}

func (r *run) itemError(i int, err error) error {
	if cerr := r.ctx.Err(); cerr != nil {
		return r.stopped(err)
	}
	return fmt.Errorf("item %d: %w", i, err)
}

// fieldValue is what an item holds for one field, as text.
type fieldValue struct {
	text    string
	present bool
	number  bool // a JSON number, alone
	notText bool // a JSON object or array
	fromSet bool
	broken  error // the field could not be read at all (inspection)
	// alias says that text shares the answer's bytes (the fast path reads
	// them in place): what an infraction keeps of it is copied (keep).
	alias bool
}

// keep is s, derived from v's text, as an infraction may hold it: a copy
// (in the run's texts) when s shares the answer's bytes, which are reused;
// s itself when it is a string of its own (a normalised date or amount,
// say).
func (r *run) keep(v fieldValue, s string) string {
	if !v.alias || len(s) == 0 {
		return s
	}
	start := uintptr(unsafe.Pointer(unsafe.StringData(v.text)))
	if p := uintptr(unsafe.Pointer(unsafe.StringData(s))); p >= start && p < start+uintptr(len(v.text)) {
		return r.texts.Clone(s)
	}
	return s
}

// field reads field f of the item at n.
func (r *run) field(d *document.Document, e *entry, n document.Node, f field) (fieldValue, error) {
	fs := &r.m.fields[f]
	var v fieldValue
	switch {
	case !fs.configured:
	case len(fs.columns) > 0:
		text, err := r.column(d, n, fs.columns, fs.folded)
		if err != nil {
			return v, err
		}
		v = r.value(text, false)
	default:
		all := fs.join != nil
		parts := r.parts[:0]
		for _, sel := range e.sels.fields[f] {
			vals, err := d.Values(sel, n, all, fieldLimit, r.vals[:0])
			r.vals = vals
			if err != nil {
				return v, err
			}
			for _, val := range vals {
				if val.NotText {
					v.notText = true
					continue
				}
				if val.Text == "" || r.isNull(val.Text) {
					continue
				}
				parts = append(parts, val)
			}
		}
		r.parts = parts
		switch len(parts) {
		case 0:
		case 1:
			v = r.value(parts[0].Text, parts[0].Number)
		default:
			sep := " "
			if fs.join != nil {
				sep = *fs.join
			}
			var b strings.Builder
			for i, p := range parts {
				if i > 0 {
					b.WriteString(sep)
				}
				b.WriteString(p.Text)
			}
			v = r.value(b.String(), false)
		}
	}
	return e.orSet(f, v), nil
}

// orSet is v, or the entry's constant for field f when the item has no
// value (SPEC 12 `set`).
func (e *entry) orSet(f field, v fieldValue) fieldValue {
	if !v.present && !v.notText && e.hasSet[f] {
		return fieldValue{text: e.set[f], present: true, fromSet: true}
	}
	return v
}

// value is a text found for a field: absent when empty or a null value.
func (r *run) value(text string, number bool) fieldValue {
	text = strings.TrimSpace(text)
	if text == "" || r.isNull(text) {
		return fieldValue{}
	}
	r.budget -= len(text)
	return fieldValue{text: text, present: true, number: number}
}

// isNull reports whether text is one of the null values.
func (r *run) isNull(text string) bool {
	for _, nv := range r.m.nulls {
		if strings.EqualFold(text, nv) {
			return true
		}
	}
	return false
}

// matches reports whether the item at n is the queried subject's.
func (r *run) matches(d *document.Document, e *entry, n document.Node) (bool, error) {
	mt := r.m.match
	var text string
	if len(mt.columns) > 0 {
		t, err := r.column(d, n, mt.columns, mt.folded)
		if err != nil {
			return false, err
		}
		text = t
	} else {
		for _, sel := range e.sels.match {
			v, ok, err := d.First(sel, n)
			if err != nil {
				return false, err
			}
			if ok && v.Text != "" {
				text = v.Text
				break
			}
		}
	}
	if mt.op == aggregator.ByDomain {
		return normalize.Plate(text) == r.subj.Value, nil
	}
	return normalize.Digits(text) == r.subj.Value, nil
}

// parseFloat reads a JSON number's literal.
func parseFloat(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}
