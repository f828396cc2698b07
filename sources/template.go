package sources

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/multas/aggregator"
)

// param is a placeholder of a request template.
type param uint8

// The placeholders of SPEC 8; paramNone marks a literal part and
// paramSession a {session.NAME} (the name is kept in the part).
const (
	paramNone param = iota
	paramDomain
	paramID
	paramIDKind
	paramInfractionID
	paramPage
	paramOffset
	paramSize
	paramCursor
	paramSession
	numParams
)

// paramNames are the placeholders as written, braces included, by param.
var paramNames = [numParams]string{
	paramDomain:       "{domain}",
	paramID:           "{id}",
	paramIDKind:       "{id_kind}",
	paramInfractionID: "{infraction_id}",
	paramPage:         "{page}",
	paramOffset:       "{offset}",
	paramSize:         "{size}",
	paramCursor:       "{cursor}",
}

// sessionPrefix starts the name of a session value's placeholder.
const sessionPrefix = "{session."

// paramByName maps a placeholder as written, braces included, to its
// param; {session.NAME} is paramSession.
func paramByName(name string) (param, bool) {
	for p, n := range paramNames {
		if n != "" && n == name {
			return param(p), true
		}
	}
	if strings.HasPrefix(name, sessionPrefix) && len(name) > len(sessionPrefix)+1 {
		return paramSession, true
	}
	return paramNone, false
}

// values holds the substitutions for one request.
type values struct {
	p [numParams]string
	// session holds the values a session page gave, by name.
	session map[string]string
	// next, when set, is the URL of the request instead of the
	// operation's own (a link-style next page, already checked).
	next string
}

// get is the value of part p.
func (v *values) get(p part) string {
	if p.param == paramSession {
		return v.session[p.name]
	}
	return v.p[p.param]
}

// landing is where a placeholder's value lands, which decides how it is
// escaped: no value can change the structure of what it lands in.
type landing uint8

const (
	// inPath: a URL path segment, percent-encoded; a value that is a dot
	// segment ("." or "..") is refused.
	inPath landing = iota
	// inQuery: a URL query or form value, percent-encoded.
	inQuery
	// inJSON: the inside of a JSON string.
	inJSON
	// inXML: XML character data or attribute value.
	inXML
	// inHeader: a header value; control characters are refused.
	inHeader
	// inText: a text body of another kind, as it is.
	inText
)

// errDotSegment reports a value that would land in a URL path as a dot
// segment.
var errDotSegment = errors.New("a dot segment cannot be sent in a URL path")

// errControl reports a value with control characters bound for a header.
var errControl = errors.New("a header value cannot hold control characters")

// part is a literal or a placeholder of a compiled template.
type part struct {
	literal string
	param   param
	name    string // the NAME of a {session.NAME}
	landing landing
}

// template is text with placeholders, compiled once.
type template struct {
	parts    []part
	literals int // total length of the literal parts, to size the buffer
}

// scope says which placeholders a template may use: its operation's, and
// those that pagination and a session make available.
type scope struct {
	op       aggregator.Operation
	paging   [numParams]bool // {page}, {offset}, {size}, {cursor} as the style gives
	sessions []string        // the names a session extracts
}

// allows reports whether placeholder p (with session name) has a value in
// the scope, and if not, why.
func (s scope) allows(p param, name string) error {
	switch p {
	case paramDomain:
		if s.op == aggregator.ByDomain {
			return nil
		}
	case paramID, paramIDKind:
		if s.op == aggregator.ByID {
			return nil
		}
	case paramInfractionID:
		if s.op == aggregator.Voucher {
			return nil
		}
	case paramPage, paramOffset, paramSize, paramCursor:
		if s.paging[p] && s.op != aggregator.Voucher {
			return nil
		}
		return fmt.Errorf("placeholder %s needs a pagination style that gives it", paramNames[p])
	case paramSession:
		for _, n := range s.sessions {
			if n == name {
				return nil
			}
		}
		return fmt.Errorf("placeholder {session.%s} needs auth.session.extract.%s", name, name)
	}
	return fmt.Errorf("placeholder %s has no value for operation %s", paramNames[p], s.op)
}

