package aggregator

import (
	"errors"
	"fmt"

	"github.com/multas/aggregator/problem"
)

// ErrInvalid is wrapped by every parse error of this package.
var ErrInvalid = errors.New("invalid")

// maxInputLen bounds the raw input of ParseDomain and ParseID, checked
// before any normalisation. The longest accepted forms (a plate or a CUIT
// with a separator between every character) fit well within it.
const maxInputLen = 32

// plateFormats lists the accepted plate shapes: A is a letter A–Z, 9 a
// digit. In order: 1994–2016 cars, Mercosur cars, and the two motorcycle
// formats.
var plateFormats = []string{"AAA999", "AA999AA", "999AAA", "A999AAA"}

// The parse errors. Their text never includes the input: plates and ids
// are personal data and errors end up in logs.
var (
	errPlateLong   = fmt.Errorf("%w plate: longer than %d bytes", ErrInvalid, maxInputLen)
	errPlateEmpty  = fmt.Errorf("%w plate: empty", ErrInvalid)
	errPlateChar   = fmt.Errorf("%w plate: contains a character other than A–Z, 0–9, space, '-', '.' or '_'", ErrInvalid)
	errPlateFormat = fmt.Errorf("%w plate: not one of the formats AAA999, AA999AA, 999AAA, A999AAA", ErrInvalid)

	errIDLong   = fmt.Errorf("%w id: longer than %d bytes", ErrInvalid, maxInputLen)
	errIDEmpty  = fmt.Errorf("%w id: empty", ErrInvalid)
	errIDChar   = fmt.Errorf("%w id: contains a character other than 0–9, space, '-' or '.'", ErrInvalid)
	errIDLength = fmt.Errorf("%w id: wrong number of digits (want 11 for a CUIT/CUIL, 7 or 8 for a DNI)", ErrInvalid)
	errIDCheck  = fmt.Errorf("%w id: CUIT/CUIL check digit does not match", ErrInvalid)
)

// The invalid-params reasons of NewQuery.
const (
	reasonPlate   = "not a valid Argentine plate (accepted: AAA999, AA999AA, 999AAA, A999AAA)"
	reasonID      = "not a valid CUIT/CUIL (11 digits, check digit) or DNI (7–8 digits)"
	reasonBoth    = "exactly one of domain or id is allowed"
	reasonMissing = "exactly one of domain or id is required"
)

// ParseDomain validates and normalises an Argentine plate (SPEC 3.1). Case
// is ignored, and so are the separators space, '-', '.' and '_' anywhere in
// s; letters are ASCII A–Z only. The result is upper case without
// separators and has one of the plateFormats shapes.
func ParseDomain(s string) (string, error) {
	if len(s) > maxInputLen {
		return "", errPlateLong
	}
	var buf [maxInputLen]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '-' || c == '.' || c == '_':
			continue
		case 'a' <= c && c <= 'z':
			c -= 'a' - 'A'
		case 'A' <= c && c <= 'Z', isDigit(c):
		default:
			return "", errPlateChar
		}
		buf[n] = c
		n++
	}
	p := buf[:n]
	if n == 0 {
		return "", errPlateEmpty
	}
	for _, f := range plateFormats {
		if hasShape(p, f) {
			return string(p), nil
		}
	}
	return "", errPlateFormat
}

// hasShape reports whether p, made of A–Z and 0–9 only, has format f
// (one of plateFormats).
func hasShape(p []byte, f string) bool {
	if len(p) != len(f) {
		return false
	}
	for i, c := range p {
		if isDigit(c) != (f[i] == '9') {
			return false
		}
	}
	return true
}

