package sources

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/antchfx/xmlquery"
	"github.com/antchfx/xpath"

	"github.com/multas/aggregator"
)

// maxMarkupDepth bounds the nesting of XML and HTML answers: x/net/html
// refuses more than 512 open elements, and XML answers get the same bound.
const maxMarkupDepth = 512

// xpathExpr is a compiled XPath expression. An *xpath.Expr keeps state
// while it is evaluated (and its clones share some of it), so each
// evaluation takes an Expr of its own from the pool.
type xpathExpr struct {
	src  string
	pool *sync.Pool // of *xpath.Expr
}

// compileXPath compiles an XPath 1.0 expression with the namespaces
// (prefix → URI) it may use; "" is ".". An undeclared prefix is an error.
func compileXPath(text string, namespaces map[string]string) (*xpathExpr, error) {
	if text == "" {
		text = "."
	}
	ns := maps.Clone(namespaces)
	if ns == nil {
		ns = map[string]string{} // so that an undeclared prefix is an error
	}
	e, err := xpath.CompileWithNS(text, ns)
	if err != nil {
		return nil, fmt.Errorf("not an XPath 1.0 expression: %w", err)
	}
	x := &xpathExpr{src: text, pool: &sync.Pool{}}
	x.pool.New = func() any {
		e, err := xpath.CompileWithNS(text, ns)
		if err != nil {
			return nil // compiled once already: cannot happen
		}
		return e
	}
	x.pool.Put(e)
	return x, nil
}

// eval evaluates x with nav as the context node and passes the result to
// use before the expression goes back to the pool. A panic inside the
// XPath library is reported as an error.
func (x *xpathExpr) eval(nav xpath.NodeNavigator, use func(any) error) (err error) {
	e, ok := x.pool.Get().(*xpath.Expr)
	if !ok {
		return fmt.Errorf("XPath %q cannot be compiled", x.src)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("XPath %q failed: %v", x.src, r)
			return // this Expr's state is unknown: not reused
		}
		x.pool.Put(e)
	}()
	return use(e.Evaluate(nav.Copy()))
}

// parseXML parses a UTF-8 XML document (see toUTF8) into a tree that
// XPath can read. Whitespace-only text is kept; comments, processing
// instructions and directives (a DOCTYPE) are dropped. It refuses what is
// not one well-formed element tree, and nesting deeper than
// maxMarkupDepth.
func parseXML(body []byte) (*xmlquery.Node, error) {
	d := xml.NewDecoder(bytes.NewReader(body))
	d.Strict = true
	d.Entity = xml.HTMLEntity // &nbsp; and friends, as some portals write
	// The body is already UTF-8, whatever its prolog says.
	d.CharsetReader = func(_ string, r io.Reader) (io.Reader, error) { return r, nil }
	doc := &xmlquery.Node{Type: xmlquery.DocumentNode}
	cur, depth, roots := doc, 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("invalid XML: %w", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				if roots++; roots > 1 {
					return nil, errors.New("invalid XML: more than one root element")
				}
			}
			if depth++; depth > maxMarkupDepth {
				return nil, fmt.Errorf("XML nested deeper than %d elements", maxMarkupDepth)
			}
			n := &xmlquery.Node{Type: xmlquery.ElementNode, Data: t.Name.Local, NamespaceURI: t.Name.Space}
			for _, a := range t.Attr {
				if a.Name.Space == "xmlns" || (a.Name.Space == "" && a.Name.Local == "xmlns") {
					continue // a namespace declaration, not an attribute
				}
				// Prefixes stay empty, so that unprefixed names match any
				// namespace; prefixed ones match by URI.
				n.Attr = append(n.Attr, xmlquery.Attr{Name: xml.Name{Local: a.Name.Local}, Value: a.Value, NamespaceURI: a.Name.Space})
			}
			xmlquery.AddChild(cur, n)
			cur = n
		case xml.EndElement:
			depth--
			cur = cur.Parent
		case xml.CharData:
			if depth > 0 {
				xmlquery.AddChild(cur, &xmlquery.Node{Type: xmlquery.TextNode, Data: string(t)})
			}
		}
	}
	if roots == 0 {
		if len(bytes.TrimSpace(body)) == 0 {
			return nil, errors.New("empty answer")
		}
		return nil, errors.New("invalid XML: no root element")
	}
	return doc, nil
}

