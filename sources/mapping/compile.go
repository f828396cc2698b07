package mapping

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/document"
	"github.com/multas/aggregator/sources/normalize"
)

// Options are what a mapping needs of its source beyond the response
// block.
type Options struct {
	// Source and Jurisdiction name the infractions' source.
	Source, Jurisdiction string
	// Currency applies to amounts without a currency of their own.
	Currency string
	// Location is the zone of zone-less times; nil is UTC.
	Location *time.Location
	// VoucherPrefix, when the source has vouchers, is the path that an
	// infraction's escaped id and "/voucher" follow.
	VoucherPrefix string
	// Now is today, for two-digit years; time.Now when nil.
	Now func() time.Time
	// VoucherOnly says the source has no lookups: its response block may
	// be empty.
	VoucherOnly bool
}

// Error is one problem of a response block: Key is the path of the key
// below `response` ("fields.date.layout[1]"), "" for the block itself.
type Error struct {
	Key, Msg string
}

func (e Error) Error() string {
	if e.Key == "" {
		return "response: " + e.Msg
	}
	return "response." + e.Key + ": " + e.Msg
}

// Errors are every problem Compile found.
type Errors []Error

func (e Errors) Error() string {
	msgs := make([]string, len(e))
	for i, err := range e {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// Outcome is what an `errors` rule makes of an answer.
type Outcome string

// The outcomes of SPEC 12's errors rules.
const (
	Rejected    Outcome = "rejected"
	Unavailable Outcome = "unavailable"
	NotFound    Outcome = "not_found"
	Unreadable  Outcome = "error"
	RateLimited Outcome = "rate_limited"
)

// DefaultRetryAfter is the pause of a rate_limited rule without
// retry_after.
const DefaultRetryAfter = 60 * time.Second

// Mapping turns a portal's answers into infractions. It is built once by
// Compile and only read afterwards, but for the shapes it remembers
// (under their own lock): safe for concurrent use.
type Mapping struct {
	format     document.Format // of the answers as received
	final      document.Format // of the document items are read in (after unwrap)
	charset    document.Charset
	namespaces map[string]string
	unwrap     []unwrapStep
	entries    []entry
	fields     [numFields]fieldSpec
	match      *matchSpec
	header     *document.Selector
	columns    bool // some field or match reads a column
	notFound   *document.Selector
	unavail    *document.Selector
	rules      []rule
	statuses   []statusEntry
	nulls      []string
	maxItems   int
	fast       bool // the answers map through the JSON text directly (fast.go)
	fastItems  document.Pointer
	fastSels   [numFields]document.Pointer

	opts Options
	loc  *time.Location
	cur  string // the source's currency, upper case
	// shapes remembers the item structures met (shape.go).
	shapes *shapeCache
}

type unwrapStep struct {
	sel    document.Selector
	format document.Format
}

// entry is one item selector with the fields compiled in its items'
// format.
type entry struct {
	sel      document.Selector
	format   document.Format // of its items: its own, or the final one
	embedded bool
	set      [numFields]string
	hasSet   [numFields]bool
	sels     *selectors
}

// selectors are the fields' and match's selectors in one format.
type selectors struct {
	fields [numFields][]document.Selector
	match  []document.Selector
}

// fieldSpec is a configured field's options.
type fieldSpec struct {
	configured bool
	src        []string // the selectors as configured, for messages
	columns    []string // the column alternatives, as configured
	folded     []string // and folded for comparison
	join       *string
	layouts    normalize.Layouts
	decimal    normalize.Decimal
	code       string
}

type matchSpec struct {
	src     []string
	columns []string
	folded  []string
	op      aggregator.Operation // the lookup it applies to
}

type rule struct {
	status     []int
	when       *document.Selector
	equals     *scalar
	contains   string // lower case
	matches    *regexp.Regexp
	outcome    Outcome
	detail     *document.Selector
	retryAfter time.Duration
}

// scalar is an `equals` value.
type scalar struct {
	kind byte // 's' string, 'n' number, 'b' bool, 0 null
	text string
	num  float64
}

// statusEntry is one line of a status map; key is trimmed and compared
// case-insensitively.
type statusEntry struct {
	key    string
	status aggregator.Status
}

// Compile checks r and compiles it. Every problem is reported, as Errors.
func Compile(r Response, opts Options) (*Mapping, error) {
	c := compiler{m: &Mapping{opts: opts, loc: opts.Location, cur: strings.ToUpper(strings.TrimSpace(opts.Currency)), shapes: &shapeCache{}}}
	if c.m.loc == nil {
		c.m.loc = time.UTC
	}
	if c.m.opts.Now == nil {
		c.m.opts.Now = time.Now
	}
	c.compile(r)
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return c.m, nil
}

// Check reports every problem of r, as Compile does.
func Check(r Response, opts Options) Errors {
	c := compiler{m: &Mapping{opts: opts, loc: time.UTC}}
	c.compile(r)
	return c.errs
}

type compiler struct {
	m    *Mapping
	errs Errors
}

func (c *compiler) fail(key, format string, args ...any) {
	c.errs = append(c.errs, Error{Key: key, Msg: fmt.Sprintf(format, args...)})
}

func (c *compiler) compile(r Response) {
	m := c.m
	if m.opts.VoucherOnly && len(r.Items) == 0 && len(r.Fields) == 0 {
		// Nothing to read: vouchers stream through.
		m.maxItems = DefaultMaxItems
		return
	}
	var err error
	formatOK := true
	if m.format, err = document.ParseFormat(r.Format); err != nil {
		c.fail("format", "want json, xml or html, got %q", r.Format)
		formatOK = false
	}
	if m.charset, err = document.ParseCharset(r.Charset); err != nil {
		c.fail("charset", "%v", err)
	}
	c.namespaces(r)
	dec, err := normalize.ParseDecimal(r.Decimal)
	if err != nil {
		c.fail("decimal", `want "," or "." (the separator of decimals in amounts written as text), got %q`, r.Decimal)
	}
	for i, v := range r.NullValues {
		if strings.TrimSpace(v) == "" {
			c.fail(fmt.Sprintf("null_values[%d]", i), "empty: an absent value needs no entry")
			continue
		}
		m.nulls = append(m.nulls, strings.TrimSpace(v))
	}
	if !formatOK {
		return
	}
	// The rules read the answer as received; unwrap moves to the inner
	// documents, where everything else reads.
	c.rules(r.Errors)
	m.final = m.format
	for i, u := range r.Unwrap {
		key := fmt.Sprintf("unwrap[%d]", i)
		step := unwrapStep{format: m.final}
		if u.Format != "" {
			if step.format, err = document.ParseFormat(u.Format); err != nil {
				c.fail(key+".format", "%v", err)
				return
			}
		}
		if u.Select == "" && m.final != document.XML {
			c.fail(key+".select", "required")
		} else if step.sel, err = document.Compile(m.final, m.namespaces, u.Select); err != nil {
			c.fail(key+".select", "%v", err)
		}
		m.unwrap = append(m.unwrap, step)
		m.final = step.format
	}
	if r.Header != "" && m.final != document.HTML {
		c.fail("header", "only for html documents (the header cells of a table)")
	} else {
		m.header = c.selector("header", m.final, r.Header)
	}
	m.notFound = c.selector("not_found", m.final, r.NotFound)
	m.unavail = c.selector("unavailable", m.final, r.Unavailable)
	c.fieldSpecs(r, dec)
	c.matchSpec(r.Match)
	c.items(r.Items)
	c.statusMap(r.StatusMap)
	switch {
	case r.MaxItems < 0:
		c.fail("max_items", "must not be negative")
	case r.MaxItems == 0:
		m.maxItems = DefaultMaxItems
	default:
		m.maxItems = r.MaxItems
	}
	if m.final == document.HTML && len(r.Items) > 0 && m.notFound == nil && !slices.ContainsFunc(m.rules, func(r rule) bool { return r.outcome == NotFound }) {
		c.fail("not_found", "an html source must say how its no-results page looks: set not_found, or an errors rule with outcome: not_found "+
			"(without one, a page without items, such as a captcha or an error page, cannot be told from \"no infractions\")")
	}
	c.fastPath(r)
}

func (c *compiler) namespaces(r Response) {
	if len(r.Namespaces) > 0 && r.Format != "xml" && !slices.ContainsFunc(r.Unwrap, func(u Unwrap) bool { return u.Format == "xml" }) {
		c.fail("namespaces", "only with xml documents (XPath prefixes)")
	}
	for _, prefix := range slices.Sorted(maps.Keys(r.Namespaces)) {
		switch {
		case !document.IsNCName(prefix):
			c.fail(child("namespaces", prefix), "%q is not a namespace prefix (an XML name without ':')", prefix)
		case r.Namespaces[prefix] == "":
			c.fail(child("namespaces", prefix), "empty namespace URI")
		}
	}
	c.m.namespaces = maps.Clone(r.Namespaces)
}

// selector compiles an optional selector in format f; nil when not set
// or wrong.
func (c *compiler) selector(key string, f document.Format, text string) *document.Selector {
	if text == "" {
		return nil
	}
	sel, err := document.Compile(f, c.m.namespaces, text)
	if err != nil {
		c.fail(key, "%v", err)
		return nil
	}
	return &sel
}

func (c *compiler) rules(rules []Rule) {
	for i, r := range rules {
		key := fmt.Sprintf("errors[%d]", i)
		ru := rule{status: r.Status, outcome: Outcome(r.Outcome)}
		for j, st := range r.Status {
			if st < 100 || st > 599 {
				c.fail(fmt.Sprintf("%s.status[%d]", key, j), "%d is not an HTTP status", st)
			}
		}
		switch ru.outcome {
		case Rejected, Unavailable, NotFound, Unreadable, RateLimited:
		case "":
			c.fail(key+".outcome", "required (rejected, unavailable, not_found, error or rate_limited)")
		default:
			c.fail(key+".outcome", "want rejected, unavailable, not_found, error or rate_limited, got %q", r.Outcome)
		}
		switch {
		case r.RetryAfter < 0:
			c.fail(key+".retry_after", "must not be negative")
		case r.RetryAfter > 0 && ru.outcome != RateLimited:
			c.fail(key+".retry_after", "only with outcome: rate_limited")
		case ru.outcome == RateLimited:
			ru.retryAfter = cmpOr(r.RetryAfter, DefaultRetryAfter)
		}
		if r.When == nil && len(r.Status) == 0 {
			c.fail(key, "give when (what the answer holds), status, or both")
		}
		if w := r.When; w != nil {
			c.when(key+".when", w, &ru)
		}
		ru.detail = c.selector(key+".detail", c.m.format, r.Detail)
		c.m.rules = append(c.m.rules, ru)
	}
}

func (c *compiler) when(key string, w *When, ru *rule) {
	n := 0
	for _, set := range []bool{w.Equals != nil, w.Contains != nil, w.Matches != nil} {
		if set {
			n++
		}
	}
	if n > 1 {
		c.fail(key, "at most one of equals, contains and matches")
	}
	if w.Select == "" && c.m.format != document.XML {
		c.fail(key+".select", "required")
		return
	}
	if ru.when = c.selector(key+".select", c.m.format, w.Select); ru.when == nil && w.Select != "" {
		return
	}
	switch {
	case w.Equals != nil:
		s, err := parseScalar(w.Equals.Raw)
		if err != nil {
			c.fail(key+".equals", "%v", err)
		}
		ru.equals = &s
	case w.Contains != nil:
		if *w.Contains == "" {
			c.fail(key+".contains", "empty: every text contains it")
		}
		ru.contains = strings.ToLower(*w.Contains)
	case w.Matches != nil:
		re, err := regexp.Compile(*w.Matches)
		if err != nil {
			c.fail(key+".matches", "not an RE2 regular expression: %v", err)
		}
		ru.matches = re
	}
	if ru.when == nil {
		// "" in xml: the document node itself.
		sel, _ := document.Compile(c.m.format, c.m.namespaces, "")
		ru.when = &sel
	}
}

// parseScalar reads an `equals` value.
func parseScalar(raw json.RawMessage) (scalar, error) {
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return scalar{}, fmt.Errorf("not a value: %v", err)
	}
	switch x := v.(type) {
	case nil:
		return scalar{}, nil
	case string:
		return scalar{kind: 's', text: x}, nil
	case bool:
		return scalar{kind: 'b', text: strconv.FormatBool(x)}, nil
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return scalar{}, fmt.Errorf("number out of range")
		}
		return scalar{kind: 'n', text: string(x), num: f}, nil
	}
	return scalar{}, fmt.Errorf("want a string, a number, true or false")
}