// compileText splits s into literals and placeholders landing at l. Every
// '{' must open a known placeholder available in sc; seen records the
// placeholders found.
func compileText(s string, l landing, sc scope, seen *[numParams]bool) (template, error) {
	var t template
	for rest := s; rest != ""; {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			t.add(rest)
			break
		}
		t.add(rest[:open])
		if rest[open] == '}' {
			return template{}, fmt.Errorf("unmatched '}' in %q", s)
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return template{}, fmt.Errorf("unterminated placeholder in %q", s)
		}
		name := rest[open : open+end+1]
		p, ok := paramByName(name)
		if !ok {
			return template{}, fmt.Errorf("unknown placeholder %s in %q (known: {domain}, {id}, {id_kind}, {infraction_id}, {page}, {offset}, {size}, {cursor}, {session.NAME})", name, s)
		}
		pt := part{param: p, landing: l}
		if p == paramSession {
			pt.name = name[len(sessionPrefix) : len(name)-1]
		}
		if err := sc.allows(p, pt.name); err != nil {
			return template{}, err
		}
		seen[p] = true
		t.parts = append(t.parts, pt)
		rest = rest[open+end+1:]
	}
	return t, nil
}

// add appends a literal, merging it with a previous literal.
func (t *template) add(lit string) {
	if lit == "" {
		return
	}
	t.literals += len(lit)
	if n := len(t.parts); n > 0 && t.parts[n-1].param == paramNone {
		t.parts[n-1].literal += lit
		return
	}
	t.parts = append(t.parts, part{literal: lit})
}

// append adds u's parts after t's.
func (t *template) append(u template) {
	for _, p := range u.parts {
		if p.param == paramNone {
			t.add(p.literal)
			continue
		}
		t.parts = append(t.parts, p)
	}
}

// expand writes t for v, escaping each value for where it lands.
func (t *template) expand(v *values) (string, error) {
	if len(t.parts) == 1 && t.parts[0].param == paramNone {
		return t.parts[0].literal, nil
	}
	size := t.literals
	for _, p := range t.parts {
		if p.param != paramNone {
			size += 3 * len(v.get(p))
		}
	}
	var b strings.Builder
	b.Grow(size)
	for _, p := range t.parts {
		if p.param == paramNone {
			b.WriteString(p.literal)
			continue
		}
		if err := escape(&b, v.get(p), p.landing); err != nil {
			return "", fmt.Errorf("%s: %w", placeholderName(p), err)
		}
	}
	return b.String(), nil
}

// placeholderName is p as written.
func placeholderName(p part) string {
	if p.param == paramSession {
		return sessionPrefix + p.name + "}"
	}
	return paramNames[p.param]
}

// escape writes s to b escaped for l.
func escape(b *strings.Builder, s string, l landing) error {
	switch l {
	case inPath:
		if s == "." || s == ".." {
			return errDotSegment
		}
		b.WriteString(url.PathEscape(s))
	case inQuery:
		b.WriteString(url.QueryEscape(s))
	case inJSON:
		writeJSONString(b, s)
	case inXML:
		writeXMLText(b, s)
	case inHeader:
		if !headerSafe(s) {
			return errControl
		}
		b.WriteString(s)
	default:
		b.WriteString(s)
	}
	return nil
}

// headerSafe reports whether s can be sent in a header value: it holds no
// control character but the tab (no CR, LF or NUL to end the header or
// start another).
func headerSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// writeJSONString writes s as the inside of a JSON string.
func writeJSONString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b.WriteByte('\\')
				b.WriteByte(c)
			case c < 0x20 || c == '<' || c == '>' || c == '&':
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			default:
				b.WriteByte(c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b.WriteString(`\ufffd`)
		case r == '\u2028':
			b.WriteString(`\u2028`)
		case r == '\u2029':
			b.WriteString(`\u2029`)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
}

// writeXMLText writes s escaped for XML text and attribute values; control
// characters XML cannot carry and invalid UTF-8 become U+FFFD.
func writeXMLText(b *strings.Builder, s string) {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == '&':
			b.WriteString("&amp;")
		case r == '<':
			b.WriteString("&lt;")
		case r == '>':
			b.WriteString("&gt;")
		case r == '"':
			b.WriteString("&quot;")
		case r == '\'':
			b.WriteString("&apos;")
		case r == '\t', r == '\n', r == '\r':
			b.WriteString("&#" + strconv.Itoa(int(r)) + ";")
		case r == utf8.RuneError && n == 1, r < 0x20, r == 0xFFFE, r == 0xFFFF:
			b.WriteRune(utf8.RuneError)
		default:
			b.WriteRune(r)
		}
	}
}

// required is the placeholder an operation's request must carry.
func required(op aggregator.Operation) param {
	switch op {
	case aggregator.ByDomain:
		return paramDomain
	case aggregator.ByID:
		return paramID
	default:
		return paramInfractionID
	}
}