// ParseID validates and normalises a CUIT/CUIL or a DNI (SPEC 3.1). The
// separators space, '-' and '.' are ignored anywhere in s. Eleven digits
// are a CUIT/CUIL, whose check digit must match (its type prefix is not
// checked); seven or eight are a DNI. The result is the digits only.
func ParseID(s string) (string, IDKind, error) {
	if len(s) > maxInputLen {
		return "", "", errIDLong
	}
	var buf [maxInputLen]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '-' || c == '.':
			continue
		case isDigit(c):
		default:
			return "", "", errIDChar
		}
		buf[n] = c
		n++
	}
	d := buf[:n]
	switch n {
	case 0:
		return "", "", errIDEmpty
	case 7, 8:
		return string(d), DNI, nil
	case 11:
		if !cuitCheckOK(d) {
			return "", "", errIDCheck
		}
		return string(d), CUIT, nil
	}
	return "", "", errIDLength
}

// cuitWeights are the weights of the first ten digits of a CUIT/CUIL.
var cuitWeights = [10]int{5, 4, 3, 2, 7, 6, 5, 4, 3, 2}

// cuitCheckOK reports whether the eleventh of the ASCII digits d is the
// check digit of the first ten: 11 − (Σ weight·digit mod 11), where 11
// stands for 0 and 10 means no valid CUIT/CUIL starts with those ten digits.
func cuitCheckOK(d []byte) bool {
	check, ok := cuitCheck(d)
	return ok && int(d[10]-'0') == check
}

// cuitCheck is the check digit of the first ten ASCII digits of d; ok is
// false when no valid CUIT/CUIL starts with them.
func cuitCheck(d []byte) (int, bool) {
	sum := 0
	for i, w := range cuitWeights {
		sum += w * int(d[i]-'0')
	}
	check := 11 - sum%11
	switch check {
	case 11:
		return 0, true
	case 10:
		return 0, false
	}
	return check, true
}

// PersonIDs lists the normalised ids (ParseID's) one person is known by,
// id first: a person's CUIT/CUIL (prefixes 20, 23, 24 and 27) embeds their
// DNI, and a DNI is embedded in each of the CUITs those prefixes make.
// Erasing a person (SPEC 14) forgets all of them. A company's CUIT, or an id
// that is not one, is only itself.
func PersonIDs(id string) []string {
	out := []string{id}
	switch len(id) {
	case 11:
		if p := id[:2]; p == "20" || p == "23" || p == "24" || p == "27" {
			dni := id[2:10]
			out = append(out, dni)
			if dni[0] == '0' {
				out = append(out, dni[1:])
			}
		}
	case 7, 8:
		dni := id
		if len(dni) == 7 {
			dni = "0" + dni
		}
		for _, prefix := range []string{"20", "23", "24", "27"} {
			if check, ok := cuitCheck([]byte(prefix + dni)); ok {
				out = append(out, prefix+dni+string(rune('0'+check)))
			}
		}
		if len(id) == 8 && id[0] == '0' {
			out = append(out, id[1:])
		}
	}
	return out
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// NewQuery builds a Query from the raw `domain` and `id` inputs; hasDomain
// and hasID say whether each was given at all (an empty value given is
// present, and invalid). Exactly one must be present. It returns every bad
// parameter, with reasons that never repeat the value.
func NewQuery(domain, id string, hasDomain, hasID bool) (Query, []problem.InvalidParam) {
	switch {
	case hasDomain && hasID:
		return Query{}, []problem.InvalidParam{{Name: "domain", Reason: reasonBoth}, {Name: "id", Reason: reasonBoth}}
	case !hasDomain && !hasID:
		return Query{}, []problem.InvalidParam{{Name: "domain", Reason: reasonMissing}, {Name: "id", Reason: reasonMissing}}
	case hasDomain:
		d, err := ParseDomain(domain)
		if err != nil {
			return Query{}, []problem.InvalidParam{{Name: "domain", Reason: reasonPlate}}
		}
		return Query{Domain: d}, nil
	default:
		v, kind, err := ParseID(id)
		if err != nil {
			return Query{}, []problem.InvalidParam{{Name: "id", Reason: reasonID}}
		}
		return Query{ID: v, IDKind: kind}, nil
	}
}