func (c *compiler) fieldSpecs(r Response, dec normalize.Decimal) {
	m := c.m
	if _, ok := r.Fields["id"]; !ok {
		c.fail("fields.id", "required when by_domain or by_id is configured")
	}
	for _, name := range slices.Sorted(maps.Keys(r.Fields)) {
		key := child("fields", name)
		f, ok := fieldByName(name)
		if !ok {
			c.fail(key, "unknown field (known: %s)", strings.Join(FieldNames(), ", "))
			continue
		}
		fd := r.Fields[name]
		fs := &m.fields[f]
		fs.configured = true
		fs.join = fd.Join
		fs.src = fd.Select
		switch {
		case len(fd.Select) > 0 && len(fd.Column) > 0:
			c.fail(key, "give select or column, not both")
		case len(fd.Select) == 0 && len(fd.Column) == 0:
			c.fail(key, "give select (a selector or a list of them) or column (html)")
		}
		if len(fd.Column) > 0 {
			m.columns = true
			fs.columns, fs.folded = c.columns(key+".column", fd.Column)
		}
		if len(fd.Layout) > 0 {
			if f != fieldDate {
				c.fail(key+".layout", "only for date")
			}
			l, err := normalize.CompileLayouts(fd.Layout)
			if err != nil {
				c.fail(key+".layout", "%v", err)
			}
			fs.layouts = l
		}
		fs.decimal = dec
		if fd.Decimal != "" {
			if f != fieldAmount && f != fieldUnits {
				c.fail(key+".decimal", "only for amount and units")
			}
			d, err := normalize.ParseDecimal(fd.Decimal)
			if err != nil {
				c.fail(key+".decimal", `want "," or ".", got %q`, fd.Decimal)
			}
			fs.decimal = d
		}
		switch {
		case f == fieldUnits && fd.Code == "":
			c.fail(key+".code", "required: the legal unit the fines are stated in (UF, UR, UMA, …)")
		case f == fieldUnits && normalize.IsCurrency(fd.Code):
			c.fail(key+".code", "%q is a currency: money is the amount field, units are legal units (UF, UR, UMA, …)", fd.Code)
		case f == fieldUnits && !validCode(fd.Code):
			c.fail(key+".code", "%q: want letters and digits, at most 10", fd.Code)
		case f != fieldUnits && fd.Code != "":
			c.fail(key+".code", "only for units")
		}
		fs.code = strings.ToUpper(fd.Code)
	}
}

