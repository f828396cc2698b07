package sources

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode"

	"github.com/andybalholm/cascadia"
	"github.com/antchfx/xmlquery"
	"golang.org/x/net/html"
	"golang.org/x/text/encoding"

	"github.com/multas/aggregator"
)

// This file is the format-generic reading of answers (SPEC 8
// `response.format`): selectors compiled once from configuration, and
// documents parsed once per answer. The lookup mapping uses it, and so can
// every other part that reads a value out of a portal's answer (the next
// page's cursor or URL, a session page's extracted values):
//
//	sel, err := compileSelector(formatHTML, nil, "input[name=__RequestVerificationToken]@value")
//	…
//	doc, err := parseDocument(ctx, formatHTML, nil, body, resp.Header.Get("Content-Type"))
//	token, ok := doc.first(sel) // the value of the first match, as text
//	n, err := doc.count(items)  // how many items the answer holds
//
// Selectors, by format:
//
//   - json: an RFC 6901 pointer. first reads a string (trimmed), a number
//     (its literal) or a boolean; null, objects and arrays read as absent.
//   - xml: an XPath 1.0 expression, compiled with the configured
//     namespaces. A prefixed name (m:acta) matches its namespace URI, and an
//     undeclared prefix is a compile error; an unprefixed name matches its
//     local name in any namespace (SOAP answers often put their items in a
//     default namespace). first reads the string value of the first node
//     selected (trimmed), or the expression's own value when it is a string,
//     number or boolean. "" is ".", the context node.
//   - html: a CSS selector (groups with ',' allowed), optionally followed by
//     "@attr" to read attribute attr of the first match instead of its
//     text. Text is the element's text content, trimmed, with every run of
//     white space (non-breaking spaces included) collapsed to one space. A
//     selector matches descendants of its context (the document, or an
//     item); "" and "." are the context element itself, and "@attr" (no
//     selector) reads the context element's own attribute.
//
// Limits: an answer is at most max_response_bytes; XML and HTML deeper
// than 512 open elements are refused (x/net/html's own bound, applied to
// XML too); XML entities are the predefined and HTML ones, never DTD
// declarations (encoding/xml does not read DTDs, so no entity expansion
// and no external entities); CSS matching stops when the call's context
// ends, since a selector such as tr:nth-child(n+2) over a hostile page of
// sibling rows costs quadratic time. XPath evaluation cannot be
// interrupted: its cost is the operator's expression over a bounded tree.

// format is the syntax of a portal's answers.
type format uint8

const (
	formatJSON format = iota
	formatXML
	formatHTML
)

// parseFormat reads `response.format`; "" is json.
func parseFormat(s string) (format, error) {
	switch s {
	case "", "json":
		return formatJSON, nil
	case "xml":
		return formatXML, nil
	case "html":
		return formatHTML, nil
	}
	return formatJSON, fmt.Errorf("unknown format %q (known: json, xml, html)", s)
}

// String is the configuration name of f.
func (f format) String() string {
	switch f {
	case formatXML:
		return "xml"
	case formatHTML:
		return "html"
	}
	return "json"
}

// acceptHeader is the Accept header of lookups whose answers are in the
// format named name (unknown names are reported by New).
func acceptHeader(name string) string {
	switch f, _ := parseFormat(name); f {
	case formatXML:
		return "application/xml, text/xml;q=0.9, */*;q=0.1"
	case formatHTML:
		return "text/html, application/xhtml+xml;q=0.9, */*;q=0.1"
	}
	return "application/json"
}

// selector is a compiled selector of one format. A JSON selector is its
// pointer, embedded so that the JSON mapping reads the pointer directly.
type selector struct {
	pointer                  // json
	format  format           //
	src     string           // as configured
	xpath   *xpathExpr       // xml
	css     cascadia.Matcher // html; nil is the context element itself
	attr    string           // html: the attribute read; "" reads the text
}

// String returns the selector as configured.
func (s selector) String() string { return s.src }

// compileSelector compiles text as a selector of format f. namespaces
// binds XPath prefixes (xml only; nil for none).
func compileSelector(f format, namespaces map[string]string, text string) (selector, error) {
	s := selector{format: f, src: text}
	var err error
	switch f {
	case formatJSON:
		s.pointer, err = compilePointer(text)
	case formatXML:
		s.xpath, err = compileXPath(text, namespaces)
	case formatHTML:
		s.css, s.attr, err = compileCSS(text)
	}
	return s, err
}

