package portalsim_test

// A small reader of the selectors AggregatorYAML writes for the SPEC 8
// dialects, so that the tests can read each portal through its mapping as
// the aggregator will: the subset of XPath 1.0 of location paths of
// child steps (prefix:name, *, a final @attr), and the subset of CSS of
// descendant combinators of compound selectors (tag, #id, .class,
// :nth-child(n), [attr=value], the value maybe quoted) with SPEC 8's
// "sel@attr". It is a test
// device, not a parser to trust with anything else.

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/net/html"
)

// xnode is an element of a parsed XML document.
type xnode struct {
	name     xml.Name
	attrs    []xml.Attr
	children []*xnode
	text     strings.Builder // the string value: every descendant's text
}

func parseXML(b []byte) (*xnode, error) {
	dec := xml.NewDecoder(bytes.NewReader(b))
	root := &xnode{}
	stack := []*xnode{root}
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			n := &xnode{name: t.Name, attrs: t.Attr}
			top := stack[len(stack)-1]
			top.children = append(top.children, n)
			stack = append(stack, n)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			for _, n := range stack {
				n.text.Write(t)
			}
		}
	}
	if len(stack) != 1 {
		return nil, fmt.Errorf("unclosed elements")
	}
	return root, nil
}

// xpath evaluates path from ctx (the document node for an absolute path)
// and returns the string values of what it selects.
func xpath(doc, ctx *xnode, ns map[string]string, path string) ([]*xnode, []string, error) {
	nodes := []*xnode{ctx}
	if strings.HasPrefix(path, "/") {
		nodes, path = []*xnode{doc}, path[1:]
	}
	steps := strings.Split(path, "/")
	for i, step := range steps {
		if attr, ok := strings.CutPrefix(step, "@"); ok {
			if i != len(steps)-1 {
				return nil, nil, fmt.Errorf("attribute step %q not last", step)
			}
			var vals []string
			for _, n := range nodes {
				for _, a := range n.attrs {
					if a.Name.Space == "" && a.Name.Local == attr {
						vals = append(vals, a.Value)
					}
				}
			}
			return nil, vals, nil
		}
		var space, local string
		if step != "*" {
			// An unprefixed name is in no namespace, as in XPath 1.0.
			prefix, name, ok := strings.Cut(step, ":")
			local = prefix
			if ok {
				if space, ok = ns[prefix]; !ok {
					return nil, nil, fmt.Errorf("prefix %q not declared", prefix)
				}
				local = name
			}
		}
		var next []*xnode
		for _, n := range nodes {
			for _, c := range n.children {
				if step == "*" || c.name.Space == space && c.name.Local == local {
					next = append(next, c)
				}
			}
		}
		nodes = next
	}
	vals := make([]string, 0, len(nodes))
	for _, n := range nodes {
		vals = append(vals, n.text.String())
	}
	return nodes, vals, nil
}

// compound is one compound CSS selector.
type compound struct {
	tag, id   string
	classes   []string
	nthChild  int
	attrName  string
	attrValue string
}

var compoundPart = regexp.MustCompile(`^(?:[a-z][a-z0-9]*|#[\w-]+|\.[\w-]+|:nth-child\(\d+\)|\[[\w-]+=(?:"[^"]*"|'[^']*'|[^\]]+)\])`)

func parseCompound(s string) (compound, error) {
	var c compound
	for s != "" {
		m := compoundPart.FindString(s)
		if m == "" {
			return c, fmt.Errorf("unsupported selector at %q", s)
		}
		s = s[len(m):]
		switch {
		case m[0] == '#':
			c.id = m[1:]
		case m[0] == '.':
			c.classes = append(c.classes, m[1:])
		case m[0] == ':':
			c.nthChild, _ = strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(m, ":nth-child("), ")"))
		case m[0] == '[':
			c.attrName, c.attrValue, _ = strings.Cut(m[1:len(m)-1], "=")
			c.attrValue = strings.Trim(c.attrValue, `"'`)
		default:
			c.tag = m
		}
	}
	return c, nil
}

func attrOf(n *html.Node, name string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val, true
		}
	}
	return "", false
}

func (c compound) matches(n *html.Node) bool {
	if n.Type != html.ElementNode || c.tag != "" && n.Data != c.tag {
		return false
	}
	if c.id != "" {
		if v, _ := attrOf(n, "id"); v != c.id {
			return false
		}
	}
	if len(c.classes) > 0 {
		v, _ := attrOf(n, "class")
		for _, cl := range c.classes {
			if !strings.Contains(" "+v+" ", " "+cl+" ") {
				return false
			}
		}
	}
	if c.attrName != "" {
		if v, ok := attrOf(n, c.attrName); !ok || v != c.attrValue {
			return false
		}
	}
	if c.nthChild > 0 {
		i := 0
		for s := n.Parent.FirstChild; s != nil; s = s.NextSibling {
			if s.Type == html.ElementNode {
				i++
			}
			if s == n {
				break
			}
		}
		if i != c.nthChild {
			return false
		}
	}
	return true
}

// css selects the descendants of root matching sel (descendant
// combinators only), in document order.
func css(root *html.Node, sel string) ([]*html.Node, error) {
	var parts []compound
	for _, f := range strings.Fields(sel) {
		c, err := parseCompound(f)
		if err != nil {
			return nil, err
		}
		parts = append(parts, c)
	}
	nodes := []*html.Node{root}
	for _, c := range parts {
		var next []*html.Node
		seen := make(map[*html.Node]bool)
		for _, n := range nodes {
			var walk func(*html.Node)
			walk = func(x *html.Node) {
				for ch := x.FirstChild; ch != nil; ch = ch.NextSibling {
					if c.matches(ch) && !seen[ch] {
						seen[ch] = true
						next = append(next, ch)
					}
					walk(ch)
				}
			}
			walk(n)
		}
		nodes = next
	}
	return nodes, nil
}

// cssValue reads a SPEC 8 field: "sel" is the first match's text,
// trimmed with inner whitespace collapsed; "sel@attr" its attribute.
func cssValue(item *html.Node, field string) (string, bool, error) {
	sel, attr := field, ""
	if i := strings.LastIndex(field, "@"); i >= 0 {
		sel, attr = field[:i], field[i+1:]
	}
	nodes := []*html.Node{item}
	if sel != "" {
		var err error
		if nodes, err = css(item, sel); err != nil {
			return "", false, err
		}
	}
	if len(nodes) == 0 {
		return "", false, nil
	}
	if attr != "" {
		v, ok := attrOf(nodes[0], attr)
		return v, ok, nil
	}
	return strings.Join(strings.Fields(textOf(nodes[0])), " "), true, nil
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(x *html.Node) {
		if x.Type == html.TextNode {
			b.WriteString(x.Data)
		}
		for c := x.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}
