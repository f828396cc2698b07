package document

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/antchfx/xmlquery"
	"golang.org/x/net/html"
)

// checkEvery is how many steps of a walk (elements visited, XPath moves)
// pass between two looks at the call's context. A CSS match may cost time
// in proportion to an element's siblings (nth-child), so the look is
// frequent.
const checkEvery = 64

// Document is one parsed answer (or a document found inside one). It is
// used by one goroutine, for the time of one call: its context is that
// call's, and bounds the work of every evaluation in it.
type Document struct {
	ctx    context.Context
	format Format
	size   int // bytes of UTF-8 text parsed

	raw     []byte // json: the text, valid JSON
	val     any    // json: decoded, once decoded is true
	decoded bool
	xml     *xmlquery.Node // xml: the document node
	html    *html.Node     // html: the document node

	// items holds the item nodes (*xmlquery.Node, *html.Node) that
	// evaluation below another item never enters; nil before Exclude.
	items map[any]struct{}
	steps int
	err   error // the context's, once it ended
}

// Node is a place in a document: its root, an item, or a node inside one.
type Node struct {
	json any // a decoded JSON value
	xml  *xmlquery.Node
	attr int // xml: the attribute of xml, or -1
	html *html.Node
}

// Value is what a selector found, as text.
type Value struct {
	// Text is the value's text: trimmed; a JSON number's literal.
	Text string
	// Number is true for a JSON number.
	Number bool
	// Bool is true for a JSON boolean.
	Bool bool
	// NotText is true for a JSON object or array: present, but not text.
	NotText bool
}

// Parse decodes body to UTF-8 (see ToUTF8) and parses it as format f.
func Parse(ctx context.Context, f Format, c Charset, body []byte, contentType string) (*Document, error) {
	text, err := ToUTF8(f, c, body, contentType)
	if err != nil {
		return nil, err
	}
	return ParseText(ctx, f, text)
}

// ParseText parses UTF-8 text as format f: an answer already decoded, or
// a document found inside another.
func ParseText(ctx context.Context, f Format, text []byte) (*Document, error) {
	d := &Document{ctx: ctx, format: f, size: len(text)}
	var err error
	switch f {
	case JSON:
		if err = ValidJSON(text); err == nil {
			d.raw = text
		}
	case XML:
		d.xml, err = parseXML(text)
	case HTML:
		d.html, err = parseHTML(text)
	}
	if err != nil {
		return nil, err
	}
	return d, nil
}

// Format is the document's format.
func (d *Document) Format() Format { return d.format }

// Size is the length of the document's UTF-8 text.
func (d *Document) Size() int { return d.size }

// JSON is the text of a JSON document.
func (d *Document) JSON() []byte { return d.raw }

// Root is the document itself: the decoded value of a JSON document, the
// document node of XML and HTML.
func (d *Document) Root() (Node, error) {
	switch d.format {
	case XML:
		return Node{xml: d.xml, attr: -1}, nil
	case HTML:
		return Node{html: d.html}, nil
	}
	if !d.decoded {
		v, err := decodeJSON(d.raw)
		if err != nil {
			return Node{}, err
		}
		d.val, d.decoded = v, true
	}
	return Node{json: d.val}, nil
}

// Element is an embedded XML document's root element, which the fields
// of its items select in (the document node of other formats).
func (d *Document) Element() (Node, error) {
	n, err := d.Root()
	if err != nil || d.format != XML {
		return n, err
	}
	for c := d.xml.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == xmlquery.ElementNode {
			return Node{xml: c, attr: -1}, nil
		}
	}
	return n, nil
}

// HTML is n's element (html documents), or nil.
func (n Node) HTML() *html.Node { return n.html }

// XML is n's element (xml documents), or nil: nil too for an attribute.
func (n Node) XML() *xmlquery.Node {
	if n.attr != -1 {
		return nil
	}
	return n.xml
}

// JSON is n's decoded value (json documents): nil, a string, a
// json.Number, a bool, []any or map[string]any.
func (n Node) JSON() any { return n.json }

// Err is the context's error when it ended during an evaluation: what was
// found until then is incomplete.
func (d *Document) Err() error { return d.err }

// tick counts one step of work and reports whether work may go on: false
// once the document's context has ended.
func (d *Document) tick() bool {
	if d.err != nil {
		return false
	}
	if d.steps++; d.steps%checkEvery == 0 {
		if err := d.ctx.Err(); err != nil {
			d.err = err
			return false
		}
	}
	return true
}

// Exclude records items as the document's items: evaluation below one of
// them never enters another.
func (d *Document) Exclude(items []Node) {
	if d.format == JSON || len(items) < 2 {
		return
	}
	if d.items == nil {
		d.items = make(map[any]struct{}, len(items))
	}
	for _, n := range items {
		switch {
		case n.xml != nil:
			d.items[n.xml] = struct{}{}
		case n.html != nil:
			d.items[n.html] = struct{}{}
		}
	}
}

// ErrItemsNotFound is a JSON items pointer that leads nowhere in the
// answer: not the shape the configuration describes.
var ErrItemsNotFound = errors.New("not found in the answer")

