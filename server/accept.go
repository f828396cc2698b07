package server

import "strings"

// media is a representation GET /v1/infractions answers in: the JSON
// document of SPEC 3.1, or one of the streams of SPEC 14.
type media int

const (
	mediaJSON media = iota
	mediaEventStream
	mediaNDJSON
)

// offers are the media types of GET /v1/infractions, JSON first: the one
// chosen on ties.
var offers = [...]struct{ typ, sub string }{
	mediaJSON:        {"application", "json"},
	mediaEventStream: {"text", "event-stream"},
	mediaNDJSON:      {"application", "x-ndjson"},
}

func (m media) String() string { return offers[m].typ + "/" + offers[m].sub }

// mediaRange is one element of an Accept field (RFC 9110 §12.5.1).
type mediaRange struct {
	typ, sub string // as written; "*" for a wildcard
	params   int    // media type parameters before the weight
	q        int    // weight in thousandths, 0 to 1000
}

// specificity orders the ranges that match a type: a type with more
// parameters, then the type itself, then type/*, then */*.
func (r mediaRange) specificity() int {
	switch {
	case r.typ == "*":
		return 0
	case r.sub == "*":
		return 1
	}
	return 2 + r.params
}

// matches reports whether r covers typ/sub; types are case-insensitive.
func (r mediaRange) matches(typ, sub string) bool {
	return r.typ == "*" || (strings.EqualFold(r.typ, typ) && (r.sub == "*" || strings.EqualFold(r.sub, sub)))
}

// negotiate picks the representation for the request's Accept fields: each
// offer takes the weight of the most specific range that matches it (the
// first listed among equals), the highest weight above zero wins, JSON on
// a tie with JSON, and otherwise the offer matched by the range listed
// first. Without the header, when nothing is acceptable, or when the
// header cannot be read, the answer is JSON, as it was before streams
// existed (RFC 9110 lets a server disregard the header). Malformed
// elements are skipped. It allocates nothing.
func negotiate(fields []string) media {
	type weight struct{ q, at, spec int }
	var got [len(offers)]weight
	for m := range got {
		got[m].spec = -1
	}
	n := 0 // well-formed elements read
	for _, f := range fields {
		for s := f; s != ""; s = skipElement(s) {
			var r mediaRange
			var ok bool
			if r, s, ok = parseRange(s); !ok {
				continue
			}
			for m, o := range offers {
				if spec := r.specificity(); spec > got[m].spec && r.matches(o.typ, o.sub) {
					got[m] = weight{r.q, n, spec}
				}
			}
			n++
		}
	}
	best := mediaJSON
	for m, w := range got {
		b := got[best]
		if w.q > b.q || (w.q == b.q && w.q > 0 && w.at < b.at && best != mediaJSON) {
			best = media(m)
		}
	}
	return best
}

// parseRange reads one element at the start of s: media-range [ weight ],
// where media-range is (*/* | type/* | type/subtype) followed by
// parameters. It returns what is left of s (at the element's end on
// success) and whether the element is well formed.
func parseRange(s string) (mediaRange, string, bool) {
	r := mediaRange{q: 1000}
	s = trimOWS(s)
	var typ, sub string
	typ, s = token(s)
	if typ == "" || !strings.HasPrefix(s, "/") {
		return r, s, false
	}
	sub, s = token(s[1:])
	if sub == "" || (typ == "*" && sub != "*") {
		return r, s, false
	}
	r.typ, r.sub = typ, sub
	weighted := false
	for {
		s = trimOWS(s)
		if s == "" || s[0] == ',' {
			return r, s, true
		}
		if s[0] != ';' {
			return r, s, false
		}
		s = trimOWS(s[1:])
		if s == "" || s[0] == ',' || s[0] == ';' {
			continue // an empty parameter is allowed
		}
		var name, value string
		name, s = token(s)
		if name == "" || !strings.HasPrefix(s, "=") {
			return r, s, false
		}
		s = s[1:]
		quoted := strings.HasPrefix(s, `"`)
		if quoted {
			var ok bool
			if s, ok = skipQuoted(s); !ok {
				return r, s, false
			}
		} else if value, s = token(s); value == "" {
			return r, s, false
		}
		switch {
		case strings.EqualFold(name, "q"):
			q, ok := qvalue(value)
			if quoted || !ok || weighted {
				return r, s, false
			}
			r.q, weighted = q, true
		case !weighted:
			r.params++
		}
	}
}

// skipElement drops what is left of the current element of s, up to and
// including the comma that ends it, outside quoted strings.
func skipElement(s string) string {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ',':
			return s[i+1:]
		case '"':
			rest, _ := skipQuoted(s[i:])
			i = len(s) - len(rest) - 1
		}
	}
	return ""
}

// qvalue reads a weight (RFC 9110 §12.4.2): 0 to 1 with at most three
// decimals, in thousandths.
func qvalue(v string) (int, bool) {
	if v == "" || len(v) > 5 || (v[0] != '0' && v[0] != '1') {
		return 0, false
	}
	q := int(v[0]-'0') * 1000
	if len(v) > 1 {
		if v[1] != '.' {
			return 0, false
		}
		scale := 100
		for _, c := range v[2:] {
			if c < '0' || c > '9' {
				return 0, false
			}
			q += int(c-'0') * scale
			scale /= 10
		}
	}
	return q, q <= 1000
}

// token splits the longest RFC 9110 token off the start of s.
func token(s string) (string, string) {
	i := 0
	for i < len(s) && isTchar(s[i]) {
		i++
	}
	return s[:i], s[i:]
}

func isTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// skipQuoted drops a quoted-string (with its quoted-pairs) from the start
// of s, which begins with '"'; ok is false when it is not closed or holds
// a character it may not.
func skipQuoted(s string) (rest string, ok bool) {
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			return s[i+1:], true
		case c == '\\' && i+1 < len(s) && qdtext(s[i+1], true):
			i++
		case !qdtext(c, false):
			return s[i:], false
		}
	}
	return "", false
}

// qdtext reports whether c may stand in a quoted-string: as itself, or,
// with quoted, after a backslash.
func qdtext(c byte, quoted bool) bool {
	switch {
	case c == '\t' || c == ' ' || c >= 0x80:
		return true
	case c == '"' || c == '\\':
		return quoted
	}
	return 0x21 <= c && c <= 0x7e
}

// trimOWS drops optional white space (spaces and tabs) from the start of s.
func trimOWS(s string) string {
	return strings.TrimLeft(s, " \t")
}
