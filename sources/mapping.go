package sources

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"golang.org/x/text/encoding"

	"github.com/multas/aggregator"
)

// field is a mappable member of an infraction.
type field uint8

// The keys of `response.fields` (SPEC 6).
const (
	fieldID field = iota
	fieldDate
	fieldDescription
	fieldPlace
	fieldAmount
	fieldCurrency
	fieldStatus
	numFields
)

// fieldName is the config name of f.
func fieldName(f field) string {
	switch f {
	case fieldID:
		return "id"
	case fieldDate:
		return "date"
	case fieldDescription:
		return "description"
	case fieldPlace:
		return "place"
	case fieldAmount:
		return "amount"
	case fieldCurrency:
		return "currency"
	case fieldStatus:
		return "status"
	}
	return ""
}

// fieldByName is the field of a config name.
func fieldByName(name string) (field, bool) {
	for f := fieldID; f < numFields; f++ {
		if fieldName(f) == name {
			return f, true
		}
	}
	return 0, false
}

// statusEntry is one line of a status map; key is trimmed and compared
// case-insensitively.
type statusEntry struct {
	key    string
	bytes  []byte // key, to compare with the answer's bytes
	status aggregator.Status
}

// mapping turns a portal's answer into infractions. It is built once by
// New and only read afterwards.
type mapping struct {
	format     format
	charset    encoding.Encoding // configured; nil reads the answer's own
	namespaces map[string]string // xml: XPath prefixes
	items      selector
	fields     [numFields]selector
	mapped     [numFields]bool
	statuses   []statusEntry
	// notFound and unavailable are the optional markers; nil when not
	// configured.
	notFound, unavailable *selector

	source, jurisdiction string
	currency             string
	loc                  *time.Location
	voucherPrefix        string // "" when the source has no voucher operation
}

// apply maps a whole JSON answer: it must be one valid JSON document, its
// items pointer must lead to an array (or to null, for no items), and
// every item must map. The document is read in place; every string of the
// result is a copy, so doc may be reused afterwards.
func (m *mapping) apply(doc []byte) ([]aggregator.Infraction, error) {
	doc = bytes.TrimPrefix(doc, []byte("\uFEFF")) // a byte order mark, as some portals send
	if err := validJSON(doc); err != nil {
		return nil, err
	}
	return m.mapJSON(doc)
}

// validJSON checks that doc is one JSON document.
func validJSON(doc []byte) error {
	if json.Valid(doc) {
		return nil
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return errors.New("empty answer")
	}
	var raw json.RawMessage
	return fmt.Errorf("invalid JSON: %w", json.Unmarshal(doc, &raw))
}

// mapJSON maps the valid JSON document doc.
func (m *mapping) mapJSON(doc []byte) ([]aggregator.Infraction, error) {
	v, found := m.items.resolve(doc[skipSpace(doc, 0):])
	if !found {
		return nil, fmt.Errorf("items pointer %q not found in the answer", m.items.String())
	}
	if isNull(v) {
		return nil, nil
	}
	if v[0] != '[' {
		return nil, fmt.Errorf("items pointer %q does not lead to an array", m.items.String())
	}
	var out []aggregator.Infraction
	for it := (iterator{b: v, i: 1}); ; {
		item, ok := it.next()
		if !ok {
			return out, nil
		}
		if out == nil {
			// Room for as many items as the first one's size suggests.
			out = make([]aggregator.Infraction, 0, min(len(v)/(len(item)+1)+1, 64))
		}
		out = append(out, aggregator.Infraction{})
		if err := m.item(item, &out[len(out)-1]); err != nil {
			return nil, fmt.Errorf("item %d: %w", len(out)-1, err)
		}
	}
}

// item maps one JSON item into inf: it turns each field's JSON value into
// text, in place, then fill does the rest.
func (m *mapping) item(item []byte, inf *aggregator.Infraction) error {
	var vals [numFields][]byte
	m.fieldValues(item, &vals)
	epoch := false
	for f := range numFields {
		v := vals[f]
		if v == nil {
			continue
		}
		switch {
		case f != fieldDate && f != fieldAmount:
			var ok bool
			if vals[f], ok = text(v); ok {
				continue
			}
			if f == fieldID {
				return m.fieldError(f, "not text or a number")
			}
			return m.fieldError(f, "not text")
		case v[0] == '"':
			vals[f] = stringBytes(v)
		case v[0] == '-' || (v[0] >= '0' && v[0] <= '9'):
			epoch = epoch || f == fieldDate
		case f == fieldDate:
			return m.fieldError(f, "not a date")
		default:
			return m.fieldError(f, "not an amount")
		}
	}
	return m.fill(&vals, epoch, inf)
}

