package document

import (
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"unicode"

	"github.com/andybalholm/cascadia"
	"github.com/antchfx/xpath"
	"github.com/theory/jsonpath"
)

// Selector is a compiled selector of one format (see the package doc).
type Selector struct {
	src    string
	format Format
	// json: exactly one of pointer and path.
	pointer Pointer
	path    *jsonpath.Path
	// xml
	xpath *xpathExpr
	// html: css nil is the context element itself; attr "" reads the text.
	css  cascadia.Matcher
	attr string
}

// String returns the selector as configured.
func (s Selector) String() string { return s.src }

// Format is the format s selects in.
func (s Selector) Format() Format { return s.format }

// Pointer returns the JSON pointer s is, if it is one.
func (s Selector) Pointer() (Pointer, bool) {
	return s.pointer, s.format == JSON && s.path == nil
}

// Attr is the attribute an html selector reads ("" for its text).
func (s Selector) Attr() string { return s.attr }

// Compile compiles text as a selector of format f. namespaces binds XPath
// prefixes (xml only; nil for none).
func Compile(f Format, namespaces map[string]string, text string) (Selector, error) {
	s := Selector{format: f, src: text}
	var err error
	switch f {
	case JSON:
		if strings.HasPrefix(text, "$") {
			s.path, err = compileJSONPath(text)
		} else {
			s.pointer, err = CompilePointer(text)
			if err != nil && !strings.HasPrefix(text, "/") {
				err = errors.New(`want an RFC 6901 JSON pointer ("" or starting with "/") or an RFC 9535 JSONPath (starting with "$")`)
			} else if err != nil {
				err = fmt.Errorf("not an RFC 6901 JSON pointer: %w (escape \"~\" as ~0 and \"/\" inside a name as ~1)", err)
			}
		}
	case XML:
		s.xpath, err = compileXPath(text, namespaces)
	case HTML:
		s.css, s.attr, err = compileCSS(text)
	}
	return s, err
}

// CompileItems compiles an items selector: for xml and html it must be
// given; withAttr allows html's "@attr" (items whose attribute holds a
// document of its own).
func CompileItems(f Format, namespaces map[string]string, text string, withAttr bool) (Selector, error) {
	switch {
	case f == JSON:
	case text == "":
		return Selector{}, fmt.Errorf("required with format %s", f)
	case f == HTML && !withAttr:
		if _, attr := SplitAttr(text); attr != "" {
			return Selector{}, errors.New(`selects item elements: "@attr" is for fields, or for items with a format of their own`)
		}
	}
	return Compile(f, namespaces, text)
}

// compileCSS compiles a CSS selector with an optional "@attr" suffix. ""
// and "." (with or without "@attr") are the context element itself, whose
// matcher is nil.
func compileCSS(text string) (cascadia.Matcher, string, error) {
	if strings.HasSuffix(text, "@") {
		return nil, "", errors.New(`"@" must be followed by an attribute name`)
	}
	sel, attr := SplitAttr(text)
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

// SplitAttr splits "sel@attr" into its selector and its attribute name
// (lower case, as HTML parsing makes them), when what follows the last
// '@' is an attribute name; otherwise the whole text is the selector (an
// '@' inside a quoted attribute value, a[href="mailto:x@y"], stays in it).
func SplitAttr(text string) (sel, attr string) {
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

// IsNCName reports whether s is an XML name without a colon, as namespace
// prefixes are.
func IsNCName(s string) bool {
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
