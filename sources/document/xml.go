package document

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/antchfx/xmlquery"
	"github.com/antchfx/xpath"
)

// MaxDepth bounds the nesting of XML and HTML documents: x/net/html
// refuses more than 512 open elements, and XML documents get the same
// bound.
const MaxDepth = 512

// parseXML parses a UTF-8 XML document into a tree that XPath can read.
// Whitespace-only text is kept; comments, processing instructions and
// directives (a DOCTYPE) are dropped. It refuses what is not one
// well-formed element tree, and nesting deeper than MaxDepth.
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
			return nil, fmt.Errorf("invalid XML: %s", boundedError(err))
		}
		switch t := tok.(type) {
		case xml.StartElement:
			if depth == 0 {
				if roots++; roots > 1 {
					return nil, errors.New("invalid XML: more than one root element")
				}
			}
			if depth++; depth > MaxDepth {
				return nil, fmt.Errorf("XML nested deeper than %d elements", MaxDepth)
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

// maxErrorText bounds the text of a parser's error, which may quote the
// answer (an element name of a megabyte, say).
const maxErrorText = 200

// boundedError is err's text, at most maxErrorText bytes of valid UTF-8.
func boundedError(err error) string {
	s := strings.ToValidUTF8(err.Error(), "\uFFFD")
	if len(s) <= maxErrorText {
		return s
	}
	cut := maxErrorText
	for cut > 0 && !utf8Start(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// xmlNav is an XPath navigator over a document's tree (as
// xmlquery.NodeNavigator is) that never enters an item other than the one
// it started in (Document.Exclude) and stops moving once the document's
// context has ended: an expression is bounded by the items' own subtrees
// and by the call's deadline.
type xmlNav struct {
	d          *Document
	root, curr *xmlquery.Node
	item       *xmlquery.Node // the item evaluated; nil for the document
	attr       int
}

func (d *Document) xmlNav(n Node) *xmlNav {
	return &xmlNav{d: d, root: d.xml, curr: n.xml, item: n.xml, attr: n.attr}
}

// closed reports whether n's subtree is out of bounds: another item's.
func (x *xmlNav) closed(n *xmlquery.Node) bool {
	if x.d.items == nil || n == x.item {
		return false
	}
	_, ok := x.d.items[n]
	return ok
}

func (x *xmlNav) Current() *xmlquery.Node { return x.curr }

func (x *xmlNav) NodeType() xpath.NodeType {
	switch x.curr.Type {
	case xmlquery.CommentNode:
		return xpath.CommentNode
	case xmlquery.TextNode, xmlquery.CharDataNode, xmlquery.NotationNode:
		return xpath.TextNode
	case xmlquery.DeclarationNode, xmlquery.DocumentNode:
		return xpath.RootNode
	case xmlquery.ElementNode:
		if x.attr != -1 {
			return xpath.AttributeNode
		}
		return xpath.ElementNode
	}
	return xpath.ElementNode
}

func (x *xmlNav) LocalName() string {
	if x.attr != -1 {
		return x.curr.Attr[x.attr].Name.Local
	}
	return x.curr.Data
}

func (x *xmlNav) Prefix() string {
	if x.attr != -1 {
		return x.curr.Attr[x.attr].Name.Space
	}
	return x.curr.Prefix
}

// NamespaceURL is read by the XPath library to match prefixed names.
func (x *xmlNav) NamespaceURL() string {
	if x.attr != -1 {
		return x.curr.Attr[x.attr].NamespaceURI
	}
	return x.curr.NamespaceURI
}

func (x *xmlNav) Value() string {
	switch x.curr.Type {
	case xmlquery.CommentNode, xmlquery.TextNode, xmlquery.CharDataNode:
		return x.curr.Data
	case xmlquery.ElementNode, xmlquery.DocumentNode:
		if x.attr != -1 {
			return x.curr.Attr[x.attr].Value
		}
		return string(x.text(nil, x.curr, 0))
	}
	return ""
}

// text appends the text content of n without entering other items' subtrees, at
// most about limit bytes (0: no limit).
func (x *xmlNav) text(dst []byte, n *xmlquery.Node, limit int) []byte {
	if n.Type == xmlquery.TextNode || n.Type == xmlquery.CharDataNode {
		return append(dst, n.Data...)
	}
	for c := n.FirstChild; c != nil; {
		if !x.d.tick() || (limit > 0 && len(dst) > limit) {
			return dst
		}
		if c.Type == xmlquery.TextNode || c.Type == xmlquery.CharDataNode {
			dst = append(dst, c.Data...)
		}
		if c.FirstChild != nil && !x.closed(c) {
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

func (x *xmlNav) Copy() xpath.NodeNavigator {
	n := *x
	return &n
}

func (x *xmlNav) MoveToRoot() { x.curr, x.attr = x.root, -1 }

func (x *xmlNav) MoveToParent() bool {
	if x.attr != -1 {
		x.attr = -1
		return true
	}
	if p := x.curr.Parent; p != nil && x.d.tick() {
		x.curr = p
		return true
	}
	return false
}

func (x *xmlNav) MoveToNextAttribute() bool {
	if x.attr >= len(x.curr.Attr)-1 {
		return false
	}
	x.attr++
	return true
}

func (x *xmlNav) MoveToChild() bool {
	if x.attr != -1 || x.closed(x.curr) {
		return false
	}
	if c := x.curr.FirstChild; c != nil && x.d.tick() {
		x.curr = c
		return true
	}
	return false
}

func (x *xmlNav) MoveToFirst() bool {
	if x.attr != -1 || x.curr.PrevSibling == nil || !x.d.tick() {
		return false
	}
	for x.curr.PrevSibling != nil {
		x.curr = x.curr.PrevSibling
	}
	return true
}

func (x *xmlNav) MoveToNext() bool {
	return x.moveSibling(func(n *xmlquery.Node) *xmlquery.Node { return n.NextSibling })
}

func (x *xmlNav) MoveToPrevious() bool {
	return x.moveSibling(func(n *xmlquery.Node) *xmlquery.Node { return n.PrevSibling })
}

// moveSibling moves to the first sibling in the direction next that is
// not white space only, as xmlquery's navigator does.
func (x *xmlNav) moveSibling(next func(*xmlquery.Node) *xmlquery.Node) bool {
	if x.attr != -1 {
		return false
	}
	for n := next(x.curr); n != nil; n = next(n) {
		if !x.d.tick() {
			return false
		}
		if n.Type != xmlquery.TextNode || strings.TrimSpace(n.Data) != "" {
			x.curr = n
			return true
		}
	}
	return false
}

func (x *xmlNav) MoveTo(other xpath.NodeNavigator) bool {
	o, ok := other.(*xmlNav)
	if !ok || o.root != x.root {
		return false
	}
	x.curr, x.attr = o.curr, o.attr
	return true
}

// xmlValues evaluates x at n: the string value of each node selected
// (every one, or the first), or the expression's own value.
func (d *Document) xmlValues(x *xpathExpr, n Node, all bool, limit int, dst []Value) ([]Value, error) {
	nav := d.xmlNav(n)
	err := x.eval(nav, func(v any) error {
		switch v := v.(type) {
		case *xpath.NodeIterator:
			for v.MoveNext() {
				cur, ok := v.Current().(*xmlNav)
				if !ok {
					continue
				}
				var text []byte
				if cur.attr != -1 {
					text = []byte(cur.curr.Attr[cur.attr].Value)
				} else {
					text = cur.text(nil, cur.curr, limit)
				}
				dst = append(dst, Value{Text: string(bytes.TrimSpace(text))})
				if !all {
					break
				}
			}
		case string:
			dst = append(dst, Value{Text: strings.TrimSpace(v)})
		case float64:
			if !math.IsNaN(v) {
				dst = append(dst, Value{Text: strconv.FormatFloat(v, 'f', -1, 64)})
			}
		case bool:
			dst = append(dst, Value{Text: strconv.FormatBool(v)})
		}
		return nil
	})
	return dst, err
}

// xmlPresent is XPath's boolean() of x at n.
func (d *Document) xmlPresent(x *xpathExpr, n Node) (found bool, err error) {
	err = x.eval(d.xmlNav(n), func(v any) error {
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

// xmlItems returns each node x selects at n, in document order; an
// expression that does not select nodes is an error.
func (d *Document) xmlItems(x *xpathExpr, n Node) (items []Node, err error) {
	err = x.eval(d.xmlNav(n), func(v any) error {
		it, ok := v.(*xpath.NodeIterator)
		if !ok {
			return fmt.Errorf("items XPath %q does not select nodes", x.src)
		}
		for it.MoveNext() {
			if cur, ok := it.Current().(*xmlNav); ok {
				items = append(items, Node{xml: cur.curr, attr: cur.attr})
			}
		}
		return nil
	})
	return items, err
}
