package mapping

import (
	"context"
	"fmt"
	"strings"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/document"
)

// Inspection is an answer mapped for a person to read (`aggregator
// sources check`): every item, with what each field's selector found and
// what did not map or normalise, where a lookup stops at the first
// problem.
type Inspection struct {
	// Items are the answer's items that match kept, in its order.
	Items []InspectedItem
	// NotFound is true when the answer said "no infractions".
	NotFound bool
	// Rule is the index of the errors rule that decided the answer, or -1.
	Rule int
	// Selected is the number of items the answer held; Dropped how many
	// of them match dropped.
	Selected, Dropped int
	// Warnings are what maps, but may be wrong: an items pointer that
	// takes one element of an array that has others.
	Warnings []string

	open bool // the last item is being recorded
}

// InspectedItem is one item of an answer.
type InspectedItem struct {
	// Infraction is the item as mapped; fields that did not map or
	// normalise are left empty (Amount "", Date "", Status unknown).
	Infraction aggregator.Infraction
	// Problems lists its fields that did not map or normalise, in field
	// order.
	Problems []FieldProblem
	// Refused is true when a lookup would refuse the whole answer because
	// of this item (no id, or a value that does not normalise).
	Refused bool
}

// FieldProblem is one field of one item that did not map (its selector
// found nothing), did not normalise, or maps but looks wrong.
type FieldProblem struct {
	Field string
	// Selector is the field's selectors or column, as configured.
	Selector string
	// Reason is ReasonMissing, ReasonInvalid, ReasonUnknownStatus or
	// ReasonSuspectText.
	Reason string
	// Value is the text found (empty when missing). It may be personal
	// data: show it to the operator, never log it.
	Value string
	// Detail says why it did not normalise, and what was tried.
	Detail string
}

// String describes p for the operator, e.g. `place: "td.lugar" matched
// nothing` or `amount: "185.000": ambiguous…`.
func (p FieldProblem) String() string {
	switch p.Reason {
	case ReasonMissing:
		return fmt.Sprintf("%s: selector %s matched nothing", p.Field, p.Selector)
	case ReasonUnknownStatus:
		return fmt.Sprintf("%s: %q is not in response.status_map (status unknown)", p.Field, p.Value)
	case ReasonSuspectText:
		return fmt.Sprintf("%s: %q holds U+FFFD or mojibake: the charset is wrong (set response.charset)", p.Field, p.Value)
	}
	if p.Value == "" {
		return fmt.Sprintf("%s: %s", p.Field, p.Detail)
	}
	what := "a value"
	switch p.Field {
	case "date":
		what = "a date"
	case "amount", "units":
		what = "an amount"
	case "id":
		what = "an id"
	}
	return fmt.Sprintf("%s: %q is not %s: %s", p.Field, p.Value, what, p.Detail)
}

// Inspect maps an answer as Read would, but reports every item and every
// field that did not map or normalise instead of stopping at the first.
// The error is what Read would answer for the whole answer (a rule, a
// maintenance page, an answer that cannot be read at all).
func (m *Mapping) Inspect(ctx context.Context, a Answer, s Subject) (Inspection, error) {
	ins := &Inspection{Rule: -1}
	r := run{m: m, ctx: ctx, subj: s, ins: ins}
	err := r.read(a)
	ins.NotFound = r.page.NotFound
	if i, ok := r.page.Health.Rule(); ok {
		ins.Rule = i
	}
	ins.Selected, ins.Dropped = r.page.Items, r.page.Dropped
	return *ins, err
}

// current is the item being recorded, started when needed.
func (ins *Inspection) current() *InspectedItem {
	if !ins.open {
		ins.Items = append(ins.Items, InspectedItem{})
		ins.open = true
	}
	return &ins.Items[len(ins.Items)-1]
}

// problem records what happened to field f of the item being mapped.
func (ins *Inspection) problem(r *run, f field, why reason, v fieldValue, cause string) {
	fs := &r.m.fields[f]
	p := FieldProblem{Field: f.String(), Reason: why.String(), Detail: cause}
	switch {
	case len(fs.columns) > 0:
		p.Selector = "column " + quoteAll(fs.columns)
	case len(fs.src) > 0:
		p.Selector = fmt.Sprintf("%q", strings.Join(fs.src, `", "`))
	default:
		p.Selector = "(set)"
	}
	if why != missing {
		p.Value = truncate(v.text, 80)
	}
	it := ins.current()
	it.Problems = append(it.Problems, p)
	if why == invalid || (why == missing && f == fieldID) {
		it.Refused = true
	}
}

// refuse marks the item being mapped as refused.
func (ins *Inspection) refuse() { ins.current().Refused = true }

// done records the item being mapped as inf.
func (ins *Inspection) done(inf *aggregator.Infraction, refused bool) {
	it := ins.current()
	it.Infraction = *inf
	it.Refused = it.Refused || refused
	ins.open = false
}

// itemFailed records an item that could not be read at all.
func (ins *Inspection) itemFailed(err error) {
	it := ins.current()
	it.Infraction.Status = aggregator.Unknown
	it.Problems = append(it.Problems, FieldProblem{Reason: ReasonInvalid, Detail: err.Error()})
	it.Refused = true
	ins.open = false
}

// indexWarnings warns of a JSON items pointer with a numeric index where
// the array there has other elements: they are dropped.
func (ins *Inspection) indexWarnings(d *document.Document, sel document.Selector) {
	p, ok := sel.Pointer()
	if !ok || d.JSON() == nil {
		return
	}
	doc := d.JSON()
	v := doc[document.SkipSpace(doc, 0):]
	for i, tok := range p.Tokens {
		if v[0] == '[' {
			if _, isIndex := document.ArrayIndex(tok); isIndex {
				n := 0
				for it := (document.Iterator{B: v, I: 1}); ; n++ {
					if _, ok := it.Next(); !ok {
						break
					}
				}
				if n > 1 {
					prefix := "/" + strings.Join(p.Tokens[:i], "/")
					if i == 0 {
						prefix = ""
					}
					ins.Warnings = append(ins.Warnings, fmt.Sprintf(
						"items %q takes element %s of the array at %q, which has %d: the other %d are dropped (a JSONPath such as %q reads them all)",
						sel.String(), tok, prefix, n, n-1, jsonPathOf(p, i)))
				}
			}
		}
		var found bool
		if v, found = (document.Pointer{Tokens: []string{tok}}).Resolve(v); !found || document.IsNull(v) {
			return
		}
	}
}

// jsonPathOf is pointer p as a JSONPath, with a wildcard at token i (and
// every numeric token after it).
func jsonPathOf(p document.Pointer, i int) string {
	var b strings.Builder
	b.WriteString("$")
	for j, tok := range p.Tokens {
		if _, isIndex := document.ArrayIndex(tok); isIndex && j >= i {
			b.WriteString("[*]")
			continue
		}
		if _, isIndex := document.ArrayIndex(tok); isIndex {
			b.WriteString("[" + tok + "]")
			continue
		}
		b.WriteString("." + tok)
	}
	return b.String()
}

// truncate cuts s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
