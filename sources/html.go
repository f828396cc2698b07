package sources

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"

	"github.com/multas/aggregator"
)

// ctxCheckEvery is how many elements CSS matching visits between two
// looks at the call's context. A match may cost time in proportion to an
// element's siblings (nth-child), so the look is frequent.
const ctxCheckEvery = 64

// compileCSS compiles a CSS selector with an optional "@attr" suffix. ""
// and "." (with or without "@attr") are the context element itself, whose
// matcher is nil.
func compileCSS(text string) (cascadia.Matcher, string, error) {
	if strings.HasSuffix(text, "@") {
		return nil, "", errors.New(`"@" must be followed by an attribute name`)
	}
	sel, attr := splitAttr(text)
	sel = strings.TrimSpace(sel)
	if sel == "" || sel == "." {
		return nil, attr, nil
	}
	g, err := cascadia.ParseGroup(sel)
	if err != nil {
		return nil, "", fmt.Errorf("not a CSS selector: %w", err)
	}
	return g, attr, nil
}

// splitAttr splits "sel@attr" into its selector and its attribute name
// (lower case, as HTML parsing makes them), when what follows the last '@'
// is an attribute name; otherwise the whole text is the selector (an '@'
// inside a quoted attribute value, a[href="mailto:x@y"], stays in it).
func splitAttr(text string) (sel, attr string) {
	i := strings.LastIndexByte(text, '@')
	if i < 0 || !isAttrName(text[i+1:]) {
		return text, ""
	}
	return text[:i], strings.ToLower(text[i+1:])
}

// isAttrName reports whether s is a plausible attribute name: letters,
// digits, '-', '_', ':' and '.'.
func isAttrName(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("-_:.", r) {
			return false
		}
	}
	return true
}

// parseHTML parses a UTF-8 HTML document (see toUTF8). x/net/html accepts
// any text, as browsers do, but refuses more than 512 open elements.
func parseHTML(body []byte) (*html.Node, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("empty answer")
	}
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("invalid HTML: %w", err)
	}
	return doc, nil
}

// walk calls visit on every element below root, in document order, until
// visit returns true. It returns the context's error when the call's
// context ends first.
func (d *document) walk(root *html.Node, visit func(*html.Node) bool) error {
	steps := 0
	for n := root.FirstChild; n != nil; {
		if steps++; steps%ctxCheckEvery == 0 {
			if err := d.ctx.Err(); err != nil {
				return err
			}
		}
		if n.Type == html.ElementNode && visit(n) {
			return nil
		}
		if n.FirstChild != nil {
			n = n.FirstChild
			continue
		}
		for n != root && n.NextSibling == nil {
			n = n.Parent
		}
		if n == root {
			break
		}
		n = n.NextSibling
	}
	return nil
}

// htmlQuery returns the first element below root that css matches; a nil
// css is root itself.
func (d *document) htmlQuery(root *html.Node, css cascadia.Matcher) (*html.Node, error) {
	if css == nil {
		return root, nil
	}
	var found *html.Node
	err := d.walk(root, func(n *html.Node) bool {
		if css.Match(n) {
			found = n
			return true
		}
		return false
	})
	return found, err
}

// htmlItems returns every element of the document that css matches, in
// document order.
func (d *document) htmlItems(css cascadia.Matcher) ([]*html.Node, error) {
	if css == nil {
		return []*html.Node{d.html}, nil
	}
	var items []*html.Node
	err := d.walk(d.html, func(n *html.Node) bool {
		if css.Match(n) {
			items = append(items, n)
		}
		return false
	})
	return items, err
}

// htmlFirst reads sel below root: the text of its first match, or the
// value of the attribute it names (trimmed); ok is false when nothing
// matches or the attribute is missing.
func (d *document) htmlFirst(root *html.Node, sel selector) (value []byte, ok bool, err error) {
	n, err := d.htmlQuery(root, sel.css)
	if err != nil || n == nil {
		return nil, false, err
	}
	if sel.attr != "" {
		v, ok := htmlAttr(n, sel.attr)
		return []byte(strings.TrimSpace(v)), ok, nil
	}
	return htmlText(nil, n), true, nil
}

// htmlAttr returns the value of n's attribute name (lower case).
func htmlAttr(n *html.Node, name string) (string, bool) {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == name {
			return a.Val, true
		}
	}
	return "", false
}

// htmlText appends the text content of n, trimmed, with every run of
// white space collapsed to one space; a <br> counts as white space.
// Comments are not text.
func htmlText(dst []byte, n *html.Node) []byte {
	start, space := len(dst), false
	add := func(s string) {
		for i := 0; i < len(s); {
			r, size := utf8.DecodeRuneInString(s[i:])
			if unicode.IsSpace(r) {
				space = true
			} else {
				if space && len(dst) > start {
					dst = append(dst, ' ')
				}
				space = false
				dst = append(dst, s[i:i+size]...)
			}
			i += size
		}
	}
	if n.Type == html.TextNode {
		add(n.Data)
		return dst
	}
	for c := n.FirstChild; c != nil; {
		switch {
		case c.Type == html.TextNode:
			add(c.Data)
		case c.Type == html.ElementNode && c.Data == "br":
			space = true
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

// applyHTML maps a parsed HTML answer: each element the items selector
// matches is an item, and each field's selector is read below it.
func (m *mapping) applyHTML(d *document) ([]aggregator.Infraction, error) {
	items, err := d.htmlItems(m.items.css)
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
			v, _, err := d.htmlFirst(item, m.fields[f])
			if err != nil {
				return nil, err
			}
			texts[f] = validUTF8(v)
		}
		if err := m.fill(&texts, false, &out[i]); err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
	}
	return out, nil
}