// xmlValue appends the string value of the node nav is on: an element's
// text content, an attribute's or a text node's value.
func xmlValue(dst []byte, nav xpath.NodeNavigator) []byte {
	x, ok := nav.(*xmlquery.NodeNavigator)
	if !ok || nav.NodeType() == xpath.AttributeNode {
		return append(dst, nav.Value()...)
	}
	return xmlText(dst, x.Current())
}

// xmlText appends the text content of n, walking its subtree without
// recursion.
func xmlText(dst []byte, n *xmlquery.Node) []byte {
	if n.Type == xmlquery.TextNode || n.Type == xmlquery.CharDataNode {
		return append(dst, n.Data...)
	}
	for c := n.FirstChild; c != nil; {
		if c.Type == xmlquery.TextNode || c.Type == xmlquery.CharDataNode {
			dst = append(dst, c.Data...)
		}
		if c.FirstChild != nil {
			c = c.FirstChild
			continue
		}
		for c != n && c.NextSibling == nil {
			c = c.Parent
		}
		if c == n {
			break
		}
		c = c.NextSibling
	}
	return dst
}

// xmlFirst reads x at the context node nav: the string value of the first
// node selected, or the expression's own value; trimmed. ok is false when
// no node is selected.
func xmlFirst(nav xpath.NodeNavigator, x *xpathExpr) (value []byte, ok bool, err error) {
	err = x.eval(nav, func(v any) error {
		switch v := v.(type) {
		case *xpath.NodeIterator:
			if v.MoveNext() {
				value, ok = bytes.TrimSpace(xmlValue(nil, v.Current())), true
			}
		case string:
			value, ok = bytes.TrimSpace([]byte(v)), true
		case float64:
			if !math.IsNaN(v) {
				value, ok = strconv.AppendFloat(nil, v, 'f', -1, 64), true
			}
		case bool:
			value, ok = strconv.AppendBool(nil, v), true
		}
		return nil
	})
	return value, ok, err
}

// xmlPresent is XPath's boolean() of x at nav.
func xmlPresent(nav xpath.NodeNavigator, x *xpathExpr) (found bool, err error) {
	err = x.eval(nav, func(v any) error {
		switch v := v.(type) {
		case *xpath.NodeIterator:
			found = v.MoveNext()
		case string:
			found = v != ""
		case float64:
			found = v != 0 && !math.IsNaN(v)
		case bool:
			found = v
		}
		return nil
	})
	return found, err
}

// xmlItems returns a navigator on each node x selects in the document, in
// document order; an expression that does not select nodes is an error.
func xmlItems(doc *xmlquery.Node, x *xpathExpr) (items []xpath.NodeNavigator, err error) {
	err = x.eval(xmlquery.CreateXPathNavigator(doc), func(v any) error {
		it, ok := v.(*xpath.NodeIterator)
		if !ok {
			return fmt.Errorf("items XPath %q does not select nodes", x.src)
		}
		for it.MoveNext() {
			items = append(items, it.Current().Copy())
		}
		return nil
	})
	return items, err
}

// applyXML maps a parsed XML answer: each node the items XPath selects is
// an item, and each field's XPath is evaluated with it as the context
// node.
func (m *mapping) applyXML(d *document) ([]aggregator.Infraction, error) {
	items, err := xmlItems(d.xml, m.items.xpath)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 && m.notFound != nil {
		return nil, m.noItems()
	}
	out := make([]aggregator.Infraction, len(items))
	for i, item := range items {
		var texts [numFields][]byte
		for f := range numFields {
			if !m.mapped[f] {
				continue
			}
			v, _, err := xmlFirst(item, m.fields[f].xpath)
			if err != nil {
				return nil, fmt.Errorf("item %d: field %s: %w", i, fieldName(f), err)
			}
			texts[f] = validUTF8(v)
		}
		if err := m.fill(&texts, false, &out[i]); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
	}
	return out, nil
}

// validUTF8 replaces invalid UTF-8 in b (which markup text may hold) by
// U+FFFD, as encoding/json does for JSON answers.
func validUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	return bytes.ToValidUTF8(b, []byte("\uFFFD"))
}
