package mapping

import (
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// Response says how a portal's answers are read (SPEC 8 Responses, SPEC
// 12). It is the `response` block of a source's configuration, as
// written: package config decodes it from YAML (a field tagged
// config:"short" takes the whole value when it is written as a single
// value instead of a mapping, and a List or Items written as one value is
// a list of one),
// and Compile checks and compiles it.
type Response struct {
	// Format is the syntax of the answers as received: json (the
	// default), xml or html.
	Format string `yaml:"format" json:"format"`
	// Charset forces a character encoding over what the answers declare
	// (any WHATWG label, utf-8 included); empty reads the Content-Type's
	// charset, else the XML prolog or HTML meta, else UTF-8.
	Charset string `yaml:"charset" json:"charset"`
	// Namespaces binds XPath prefixes to namespace URIs (xml only).
	Namespaces map[string]string `yaml:"namespaces,omitempty" json:"namespaces,omitempty"`
	// Decimal is the separator of decimals in amounts written as text:
	// "," or "."; empty refuses the ambiguous forms.
	Decimal string `yaml:"decimal,omitempty" json:"decimal,omitempty"`
	// NullValues are texts that mean "no value" ("----", "ISENTO").
	NullValues []string `yaml:"null_values,omitempty" json:"null_values,omitempty"`
	// Unwrap finds the real document as text inside the answer, step by
	// step.
	Unwrap []Unwrap `yaml:"unwrap,omitempty" json:"unwrap,omitempty"`
	// Items selects the infractions: one selector, or several whose
	// matches are united in order.
	Items Items `yaml:"items" json:"items"`
	// Match keeps only the items of the queried subject.
	Match *Match `yaml:"match,omitempty" json:"match,omitempty"`
	// Header selects the header cells of an item's table (html, for
	// `column` fields).
	Header string `yaml:"header,omitempty" json:"header,omitempty"`
	// Fields map infraction fields (id, date, description, place, amount,
	// currency, status, units) to where each item holds them.
	Fields map[string]Field `yaml:"fields" json:"fields"`
	// NotFound, when set, selects what makes a 2xx answer mean "no
	// infractions".
	NotFound string `yaml:"not_found" json:"not_found"`
	// Unavailable, when set, selects what makes a 2xx answer a
	// maintenance page: source-unavailable, counted like a 503.
	Unavailable string `yaml:"unavailable" json:"unavailable"`
	// StatusMap maps the portal's status text (case-insensitive) to one of
	// unpaid, paid, in_process, unknown.
	StatusMap map[string]string `yaml:"status_map" json:"status_map"`
	// Errors are rules that classify answers by their content, checked
	// first, on every answer whatever its status.
	Errors []Rule `yaml:"errors,omitempty" json:"errors,omitempty"`
	// MaxItems bounds the items of one lookup (default DefaultMaxItems).
	MaxItems int `yaml:"max_items,omitempty" json:"max_items,omitempty"`
}

// DefaultMaxItems is response.max_items when not set (SPEC 9).
const DefaultMaxItems = 1000

// Unwrap is one step of `unwrap`: the text that Select finds is a
// document of Format (default: the format it is found in).
type Unwrap struct {
	Select string `yaml:"select" json:"select" config:"short"`
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
}

// Items is `items`: one selector, or a list of selectors and entries.
type Items []ItemSource

// ItemSource is one entry of `items`.
type ItemSource struct {
	// Select selects the item elements or values.
	Select string `yaml:"select" json:"select" config:"short"`
	// Format, when set, parses each match's text as a document of its
	// own, in which this entry's fields select.
	Format string `yaml:"format,omitempty" json:"format,omitempty"`
	// Set gives constant field values to this entry's items where an item
	// has none (status_raw stands for status).
	Set map[string]string `yaml:"set,omitempty" json:"set,omitempty"`
}

// List is one string or a list of them.
type List []string

// Field is one entry of `fields`: a selector (Select written as the
// whole value), or an object.
type Field struct {
	// Select lists selectors, whose values are joined (see Join).
	Select List `yaml:"select" json:"select,omitempty" config:"short"`
	// Column names the header text of an html table's column, or
	// alternatives of it.
	Column List `yaml:"column,omitempty" json:"column,omitempty"`
	// Join joins every value of every selector with this text; without
	// it, the first value of each selector is taken and a list of them
	// joined with one space.
	Join *string `yaml:"join,omitempty" json:"join,omitempty"`
	// Layout lists the Unicode TR35 patterns a date is written in, tried
	// in order (date only).
	Layout List `yaml:"layout,omitempty" json:"layout,omitempty"`
	// Decimal overrides the response's decimal separator (amount, units).
	Decimal string `yaml:"decimal,omitempty" json:"decimal,omitempty"`
	// Code is the legal unit a `units` field is stated in (UF, UR, UMA).
	Code string `yaml:"code,omitempty" json:"code,omitempty"`
}

// Match keeps the items whose selected value equals the query's subject.
type Match struct {
	Select List   `yaml:"select,omitempty" json:"select,omitempty"`
	Column List   `yaml:"column,omitempty" json:"column,omitempty"`
	Equals string `yaml:"equals" json:"equals"`
}

// Rule is one entry of `errors`.
type Rule struct {
	// Status lists the HTTP statuses the rule applies to (default: any).
	Status []int `yaml:"status,omitempty" json:"status,omitempty"`
	// When is what must be found in the answer.
	When *When `yaml:"when,omitempty" json:"when,omitempty"`
	// Outcome is rejected, unavailable, not_found, error or rate_limited.
	Outcome string `yaml:"outcome" json:"outcome"`
	// Detail selects the text of the problem's detail.
	Detail string `yaml:"detail,omitempty" json:"detail,omitempty"`
	// RetryAfter is the pause of a rate_limited outcome (default 60s).
	RetryAfter time.Duration `yaml:"retry_after,omitempty" json:"retry_after,omitempty"`
}

// When is a rule's condition: a selector that must be present, or a
// comparison of what it selects (at most one of Equals, Contains and
// Matches).
type When struct {
	Select   string  `yaml:"select" json:"select" config:"short"`
	Equals   *Scalar `yaml:"equals,omitempty" json:"equals,omitempty"`
	Contains *string `yaml:"contains,omitempty" json:"contains,omitempty"`
	Matches  *string `yaml:"matches,omitempty" json:"matches,omitempty"`
}

// Scalar is a configured scalar as JSON: a string, a number, a boolean
// or null, compared as is with a JSON value.
type Scalar struct {
	// Raw is the scalar's JSON literal.
	Raw json.RawMessage
}

// MarshalYAML writes the scalar as the YAML value it was.
func (s Scalar) MarshalYAML() (any, error) {
	var v any
	if err := json.Unmarshal(s.Raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// MarshalJSON writes the literal.
func (s Scalar) MarshalJSON() ([]byte, error) {
	if s.Raw == nil {
		return []byte("null"), nil
	}
	return s.Raw, nil
}

// Clone copies r and everything it holds.
func (r Response) Clone() Response {
	r.Namespaces = maps.Clone(r.Namespaces)
	r.NullValues = slices.Clone(r.NullValues)
	r.Unwrap = slices.Clone(r.Unwrap)
	r.StatusMap = maps.Clone(r.StatusMap)
	items := make(Items, len(r.Items))
	for i, it := range r.Items {
		it.Set = maps.Clone(it.Set)
		items[i] = it
	}
	if r.Items == nil {
		items = nil
	}
	r.Items = items
	if r.Match != nil {
		mt := *r.Match
		mt.Select, mt.Column = slices.Clone(mt.Select), slices.Clone(mt.Column)
		r.Match = &mt
	}
	if r.Fields != nil {
		fields := make(map[string]Field, len(r.Fields))
		for k, f := range r.Fields {
			f.Select, f.Column, f.Layout = slices.Clone(f.Select), slices.Clone(f.Column), slices.Clone(f.Layout)
			if f.Join != nil {
				j := *f.Join
				f.Join = &j
			}
			fields[k] = f
		}
		r.Fields = fields
	}
	rules := make([]Rule, len(r.Errors))
	for i, ru := range r.Errors {
		ru.Status = slices.Clone(ru.Status)
		if ru.When != nil {
			w := *ru.When
			w.Equals = w.Equals.clone()
			w.Contains, w.Matches = clonePtr(w.Contains), clonePtr(w.Matches)
			ru.When = &w
		}
		rules[i] = ru
	}
	if r.Errors == nil {
		rules = nil
	}
	r.Errors = rules
	return r
}

func (s *Scalar) clone() *Scalar {
	if s == nil {
		return nil
	}
	return &Scalar{Raw: slices.Clone(s.Raw)}
}

func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
