package normalize

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxAmountDigits bounds the integer part of an amount. Larger values are
// not amounts of money, and the bound keeps hostile exponents (1e999999999)
// from costing memory or time.
const maxAmountDigits = 30

// formatAmount normalises a portal amount (the literal of a JSON number, or
// a string as people write money) to a decimal string with exactly two
// decimals, rounded half away from zero. The arithmetic is done on the
// decimal digits themselves, never through binary floating point.
//
// Accepted: an optional sign, optional currency marks before or after the
// number ("$", "ARS", "U$S"), digits with at most one decimal separator and
// optional grouping. When both '.' and ',' appear, the last one is the
// decimal separator and the other groups thousands; a separator that
// appears once is the decimal separator ("1,5" and "1.5" are both 1.50);
// one that repeats groups thousands ("1.234.567"). Spaces and apostrophes
// also group thousands. Exponents ("1.5e3") are accepted without grouping.
func formatAmount(s string) (string, bool) {
	s = strings.TrimSpace(s)
	neg, s := cutSign(s)
	s, ok := trimCurrency(s)
	if !ok {
		return "", false
	}
	if !neg {
		neg, s = cutSign(s)
		s = strings.TrimSpace(s)
	}
	if s == "" {
		return "", false
	}
	var d decimal
	if !d.parse(s) {
		return "", false
	}
	return d.cents(neg), true
}

// cutSign removes a leading '+', '-' or Unicode minus sign.
func cutSign(s string) (neg bool, rest string) {
	switch {
	case strings.HasPrefix(s, "-"):
		return true, strings.TrimSpace(s[1:])
	case strings.HasPrefix(s, "\u2212"):
		return true, strings.TrimSpace(s[len("\u2212"):])
	case strings.HasPrefix(s, "+"):
		return false, strings.TrimSpace(s[1:])
	}
	return false, s
}

// trimCurrency removes currency marks before and after the number. A lone
// "e" is not a currency but half an exponent ("1e"), and is refused.
func trimCurrency(s string) (string, bool) {
	core := strings.TrimLeftFunc(s, isCurrencyMark)
	prefix := s[:len(s)-len(core)]
	trimmed := strings.TrimRightFunc(core, isCurrencyMark)
	suffix := core[len(trimmed):]
	if strings.EqualFold(strings.TrimSpace(prefix), "e") || strings.EqualFold(strings.TrimSpace(suffix), "e") {
		return "", false
	}
	return trimmed, true
}

// isCurrencyMark reports whether r can be part of a currency mark written
// around an amount ("$", "ARS", "U$S", "€"), or space next to it.
func isCurrencyMark(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.Sc, r) || unicode.IsSpace(r)
}

// maxSignificant bounds the significant digits of an amount; no amount of
// money needs more, and the bound keeps the work per field small.
const maxSignificant = 64

// decimal is an unsigned decimal number: digits[:n] × 10^exp, the digits
// without leading zeros (none for zero).
type decimal struct {
	digits [maxSignificant]byte
	n      int
	exp    int
}

// parse reads the unsigned numeric core of an amount.
func (d *decimal) parse(s string) bool {
	mant, exp, hasExp := strings.Cut(s, "e")
	if !hasExp {
		mant, exp, hasExp = strings.Cut(s, "E")
	}
	if hasExp {
		e, ok := parseExponent(exp)
		if !ok || !d.plain(mant) {
			return false
		}
		d.exp += e
	} else if !d.grouped(s) {
		return false
	}
	d.trim()
	return d.n == 0 || d.n+d.exp <= maxAmountDigits
}

// plain reads digits with at most one '.' (the form of a JSON number).
func (d *decimal) plain(s string) bool {
	intPart, frac, _ := strings.Cut(s, ".")
	if intPart == "" && frac == "" {
		return false
	}
	return d.appendDigits(intPart) && d.appendFraction(frac)
}

