package document

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
)

// parseHTML parses a UTF-8 HTML document. x/net/html accepts any text,
// as browsers do, but refuses more than 512 open elements.
func parseHTML(body []byte) (*html.Node, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("empty answer")
	}
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("invalid HTML: %s", boundedError(err))
	}
	return doc, nil
}

// walk calls visit on every element below root, in document order, until
// visit returns true, never entering another item's subtree (root's own
// is open). It stops when the document's context ends.
func (d *Document) walk(root *html.Node, visit func(*html.Node) bool) {
	for n := root.FirstChild; n != nil; {
		if !d.tick() {
			return
		}
		if n.Type == html.ElementNode && visit(n) {
			return
		}
		if n.FirstChild != nil && !d.closedHTML(n, root) {
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
}

// closedHTML reports whether n, met below root, is another item.
func (d *Document) closedHTML(n, root *html.Node) bool {
	if d.items == nil || n == root {
		return false
	}
	_, ok := d.items[n]
	return ok
}

// htmlMatches returns the elements below root that css matches (every
// one, or the first); a nil css is root itself.
func (d *Document) htmlMatches(root *html.Node, css cascadia.Matcher, all bool) []*html.Node {
	if css == nil {
		return []*html.Node{root}
	}
	var found []*html.Node
	d.walk(root, func(n *html.Node) bool {
		if css.Match(n) {
			found = append(found, n)
			return !all
		}
		return false
	})
	return found
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
// white space collapsed to one space (collapse), or as it is; a <br>
// counts as white space; comments are not text. It never enters another
// item's subtree, and stops once it has more than limit bytes (0: no
// limit) or the document's context has ended.
func (d *Document) htmlText(dst []byte, n *html.Node, collapse bool, limit int) []byte {
	start, space := len(dst), false
	add := func(s string) {
		if !collapse {
			dst = append(dst, s...)
			return
		}
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
		if (limit > 0 && len(dst)-start > limit) || !d.tick() {
			return dst
		}
		switch {
		case c.Type == html.TextNode:
			add(c.Data)
		case c.Type == html.ElementNode && c.Data == "br":
			if collapse {
				space = true
			} else {
				dst = append(dst, '\n')
			}
		}
		if c.FirstChild != nil && !d.closedHTML(c, n) {
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

// htmlValues reads sel below n: the text of its matches, or the values of
// the attribute it names (trimmed; a match without it has no value).
func (d *Document) htmlValues(sel Selector, n *html.Node, all bool, limit int, dst []Value) []Value {
	for _, m := range d.htmlMatches(n, sel.css, all) {
		if sel.attr != "" {
			if v, ok := htmlAttr(m, sel.attr); ok {
				dst = append(dst, Value{Text: strings.TrimSpace(v)})
			}
			continue
		}
		dst = append(dst, Value{Text: string(validUTF8(d.htmlText(nil, m, true, limit)))})
	}
	return dst
}

// validUTF8 replaces invalid UTF-8 in b (which markup text may hold) by
// U+FFFD, as encoding/json does for JSON answers.
func validUTF8(b []byte) []byte {
	if utf8.Valid(b) {
		return b
	}
	return bytes.ToValidUTF8(b, []byte("\uFFFD"))
}
