package sources

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/multas/aggregator"
)

// Inspection is a lookup answer mapped for a person to read (`aggregator
// sources check`, SPEC 8 "Adding a jurisdiction"): every item, with what
// each field's selector found and what did not map or normalise, where a
// lookup stops at the first problem.
type Inspection struct {
	// NotFound is true when response.not_found matched: the answer means
	// no infractions, and Items is empty.
	NotFound bool
	// Items are the answer's items, in its order.
	Items []InspectedItem
}

// InspectedItem is one item of an answer.
type InspectedItem struct {
	// Infraction is the item as mapped; fields that did not map or
	// normalise are left empty (Amount "", Date "", Status unknown).
	Infraction aggregator.Infraction
	// Problems lists its fields that did not map or normalise, in field
	// order (id, date, description, place, amount, currency, status).
	Problems []FieldProblem
	// Refused is true when a lookup would refuse the whole answer because
	// of this item (no id, or a value that does not normalise).
	Refused bool
}

// FieldProblem is one field of one item that did not map (Unmapped: its
// selector matched nothing, or an empty value) or whose value did not
// normalise.
type FieldProblem struct {
	Field, Selector string
	Unmapped        bool
	// Value is the text found (empty when Unmapped). It may be personal
	// data: show it to the operator, never log it.
	Value  string
	Reason string
}

// String describes p for the operator, e.g. `place: selector
// "td:nth-child(4)" matched nothing` or `amount: "12,3x" is not an
// amount`.
func (p FieldProblem) String() string {
	if p.Unmapped {
		return fmt.Sprintf("%s: selector %q %s", p.Field, p.Selector, p.Reason)
	}
	return fmt.Sprintf("%s: %q %s", p.Field, p.Value, p.Reason)
}

// Mapped is the set of fields that the source's mapping reads, by config
// name, in field order.
func (s *Source) Mapped() []string {
	var names []string
	for f := range numFields {
		if s.mapping.mapped[f] {
			names = append(names, fieldName(f))
		}
	}
	return names
}

// Inspect maps a 2xx lookup answer (body, with its Content-Type) as
// Lookup would, but reports every item and every field that did not map
// or normalise instead of stopping at the first. The error is an answer
// this mapping cannot read at all: not the declared format, items not
// found, a maintenance page (response.unavailable matched).
func (s *Source) Inspect(ctx context.Context, body []byte, contentType string) (Inspection, error) {
	m := &s.mapping
	d, err := parseDocument(ctx, m.format, m.charset, body, contentType)
	if err != nil {
		return Inspection{}, err
	}
	if done, err := m.markers(d); done {
		return Inspection{NotFound: err == nil}, err
	}
	var ins Inspection
	switch m.format {
	case formatXML:
		items, err := xmlItems(d.xml, m.items.xpath)
		if err != nil {
			return Inspection{}, err
		}
		if len(items) == 0 && m.notFound != nil {
			return Inspection{}, m.noItems()
		}
		for _, item := range items {
			var r rawFields
			for f := range numFields {
				if m.mapped[f] {
					v, ok, err := xmlFirst(item, m.fields[f].xpath)
					r.set(f, validUTF8(v), ok, err)
				}
			}
			ins.Items = append(ins.Items, m.inspectItem(&r))
		}
	case formatHTML:
		items, err := d.htmlItems(m.items.css)
		if err != nil {
			return Inspection{}, err
		}
		if len(items) == 0 && m.notFound != nil {
			return Inspection{}, m.noItems()
		}
		for _, item := range items {
			var r rawFields
			for f := range numFields {
				if m.mapped[f] {
					v, ok, err := d.htmlFirst(item, m.fields[f])
					r.set(f, validUTF8(v), ok, err)
				}
			}
			ins.Items = append(ins.Items, m.inspectItem(&r))
		}
	default:
		doc := d.json
		v, found := m.items.resolve(doc[skipSpace(doc, 0):])
		switch {
		case !found:
			return Inspection{}, fmt.Errorf("items pointer %q not found in the answer", m.items.String())
		case isNull(v):
			return ins, nil
		case v[0] != '[':
			return Inspection{}, fmt.Errorf("items pointer %q does not lead to an array", m.items.String())
		}
		for it := (iterator{b: v, i: 1}); ; {
			item, ok := it.next()
			if !ok {
				break
			}
			ins.Items = append(ins.Items, m.inspectItem(m.jsonFields(item)))
		}
	}
	return ins, nil
}