// grouped reads digits with grouping and one decimal separator, by the
// rules documented on formatAmount.
func (d *decimal) grouped(s string) bool {
	dot, comma := strings.Count(s, "."), strings.Count(s, ",")
	var sep byte
	switch {
	case dot > 0 && comma > 0:
		sep = s[strings.LastIndexAny(s, ".,")]
		if (sep == '.' && dot > 1) || (sep == ',' && comma > 1) {
			return false
		}
	case dot == 1:
		sep = '.'
	case comma == 1:
		sep = ','
	}
	intPart, frac := s, ""
	if sep != 0 {
		i := strings.LastIndexByte(s, sep)
		intPart, frac = s[:i], s[i+1:]
	}
	if intPart == "" && frac == "" {
		return false
	}
	return d.appendGroups(intPart) && d.appendFraction(frac)
}

// appendGroups appends an integer part that may group thousands with '.',
// ',', spaces or apostrophes: the first group has 1–3 digits and every
// later one exactly 3.
func (d *decimal) appendGroups(s string) bool {
	if s == "" {
		return true
	}
	group, groups := 0, 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r >= '0' && r <= '9':
			if !d.appendDigit(byte(r)) {
				return false
			}
			group++
		case r == '.' || r == ',' || r == '\'' || r == '\u2019' || unicode.IsSpace(r):
			if group == 0 || (groups > 0 && group != 3) || (groups == 0 && group > 3) {
				return false
			}
			groups++
			group = 0
		default:
			return false
		}
	}
	return groups == 0 || group == 3
}

// appendDigits appends a run of ASCII digits; s may be empty.
func (d *decimal) appendDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !d.appendDigit(s[i]) {
			return false
		}
	}
	return true
}

// appendFraction appends the digits after the decimal separator.
func (d *decimal) appendFraction(s string) bool {
	if !d.appendDigits(s) {
		return false
	}
	d.exp -= len(s)
	return true
}

// appendDigit appends one digit, dropping leading zeros, and refuses
// anything else or numbers too long to be money.
func (d *decimal) appendDigit(c byte) bool {
	if c < '0' || c > '9' {
		return false
	}
	if c == '0' && d.n == 0 {
		return true
	}
	if d.n == maxSignificant {
		return false
	}
	d.digits[d.n] = c
	d.n++
	return true
}

// trim drops trailing zeros into the exponent.
func (d *decimal) trim() {
	for d.n > 0 && d.digits[d.n-1] == '0' {
		d.n--
		d.exp++
	}
	if d.n == 0 {
		d.exp = 0
	}
}

// parseExponent reads an exponent with optional sign, saturating far
// beyond any amount so that huge exponents stay cheap to reject.
func parseExponent(s string) (int, bool) {
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if s == "" {
		return 0, false
	}
	e := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if e < 1_000_000 {
			e = e*10 + int(c-'0')
		}
	}
	if neg {
		e = -e
	}
	return e, true
}

// cents renders d rounded half away from zero to two decimals. Only the
// first digit dropped decides the rounding: half away from zero rounds the
// magnitude half up.
func (d *decimal) cents(neg bool) string {
	// c holds the digits of the magnitude × 100 after rounding, without
	// leading zeros; n == 0 is zero.
	var c [maxAmountDigits + 4]byte
	n := 0
	keep := d.n + d.exp + 2 // digits of the value × 100
	switch {
	case d.n == 0 || keep < 0:
		// Zero, or less than half a cent.
	case d.exp+2 >= 0:
		n = copy(c[:], d.digits[:d.n])
		for ; n < keep; n++ {
			c[n] = '0'
		}
	default:
		n = copy(c[:], d.digits[:keep])
		if d.digits[keep] >= '5' {
			n = roundUp(c[:], n)
		}
	}
	var text [maxAmountDigits + 8]byte
	t := 0
	if neg && n > 0 {
		text[t] = '-'
		t++
	}
	if n <= 2 {
		text[t] = '0'
		t++
	} else {
		t += copy(text[t:], c[:n-2])
	}
	text[t] = '.'
	t++
	for i := n - 2; i < n; i++ {
		if i < 0 {
			text[t] = '0'
		} else {
			text[t] = c[i]
		}
		t++
	}
	return string(text[:t])
}

// roundUp adds one to the n-digit number in b and returns its new length;
// b has room for one more digit.
func roundUp(b []byte, n int) int {
	for i := n - 1; i >= 0; i-- {
		if b[i] < '9' {
			b[i]++
			return n
		}
		b[i] = '0'
	}
	copy(b[1:n+1], b[:n])
	b[0] = '1'
	return n + 1
}