// compileItems compiles the items selector: for xml and html it must be
// given, and select elements (no "@attr").
func compileItems(f format, namespaces map[string]string, text string) (selector, error) {
	switch {
	case f == formatJSON:
	case text == "":
		return selector{}, fmt.Errorf("required with format %s", f)
	case f == formatHTML:
		if _, attr := splitAttr(text); attr != "" {
			return selector{}, errors.New(`selects item elements: "@attr" is for fields`)
		}
	}
	return compileSelector(f, namespaces, text)
}

// errMaintenance is an answer that response.unavailable recognised.
var errMaintenance = errors.New("the answer is a maintenance page (response.unavailable matched)")

// document is one parsed answer. It is used by one goroutine, for the
// time of one call: ctx is that call's, and bounds the work of CSS
// matching.
type document struct {
	ctx    context.Context
	format format
	json   []byte         // json: the answer, valid JSON, UTF-8
	xml    *xmlquery.Node // xml: the document node
	html   *html.Node     // html: the document node
}

// parseDocument decodes body to UTF-8 (see toUTF8; enc overrides the
// answer's own declaration, nil reads it) and parses it as format f.
func parseDocument(ctx context.Context, f format, enc encoding.Encoding, body []byte, contentType string) (*document, error) {
	text, err := toUTF8(f, enc, body, contentType)
	if err != nil {
		return nil, err
	}
	d := &document{ctx: ctx, format: f}
	switch f {
	case formatJSON:
		if err := validJSON(text); err != nil {
			return nil, err
		}
		d.json = text
	case formatXML:
		d.xml, err = parseXML(text)
	case formatHTML:
		d.html, err = parseHTML(text)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// first returns the value of sel's first match in the whole answer, as
// text; ok is false when nothing matches (or, for JSON, when the value is
// null, an object or an array).
func (d *document) first(sel selector) (value string, ok bool) {
	var v []byte
	switch d.format {
	case formatJSON:
		v, ok = jsonFirst(d.json, sel.pointer)
	case formatXML:
		v, ok, _ = xmlFirst(xmlquery.CreateXPathNavigator(d.xml), sel.xpath)
	case formatHTML:
		v, ok, _ = d.htmlFirst(d.html, sel)
	}
	return string(v), ok
}

// present reports whether sel finds something in the answer (not_found,
// unavailable). JSON: a value other than null, false, 0, "", [] or {};
// XML: XPath's boolean() of the expression (a non-empty node-set, a true
// boolean, a non-empty string, a number other than 0 and NaN); HTML: a
// matching element, which has the attribute when one is named.
func (d *document) present(sel selector) (bool, error) {
	switch d.format {
	case formatJSON:
		v, found := sel.resolve(d.json[skipSpace(d.json, 0):])
		return found && truthy(v), nil
	case formatXML:
		return xmlPresent(xmlquery.CreateXPathNavigator(d.xml), sel.xpath)
	}
	n, err := d.htmlQuery(d.html, sel.css)
	if err != nil || n == nil {
		return false, err
	}
	if sel.attr == "" {
		return true, nil
	}
	_, ok := htmlAttr(n, sel.attr)
	return ok, nil
}

// count returns how many items sel selects: the length of the array a
// JSON pointer leads to (0 for null; an error when it leads elsewhere or
// nowhere), the number of XML nodes or HTML elements matched.
func (d *document) count(sel selector) (int, error) {
	switch d.format {
	case formatJSON:
		v, found := sel.resolve(d.json[skipSpace(d.json, 0):])
		switch {
		case !found:
			return 0, fmt.Errorf("items pointer %q not found in the answer", sel.src)
		case isNull(v):
			return 0, nil
		case v[0] != '[':
			return 0, fmt.Errorf("items pointer %q does not lead to an array", sel.src)
		}
		n := 0
		for it := (iterator{b: v, i: 1}); ; n++ {
			if _, ok := it.next(); !ok {
				return n, nil
			}
		}
	case formatXML:
		items, err := xmlItems(d.xml, sel.xpath)
		return len(items), err
	}
	items, err := d.htmlItems(sel.css)
	return len(items), err
}

// truthy reports whether the JSON value v is something: not null, false,
// 0, "" (after trimming), [] or {}.
func truthy(v []byte) bool {
	switch v[0] {
	case 'n', 'f':
		return false
	case '"':
		return len(stringBytes(v)) > 0
	case '[', '{':
		it := iterator{b: v, i: 1}
		_, ok := it.next()
		return ok
	case 't':
		return true
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return err != nil || f != 0 // a number too large to parse is not 0
}

// jsonFirst reads the value p leads to in doc, as text (see text).
func jsonFirst(doc []byte, p pointer) ([]byte, bool) {
	v, found := p.resolve(doc[skipSpace(doc, 0):])
	if !found || isNull(v) {
		return nil, false
	}
	t, ok := text(v)
	return t, ok
}

// markers applies not_found and unavailable to a parsed answer: done is
// true when one of them decided the answer (err is then errMaintenance for
// a maintenance page, nil for no infractions).
func (m *mapping) markers(d *document) (done bool, err error) {
	if m.unavailable != nil {
		switch found, err := d.present(*m.unavailable); {
		case err != nil:
			return true, err
		case found:
			return true, errMaintenance
		}
	}
	if m.notFound != nil {
		found, err := d.present(*m.notFound)
		return found || err != nil, err
	}
	return false, nil
}

// read maps a 2xx lookup answer of any format. JSON answers that are UTF-8
// (no charset configured, none or UTF-8 in the Content-Type) and that no
// marker (not_found, unavailable) must inspect go straight to apply, as
// they always did.
func (m *mapping) read(ctx context.Context, body []byte, contentType string) ([]aggregator.Infraction, error) {
	if m.format == formatJSON && m.charset == nil && m.notFound == nil && m.unavailable == nil && isUTF8Label(charsetParam(contentType)) {
		return m.apply(body)
	}
	d, err := parseDocument(ctx, m.format, m.charset, body, contentType)
	if err != nil {
		return nil, err
	}
	if done, err := m.markers(d); done {
		return nil, err
	}
	switch m.format {
	case formatXML:
		return m.applyXML(d)
	case formatHTML:
		return m.applyHTML(d)
	}
	return m.mapJSON(d.json)
}

// answerError classifies a 2xx lookup answer that read could not map: a
// maintenance page is source-unavailable, reported with Status 503 so that
// the breaker counts it as it counts a 503 (SPEC 8 `unavailable`); work cut
// short by the call's context is a timeout; anything else is unreadable.
func answerError(ctx context.Context, status int, pause time.Duration, err error) *Error {
	switch {
	case errors.Is(err, errMaintenance):
		return &Error{Outcome: aggregator.Unavailable, Status: http.StatusServiceUnavailable, Pause: pause,
			Err: fmt.Errorf("%w, in a %d answer, counted as a 503", err, status)}
	case ctx.Err() != nil:
		e := transportError(ctx, err)
		e.Pause = pause
		return e
	}
	return unreadable(status, pause, err)
}

// noItems is the error of an XML or HTML answer in which the items
// selector matched nothing although not_found is configured and did not
// match either: it is not a page this mapping knows. Without not_found,
// zero matches is a valid empty answer.
func (m *mapping) noItems() error {
	return fmt.Errorf("items %q matched nothing, and not_found %q did not match either: not an answer this mapping knows",
		m.items.src, m.notFound.src)
}

// compileFormat compiles the keys of spec's response that say how answers
// are read: format, charset, namespaces, not_found and unavailable.
func (m *mapping) compileFormat(spec Spec) []error {
	var errs []error
	var err error
	if m.format, err = parseFormat(spec.Format); err != nil {
		errs = append(errs, fmt.Errorf("response.format: %w", err))
	}
	if m.charset, err = compileCharset(spec.Charset); err != nil {
		errs = append(errs, fmt.Errorf("response.charset: %w", err))
	}
	if len(spec.Namespaces) > 0 && m.format != formatXML {
		errs = append(errs, errors.New("response.namespaces: only with format xml"))
	}
	for _, prefix := range slices.Sorted(maps.Keys(spec.Namespaces)) {
		switch {
		case !isNCName(prefix):
			errs = append(errs, fmt.Errorf("response.namespaces.%s: not a namespace prefix", prefix))
		case spec.Namespaces[prefix] == "":
			errs = append(errs, fmt.Errorf("response.namespaces.%s: empty namespace URI", prefix))
		}
	}
	m.namespaces = maps.Clone(spec.Namespaces)
	for _, marker := range []struct {
		name string
		text string
		dst  **selector
	}{{"not_found", spec.NotFound, &m.notFound}, {"unavailable", spec.Unavailable, &m.unavailable}} {
		if marker.text == "" {
			continue
		}
		sel, err := compileSelector(m.format, m.namespaces, marker.text)
		if err != nil {
			errs = append(errs, fmt.Errorf("response.%s: %w", marker.name, err))
			continue
		}
		*marker.dst = &sel
	}
	return errs
}

// isNCName reports whether s is an XML name without a colon, as namespace
// prefixes are.
func isNCName(s string) bool {
	for i, r := range s {
		switch {
		case unicode.IsLetter(r), r == '_':
		case i > 0 && (unicode.IsDigit(r) || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}