// Items returns the nodes sel selects at n: the elements of the array a
// JSON pointer leads to (none for null; an error when it leads elsewhere
// or nowhere), the nodes a JSONPath or an XPath selects, the HTML
// elements a CSS selector matches; in document order.
func (d *Document) Items(sel Selector, n Node) ([]Node, error) {
	var items []Node
	switch d.format {
	case JSON:
		if sel.path != nil {
			for _, v := range sel.path.Select(n.json) {
				items = append(items, Node{json: v})
			}
			break
		}
		v, found := jsonResolve(n.json, sel.pointer)
		switch a := v.(type) {
		case nil:
			if !found {
				return nil, fmt.Errorf("items pointer %q: %w", sel.src, ErrItemsNotFound)
			}
		case []any:
			for _, e := range a {
				// A null element is an item too, without an id.
				items = append(items, Node{json: e})
			}
		default:
			return nil, fmt.Errorf("items pointer %q does not lead to an array", sel.src)
		}
	case XML:
		var err error
		if items, err = d.xmlItems(sel.xpath, n); err != nil {
			return nil, err
		}
	case HTML:
		for _, m := range d.htmlMatches(n.html, sel.css, true) {
			items = append(items, Node{html: m})
		}
	}
	return items, d.err
}

// Values appends to dst what sel finds at n (every match, or only the
// first), absent values (JSON null, a missing attribute) left out. Text
// from markup stops growing past about limit bytes (0: no limit).
func (d *Document) Values(sel Selector, n Node, all bool, limit int, dst []Value) ([]Value, error) {
	switch d.format {
	case JSON:
		if sel.path != nil {
			for _, v := range sel.path.Select(n.json) {
				if val, ok := jsonValue(v); ok {
					dst = append(dst, val)
					if !all {
						break
					}
				}
			}
			break
		}
		if v, found := jsonResolve(n.json, sel.pointer); found {
			if val, ok := jsonValue(v); ok {
				dst = append(dst, val)
			}
		}
	case XML:
		var err error
		if dst, err = d.xmlValues(sel.xpath, n, all, limit, dst); err != nil {
			return dst, err
		}
	case HTML:
		dst = d.htmlValues(sel, n.html, all, limit, dst)
	}
	return dst, d.err
}

// First is the first value sel finds at n; ok is false when there is none.
func (d *Document) First(sel Selector, n Node) (v Value, ok bool, err error) {
	var buf [1]Value
	vals, err := d.Values(sel, n, false, 0, buf[:0])
	if err != nil || len(vals) == 0 {
		return Value{}, false, err
	}
	return vals[0], true, nil
}

// Present reports whether sel finds something at n (see the package doc).
func (d *Document) Present(sel Selector, n Node) (bool, error) {
	switch d.format {
	case JSON:
		if sel.path != nil {
			for _, v := range sel.path.Select(n.json) {
				if jsonTruthy(v) {
					return true, nil
				}
			}
			return false, nil
		}
		v, found := jsonResolve(n.json, sel.pointer)
		return found && jsonTruthy(v), nil
	case XML:
		found, err := d.xmlPresent(sel.xpath, n)
		if err == nil {
			err = d.err
		}
		return found, err
	}
	for _, m := range d.htmlMatches(n.html, sel.css, sel.attr != "") {
		if sel.attr == "" {
			return true, d.err
		}
		if _, ok := htmlAttr(m, sel.attr); ok {
			return true, d.err
		}
	}
	return false, d.err
}

// Text is the whole text of node n, as a document held inside another is
// read from it: a JSON string's value (other JSON values as their
// literal), an XML node's string value, an HTML element's text content
// as written (no white space collapsed) or, when sel names one, the value
// of its attribute. ok is false when there is none.
func (d *Document) Text(sel Selector, n Node) (string, bool) {
	switch d.format {
	case JSON:
		if s, ok := n.json.(string); ok {
			return s, true
		}
		v, ok := jsonValue(n.json)
		return v.Text, ok && !v.NotText
	case XML:
		nav := d.xmlNav(n)
		return strings.TrimSpace(nav.Value()), true
	}
	if sel.attr != "" {
		return htmlAttr(n.html, sel.attr)
	}
	return string(validUTF8(d.htmlText(nil, n.html, false, 0))), true
}

// FirstText is the whole text of the first node sel selects at n, as
// Text reads it (or the expression's own value, for an XPath that does
// not select nodes); ok is false when there is none.
func (d *Document) FirstText(sel Selector, n Node) (string, bool, error) {
	switch d.format {
	case JSON:
		var v any
		if sel.path != nil {
			nodes := sel.path.Select(n.json)
			if len(nodes) == 0 {
				return "", false, nil
			}
			v = nodes[0]
		} else {
			var found bool
			if v, found = jsonResolve(n.json, sel.pointer); !found {
				return "", false, nil
			}
		}
		if v == nil {
			return "", false, nil
		}
		s, ok := d.Text(sel, Node{json: v})
		return s, ok, nil
	case XML:
		items, err := d.xmlItems(sel.xpath, n)
		if err != nil {
			// Not a node-set: the expression's own value.
			v, ok, err := d.First(sel, n)
			return v.Text, ok, err
		}
		if len(items) == 0 {
			return "", false, d.err
		}
		s, ok := d.Text(sel, items[0])
		return s, ok, d.err
	}
	m := d.htmlMatches(n.html, sel.css, false)
	if len(m) == 0 {
		return "", false, d.err
	}
	s, ok := d.Text(sel, Node{html: m[0]})
	return s, ok, d.err
}

// HTMLAll returns every element below n that an html selector matches,
// whether or not they are inside other items (a table's header cells).
func (d *Document) HTMLAll(sel Selector, n *html.Node) []*html.Node {
	if sel.css == nil {
		return []*html.Node{n}
	}
	saved := d.items
	d.items = nil
	defer func() { d.items = saved }()
	return d.htmlMatches(n, sel.css, true)
}

// HTMLText is the text of element n, trimmed, with white space collapsed,
// at most about limit bytes (0: no limit).
func (d *Document) HTMLText(n *html.Node, limit int) string {
	return string(validUTF8(d.htmlText(nil, n, true, limit)))
}

// Tick counts one step of work done by a caller walking the document;
// false once the context has ended.
func (d *Document) Tick() bool { return d.tick() }
