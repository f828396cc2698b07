package sources

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/multas/aggregator"
)

// param is a placeholder of a path template.
type param uint8

// The placeholders of SPEC 6; paramNone marks a literal part.
const (
	paramNone param = iota
	paramDomain
	paramID
	paramIDKind
	paramInfractionID
	numParams
)

// paramByName maps a placeholder as written, braces included, to its param.
func paramByName(name string) (param, bool) {
	switch name {
	case "{domain}":
		return paramDomain, true
	case "{id}":
		return paramID, true
	case "{id_kind}":
		return paramIDKind, true
	case "{infraction_id}":
		return paramInfractionID, true
	}
	return paramNone, false
}

// values holds the substitutions for one request, indexed by param.
type values [numParams]string

// part is a literal or a placeholder of a compiled template. Placeholders
// after the first '?' are query-escaped, the others path-escaped.
type part struct {
	literal string
	param   param
	query   bool
}

// template is a request URL (base URL and operation path) compiled once.
type template struct {
	parts    []part
	literals int // total length of the literal parts, to size the buffer
}

// compileTemplate joins base and path and splits the result into literal
// parts and placeholders. Every '{' must open a known placeholder, and
// the operation's required placeholder must be there; placeholders
// without a value for this operation are refused.
func compileTemplate(base, path string, op aggregator.Operation) (template, error) {
	if strings.HasSuffix(base, "/") && strings.HasPrefix(path, "/") {
		path = path[1:]
	}
	full := base + path
	var (
		t       template
		inQuery bool
		seen    [numParams]bool
	)
	for rest := full; rest != ""; {
		open := strings.IndexAny(rest, "{}")
		if open < 0 {
			t.add(part{literal: rest})
			break
		}
		if open > 0 {
			lit := rest[:open]
			t.add(part{literal: lit})
			inQuery = inQuery || strings.Contains(lit, "?")
		}
		if rest[open] == '}' {
			return template{}, fmt.Errorf("unmatched '}' in path %q", path)
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return template{}, fmt.Errorf("unterminated placeholder in path %q", path)
		}
		name := rest[open : open+end+1]
		p, ok := paramByName(name)
		if !ok {
			return template{}, fmt.Errorf("unknown placeholder %s in path %q (known: {domain}, {id}, {id_kind}, {infraction_id})", name, path)
		}
		if !allowed(op, p) {
			return template{}, fmt.Errorf("placeholder %s has no value for operation %s", name, op)
		}
		seen[p] = true
		t.parts = append(t.parts, part{param: p, query: inQuery})
		rest = rest[open+end+1:]
	}
	if need := required(op); !seen[need] {
		return template{}, fmt.Errorf("path %q of operation %s lacks its placeholder %s", path, op, paramName(need))
	}
	if _, err := url.Parse(t.expand(values{"X", "1", "dni", "1"})); err != nil {
		return template{}, fmt.Errorf("path %q does not make a valid URL", path)
	}
	return t, nil
}

// add appends a literal part, merging it with a previous literal.
func (t *template) add(p part) {
	t.literals += len(p.literal)
	if n := len(t.parts); n > 0 && t.parts[n-1].param == paramNone {
		t.parts[n-1].literal += p.literal
		return
	}
	t.parts = append(t.parts, p)
}

// expand builds the URL for v, escaping each substituted value.
func (t *template) expand(v values) string {
	size := t.literals
	for _, p := range t.parts {
		if p.param != paramNone {
			size += 3 * len(v[p.param])
		}
	}
	var b strings.Builder
	b.Grow(size)
	for _, p := range t.parts {
		switch {
		case p.param == paramNone:
			b.WriteString(p.literal)
		case p.query:
			b.WriteString(url.QueryEscape(v[p.param]))
		default:
			b.WriteString(url.PathEscape(v[p.param]))
		}
	}
	return b.String()
}

// required is the placeholder an operation's path must carry.
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

// allowed reports whether operation op has a value for placeholder p.
func allowed(op aggregator.Operation, p param) bool {
	switch p {
	case paramDomain:
		return op == aggregator.ByDomain
	case paramID, paramIDKind:
		return op == aggregator.ByID
	case paramInfractionID:
		return op == aggregator.Voucher
	}
	return false
}

// paramName is the placeholder as written in a path.
func paramName(p param) string {
	switch p {
	case paramDomain:
		return "{domain}"
	case paramID:
		return "{id}"
	case paramIDKind:
		return "{id_kind}"
	case paramInfractionID:
		return "{infraction_id}"
	}
	return ""
}
