package sources

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

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
	status aggregator.Status
}

// mapping turns a portal's decoded answer into infractions. It is built
// once by New and only read afterwards.
type mapping struct {
	items    pointer
	fields   [numFields]pointer
	mapped   [numFields]bool
	statuses []statusEntry

	source, jurisdiction string
	currency             string
	loc                  *time.Location
	voucherPrefix        string // "" when the source has no voucher operation
}

// decode reads one JSON document from r (numbers kept as their literal
// text) and maps it. Anything after the document but white space is an
// error. Read errors of r come back as they are, for the caller to
// classify; every other error means the answer cannot be used.
func (m *mapping) decode(r io.Reader) ([]aggregator.Infraction, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, errors.New("empty answer")
		}
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid JSON: data after the document")
	}
	return m.apply(doc)
}

// apply maps a decoded document: the items pointer must lead to an array
// (or to null, for no items), and every item must map.
func (m *mapping) apply(doc any) ([]aggregator.Infraction, error) {
	v, found := m.items.resolve(doc)
	if !found {
		return nil, fmt.Errorf("items pointer %q not found in the answer", m.items.String())
	}
	if v == nil {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("items pointer %q does not lead to an array", m.items.String())
	}
	out := make([]aggregator.Infraction, len(items))
	for i, item := range items {
		if err := m.item(item, &out[i]); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
	}
	return out, nil
}

// item maps one portal item into inf.
func (m *mapping) item(item any, inf *aggregator.Infraction) error {
	*inf = aggregator.Infraction{
		Source:       m.source,
		Jurisdiction: m.jurisdiction,
		Currency:     m.currency,
		Status:       aggregator.Unknown,
	}
	id, ok := m.text(item, fieldID)
	if !ok {
		return m.fieldError(fieldID, "not text or a number")
	}
	if id == "" {
		return m.fieldError(fieldID, "missing or empty")
	}
	inf.ID = id
	if m.voucherPrefix != "" {
		inf.Voucher = m.voucherPrefix + url.PathEscape(id) + "/voucher"
	}
	if inf.Description, ok = m.text(item, fieldDescription); !ok {
		return m.fieldError(fieldDescription, "not text")
	}
	if inf.Place, ok = m.text(item, fieldPlace); !ok {
		return m.fieldError(fieldPlace, "not text")
	}
	if c, ok := m.text(item, fieldCurrency); !ok {
		return m.fieldError(fieldCurrency, "not text")
	} else if c != "" {
		inf.Currency = strings.ToUpper(c)
	}
	if err := m.date(item, inf); err != nil {
		return err
	}
	if err := m.amount(item, inf); err != nil {
		return err
	}
	return m.status(item, inf)
}

// value is the value of field f in item: nil when the field is not
// mapped, absent, or null.
func (m *mapping) value(item any, f field) any {
	if !m.mapped[f] {
		return nil
	}
	v, _ := m.fields[f].resolve(item)
	return v
}

// text is field f as trimmed text: strings as they are, numbers as their
// JSON literal, booleans as true or false; "" when absent. ok is false
// for objects and arrays.
func (m *mapping) text(item any, f field) (string, bool) {
	switch v := m.value(item, f).(type) {
	case nil:
		return "", true
	case string:
		return strings.TrimSpace(v), true
	case json.Number:
		return string(v), true
	case bool:
		if v {
			return "true", true
		}
		return "false", true
	}
	return "", false
}

// date normalises the date field; a blank string counts as absent.
func (m *mapping) date(item any, inf *aggregator.Infraction) error {
	var ok bool
	switch v := m.value(item, fieldDate).(type) {
	case nil:
		return nil
	case string:
		if strings.TrimSpace(v) == "" {
			return nil
		}
		inf.Date, ok = formatDate(v, m.loc)
	case json.Number:
		inf.Date, ok = formatEpoch(string(v), m.loc)
	}
	if !ok {
		return m.fieldError(fieldDate, "not a date")
	}
	return nil
}

// amount normalises the amount field; a blank string counts as absent.
func (m *mapping) amount(item any, inf *aggregator.Infraction) error {
	var ok bool
	switch v := m.value(item, fieldAmount).(type) {
	case nil:
		return nil
	case string:
		if strings.TrimSpace(v) == "" {
			return nil
		}
		inf.Amount, ok = formatAmount(v)
	case json.Number:
		inf.Amount, ok = formatAmount(string(v))
	}
	if !ok {
		return m.fieldError(fieldAmount, "not an amount")
	}
	return nil
}

// status maps the status field through the status map. Without the field
// the status is unknown and StatusRaw stays empty.
func (m *mapping) status(item any, inf *aggregator.Infraction) error {
	raw, ok := m.text(item, fieldStatus)
	if !ok {
		return m.fieldError(fieldStatus, "not text")
	}
	inf.StatusRaw = raw
	if raw == "" {
		return nil
	}
	for _, e := range m.statuses {
		if strings.EqualFold(e.key, raw) {
			inf.Status = e.status
			break
		}
	}
	return nil
}

// fieldError describes a field that cannot be read, naming the field and
// its pointer but never its value (it may be personal data).
func (m *mapping) fieldError(f field, reason string) error {
	return fmt.Errorf("field %s (%q): %s", fieldName(f), m.fields[f].String(), reason)
}