// fill maps the text of every field (trimmed; nil or empty when absent)
// into inf: the part of mapping that every answer format shares. A date
// that was a JSON number (epochNumber) is epoch seconds or milliseconds;
// as text it is anything formatDate reads.
func (m *mapping) fill(texts *[numFields][]byte, epochNumber bool, inf *aggregator.Infraction) error {
	*inf = aggregator.Infraction{
		Source:       m.source,
		Jurisdiction: m.jurisdiction,
		Currency:     m.currency,
		Status:       aggregator.Unknown,
	}
	id := texts[fieldID]
	if len(id) == 0 {
		return m.fieldError(fieldID, "missing or empty")
	}
	inf.ID = string(id)
	if m.voucherPrefix != "" {
		inf.Voucher = m.voucherPrefix + url.PathEscape(inf.ID) + "/voucher"
	}
	if t := texts[fieldDescription]; len(t) > 0 {
		inf.Description = string(t)
	}
	if t := texts[fieldPlace]; len(t) > 0 {
		inf.Place = string(t)
	}
	if c := texts[fieldCurrency]; len(c) > 0 && !bytes.EqualFold(c, []byte(m.currency)) {
		inf.Currency = strings.ToUpper(string(c))
	}
	var ok bool
	if d := texts[fieldDate]; len(d) > 0 {
		if epochNumber {
			inf.Date, ok = formatEpoch(string(d), m.loc)
		} else {
			inf.Date, ok = formatDate(string(d), m.loc)
		}
		if !ok {
			return m.fieldError(fieldDate, "not a date")
		}
	}
	if a := texts[fieldAmount]; len(a) > 0 {
		if inf.Amount, ok = formatAmount(string(a)); !ok {
			return m.fieldError(fieldAmount, "not an amount")
		}
	}
	m.status(texts[fieldStatus], inf)
	return nil
}

// fieldValues finds the value of every mapped field in item, leaving nil
// for fields absent or null. For an object item it reads the item once,
// matching each member against the first token of every field's pointer.
func (m *mapping) fieldValues(item []byte, vals *[numFields][]byte) {
	objectFields := false
	for f := range numFields {
		switch {
		case !m.mapped[f]:
		case item[0] == '{' && len(m.fields[f].tokens) > 0:
			objectFields = true
		default:
			vals[f] = notNull(m.fields[f].resolve(item))
		}
	}
	if !objectFields {
		return
	}
	for it := (iterator{b: item, i: 1}); ; {
		k, ok := it.next()
		if !ok {
			return
		}
		it.i = skipSpace(item, it.i) + 1 // ':'
		v, _ := it.next()
		key := keyText(k)
		for f := range numFields {
			p := m.fields[f].pointer
			if m.mapped[f] && len(p.tokens) > 0 && string(key) == p.tokens[0] {
				// The last of duplicate members wins, as in encoding/json.
				vals[f] = notNull(pointer{tokens: p.tokens[1:]}.resolve(v))
			}
		}
	}
}

// notNull is the value a pointer found, or nil when it found nothing or
// null.
func notNull(v []byte, found bool) []byte {
	if !found || isNull(v) {
		return nil
	}
	return v
}

// text is the JSON value v (nil when absent) as trimmed text: strings as
// they are, numbers as their JSON literal, booleans as true or false; empty
// when absent. ok is false for objects and arrays. The bytes may alias the
// answer.
func text(v []byte) (t []byte, ok bool) {
	if v == nil {
		return nil, true
	}
	switch v[0] {
	case '"':
		return stringBytes(v), true
	case '{', '[':
		return nil, false
	}
	return v, true // a number, true or false: its literal
}

// status maps the status text raw through the status map. Without it the
// status is unknown and StatusRaw stays empty.
func (m *mapping) status(raw []byte, inf *aggregator.Infraction) {
	if len(raw) == 0 {
		return
	}
	for _, e := range m.statuses {
		if bytes.Equal(e.bytes, raw) {
			inf.Status, inf.StatusRaw = e.status, e.key
			return
		}
		if bytes.EqualFold(e.bytes, raw) {
			inf.Status = e.status
			break
		}
	}
	inf.StatusRaw = string(raw)
}

// fieldError describes a field that cannot be read, naming the field and
// its selector but never its value (it may be personal data).
func (m *mapping) fieldError(f field, reason string) error {
	return fmt.Errorf("field %s (%q): %s", fieldName(f), m.fields[f].String(), reason)
}