func validCode(s string) bool {
	if s == "" || len(s) > 10 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// columns checks the alternatives of a column and folds them.
func (c *compiler) columns(key string, alts []string) (cols, folded []string) {
	if c.m.final != document.HTML {
		c.fail(key, "only for html documents (a table's column, named by its header)")
	}
	for i, a := range alts {
		f := foldHeader(a)
		if f == "" {
			c.fail(fmt.Sprintf("%s[%d]", key, i), "empty")
			continue
		}
		cols, folded = append(cols, a), append(folded, f)
	}
	return cols, folded
}

func (c *compiler) matchSpec(mt *Match) {
	if mt == nil {
		return
	}
	ms := &matchSpec{src: mt.Select}
	switch mt.Equals {
	case "{domain}":
		ms.op = aggregator.ByDomain
	case "{id}":
		ms.op = aggregator.ByID
	case "":
		c.fail("match.equals", `required: "{domain}" or "{id}"`)
	default:
		c.fail("match.equals", `want "{domain}" or "{id}" (the query's subject), got %q`, mt.Equals)
	}
	switch {
	case len(mt.Select) > 0 && len(mt.Column) > 0:
		c.fail("match", "give select or column, not both")
	case len(mt.Select) == 0 && len(mt.Column) == 0:
		c.fail("match", "give select or column")
	}
	if len(mt.Column) > 0 {
		c.m.columns = true
		ms.columns, ms.folded = c.columns("match.column", mt.Column)
	}
	c.m.match = ms
}

// items compiles the item entries, and every field's selectors in each
// entry's format.
func (c *compiler) items(items Items) {
	m := c.m
	if len(items) == 0 {
		if m.final != document.JSON {
			c.fail("items", "required with format %s", m.final)
			return
		}
		items = Items{{}} // the whole answer is the array
	}
	byFormat := map[document.Format]*selectors{}
	for i, it := range items {
		key := "items"
		if len(items) > 1 || it.Format != "" || len(it.Set) > 0 {
			key = fmt.Sprintf("items[%d]", i)
		}
		e := entry{format: m.final}
		if it.Format != "" {
			f, err := document.ParseFormat(it.Format)
			if err != nil {
				c.fail(key+".format", "%v", err)
				continue
			}
			e.format, e.embedded = f, true
		}
		if e.sels = byFormat[e.format]; e.sels == nil {
			e.sels = c.selectors(e.format, key)
			byFormat[e.format] = e.sels
		}
		sel, err := document.CompileItems(m.final, m.namespaces, it.Select, e.embedded)
		if err != nil {
			k := key
			if key != "items" {
				k += ".select"
			}
			c.fail(k, "%v", err)
			continue
		}
		e.sel = sel
		for _, name := range slices.Sorted(maps.Keys(it.Set)) {
			f, ok := setField(name)
			switch {
			case !ok:
				c.fail(child(key+".set", name), "unknown field (known: %s, status_raw)", strings.Join(FieldNames()[1:], ", "))
			case f == fieldID:
				c.fail(key+".set.id", "an id is each item's own: it cannot be a constant")
			case strings.TrimSpace(it.Set[name]) == "":
				c.fail(child(key+".set", name), "empty")
			default:
				e.set[f], e.hasSet[f] = strings.TrimSpace(it.Set[name]), true
			}
		}
		m.entries = append(m.entries, e)
	}
}

// selectors compiles the fields' and match's selectors in format f (the
// format of the items of entry key).
func (c *compiler) selectors(f document.Format, entryKey string) *selectors {
	m := c.m
	s := &selectors{}
	for fld := range numFields {
		fs := m.fields[fld]
		for i, text := range fs.src {
			sel, err := document.Compile(f, m.namespaces, text)
			if err != nil {
				key := "fields." + fld.String()
				if len(fs.src) > 1 {
					key = fmt.Sprintf("%s.select[%d]", key, i)
				}
				msg := err.Error()
				if f != m.final || entryKey != "items" {
					msg = fmt.Sprintf("%s (in the %s items of %s)", msg, f, entryKey)
				}
				c.fail(key, "%s", msg)
				continue
			}
			s.fields[fld] = append(s.fields[fld], sel)
		}
		if len(fs.columns) > 0 && f != document.HTML {
			c.fail("fields."+fld.String()+".column", "the items of %s are %s: column reads html tables", entryKey, f)
		}
	}
	if mt := m.match; mt != nil {
		for i, text := range mt.src {
			sel, err := document.Compile(f, m.namespaces, text)
			if err != nil {
				c.fail(fmt.Sprintf("match.select[%d]", i), "%v", err)
				continue
			}
			s.match = append(s.match, sel)
		}
	}
	return s
}

func (c *compiler) statusMap(sm map[string]string) {
	for _, key := range slices.Sorted(maps.Keys(sm)) {
		st := aggregator.Status(sm[key])
		k := strings.TrimSpace(key)
		switch {
		case !st.Valid():
			c.fail(child("status_map", key), "want unpaid, paid, in_process or unknown, got %q", st)
			continue
		case k == "":
			c.fail("status_map", "empty portal text")
			continue
		}
		dup := slices.IndexFunc(c.m.statuses, func(e statusEntry) bool { return strings.EqualFold(e.key, k) })
		if dup >= 0 {
			if c.m.statuses[dup].status != st {
				c.fail(child("status_map", key), "conflicts with %q", c.m.statuses[dup].key)
			}
			continue
		}
		c.m.statuses = append(c.m.statuses, statusEntry{key: k, status: st})
	}
}

func cmpOr(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// child is the key path of key below parent, as package config writes
// paths: plain keys after a dot, others quoted in brackets.
func child(parent, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			plain = false
			break
		}
	}
	if !plain {
		return parent + "[" + strconv.Quote(key) + "]"
	}
	return parent + "." + key
}