// rawFields is what each field's selector found in one item, as text.
type rawFields struct {
	text   [numFields][]byte
	found  [numFields]bool
	bad    [numFields]string // a value that is not text: why
	epoch  bool              // the date was a JSON number
	failed [numFields]error  // the selector could not be evaluated
}

func (r *rawFields) set(f field, v []byte, ok bool, err error) {
	r.text[f], r.found[f], r.failed[f] = v, ok, err
}

// jsonFields reads the fields of one JSON item as item does.
func (m *mapping) jsonFields(item []byte) *rawFields {
	var r rawFields
	var vals [numFields][]byte
	m.fieldValues(item, &vals)
	for f := range numFields {
		v := vals[f]
		if !m.mapped[f] || v == nil {
			continue
		}
		r.found[f] = true
		switch {
		case f != fieldDate && f != fieldAmount:
			t, ok := text(v)
			if !ok {
				r.text[f], r.bad[f] = v, "is not text"
				continue
			}
			r.text[f] = t
		case v[0] == '"':
			r.text[f] = stringBytes(v)
		case v[0] == '-' || (v[0] >= '0' && v[0] <= '9'):
			r.text[f] = v
			r.epoch = r.epoch || f == fieldDate
		case f == fieldDate:
			r.text[f], r.bad[f] = v, "is not a date"
		default:
			r.text[f], r.bad[f] = v, "is not an amount"
		}
	}
	return &r
}

// inspectItem normalises the fields of one item one by one, as fill does,
// and reports each that does not map or normalise.
func (m *mapping) inspectItem(r *rawFields) InspectedItem {
	var it InspectedItem
	texts := r.text
	for f := range numFields {
		if !m.mapped[f] {
			continue
		}
		sel := m.fields[f].String()
		// problem reports field f; a lookup refuses the answer for a
		// value that does not normalise, and for an item without id.
		problem := func(unmapped bool, reason string) {
			p := FieldProblem{Field: fieldName(f), Selector: sel, Unmapped: unmapped, Reason: reason}
			if !unmapped {
				p.Value = truncate(string(texts[f]), 80)
			}
			it.Problems = append(it.Problems, p)
			if f != fieldStatus {
				texts[f] = nil
			}
			if f == fieldID || (!unmapped && f != fieldStatus) {
				it.Refused = true
			}
		}
		switch {
		case r.failed[f] != nil:
			problem(true, "could not be evaluated: "+r.failed[f].Error())
		case !r.found[f]:
			problem(true, "matched nothing")
		case r.bad[f] != "":
			problem(false, r.bad[f])
		case len(texts[f]) == 0:
			problem(true, "matched an empty value")
		case f == fieldDate:
			var ok bool
			if r.epoch {
				_, ok = formatEpoch(string(texts[f]), m.loc)
			} else {
				_, ok = formatDate(string(texts[f]), m.loc)
			}
			if !ok {
				problem(false, "is not a date")
			}
		case f == fieldAmount:
			if _, ok := formatAmount(string(texts[f])); !ok {
				problem(false, "is not an amount")
			}
		case f == fieldStatus && len(m.statuses) > 0:
			known := slices.ContainsFunc(m.statuses, func(e statusEntry) bool { return bytes.EqualFold(e.bytes, texts[f]) })
			if !known {
				problem(false, "is not in response.status_map (status unknown)")
			}
		}
	}
	if len(texts[fieldID]) == 0 {
		// fill needs an id; the item is shown without one.
		texts[fieldID] = []byte("-")
		_ = m.fill(&texts, r.epoch, &it.Infraction)
		it.Infraction.ID, it.Infraction.Voucher = "", ""
		return it
	}
	_ = m.fill(&texts, r.epoch, &it.Infraction) // every value left normalises
	return it
}

// truncate cuts s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
