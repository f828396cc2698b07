package normalize

import (
	"errors"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Decimal is the separator of decimals in amounts written as text: 0 when
// not configured.
type Decimal byte

// The values of the `decimal` configuration key.
const (
	Unset Decimal = 0
	Point Decimal = '.'
	Comma Decimal = ','
)

// ParseDecimal reads the `decimal` config key: "" (Unset), "." or ",".
// Anything else is an error.
func ParseDecimal(s string) (Decimal, error) {
	switch s {
	case "":
		return Unset, nil
	case ".":
		return Point, nil
	case ",":
		return Comma, nil
	}
	return Unset, errDecimalKey
}

var errDecimalKey = errors.New(`want "." or "," (or nothing: the separator is then told from the text, and a lone separator before exactly three digits is refused as ambiguous)`)

// ErrAmbiguous is the error of an amount written as text whose only
// separator appears once followed by exactly three digits ("185.000",
// "1,234", "$ 185.000") while no decimal separator is configured: it could
// group thousands or separate decimals.
var ErrAmbiguous = errors.New(`ambiguous: its only separator appears once, before exactly three digits, so it could group thousands or separate decimals; set decimal to "," or "." for this source or field`)

// Why an amount does not normalise. No message quotes the value: callers
// show it apart, or not at all.
var (
	errNoDigits       = errors.New("no digits")
	errLoneE          = errors.New(`an "e" without its exponent`)
	errChar           = errors.New("a character that is not a digit, a separator, a sign or a currency mark")
	errTwoDecimals    = errors.New("the decimal separator appears more than once")
	errGroups         = errors.New("thousands not grouped as 1 to 3 digits and then groups of exactly 3")
	errFractionGroups = errors.New("a separator after the decimal separator")
	errExponent       = errors.New("an exponent that is not a whole number")
	errExponentGroups = errors.New("an exponent with grouped digits (an exponent is accepted only on plain digits)")
	errTooLarge       = errors.New("more than 30 digits before the decimal separator: not an amount of money")
	errTooLong        = errors.New("more than 64 significant digits: not an amount of money")
)

// maxAmountDigits bounds the integer part of an amount. Larger values are
// not amounts of money, and the bound keeps hostile exponents (1e999999999)
// from costing memory or time.
const maxAmountDigits = 30

// maxSignificant bounds the significant digits of an amount; no amount of
// money needs more, and the bound keeps the work per field small.
const maxSignificant = 64

// Amount normalises an amount written as text (SPEC 12) to a decimal
// string with exactly two decimals, rounded half away from zero. The
// arithmetic is done on the decimal digits themselves, never through
// binary floating point. The package documentation lists the forms it
// reads; dec is the configured decimal separator, or Unset.
//
// The error says why the text does not normalise, without quoting it;
// errors.Is(err, ErrAmbiguous) when only a configured decimal separator
// would tell.
func Amount(text string, dec Decimal) (string, error) {
	return (*Texts)(nil).Amount(text, dec)
}

// Amount is the package's Amount with the value in t.
func (t *Texts) Amount(text string, dec Decimal) (string, error) {
	s := strings.TrimSpace(text)
	neg, s := cutSign(s)
	s, err := trimCurrency(s)
	if err != nil {
		return "", err
	}
	if !neg {
		neg, s = cutSign(s)
	}
	if s == "" {
		return "", errNoDigits
	}
	var d decimal
	if err := d.parseText(s, dec); err != nil {
		return "", err
	}
	return d.cents(t, neg), nil
}

// Number normalises the literal of a JSON number ("1234.5", "1e3",
// "-0.005") like Amount: a JSON number is never ambiguous, its '.' always
// separates decimals ("1.234" is 1.23).
func Number(literal string) (string, error) {
	return (*Texts)(nil).Number(literal)
}

// Number is the package's Number with the value in t.
func (t *Texts) Number(literal string) (string, error) {
	s := strings.TrimSpace(literal)
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg = s[0] == '-'
		s = s[1:]
	}
	var d decimal
	mant, exp, hasExp := cutExponent(s)
	if err := d.plain(mant, '.'); err != nil {
		return "", err
	}
	if hasExp {
		e, ok := parseExponent(exp)
		if !ok {
			return "", errExponent
		}
		d.exp += e
	}
	if err := d.finish(); err != nil {
		return "", err
	}
	return d.cents(t, neg), nil
}

// cutSign removes a leading '+', '-' or Unicode minus sign, and the space
// after it.
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
func trimCurrency(s string) (string, error) {
	core := strings.TrimLeftFunc(s, isCurrencyMark)
	prefix := s[:len(s)-len(core)]
	trimmed := strings.TrimRightFunc(core, isCurrencyMark)
	suffix := core[len(trimmed):]
	if strings.EqualFold(strings.TrimSpace(prefix), "e") || strings.EqualFold(strings.TrimSpace(suffix), "e") {
		return "", errLoneE
	}
	return trimmed, nil
}

// isCurrencyMark reports whether r can be part of a currency mark written
// around an amount ("$", "ARS", "U$S", "€"), or space next to it.
func isCurrencyMark(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.Sc, r) || unicode.IsSpace(r)
}

// cutExponent splits s at its first 'e' or 'E'.
func cutExponent(s string) (mant, exp string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i]|0x20 == 'e' {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// decimal is an unsigned decimal number: digits[:n] × 10^exp, the digits
// without leading zeros (none for zero).
type decimal struct {
	digits [maxSignificant]byte
	n      int
	exp    int
}

// parseText reads the unsigned numeric core of an amount written as text,
// by the rules of the package documentation.
func (d *decimal) parseText(s string, dec Decimal) error {
	if mant, exp, ok := cutExponent(s); ok {
		point := byte('.')
		if dec == Comma {
			point = ','
		}
		if strings.ContainsFunc(mant, func(r rune) bool { return r != rune(point) && isSeparator(r) }) {
			return errExponentGroups
		}
		e, ok := parseExponent(exp)
		if !ok {
			return errExponent
		}
		if err := d.plain(mant, point); err != nil {
			return err
		}
		d.exp += e
	} else if err := d.grouped(s, dec); err != nil {
		return err
	}
	return d.finish()
}

// finish drops trailing zeros and checks the magnitude.
func (d *decimal) finish() error {
	for d.n > 0 && d.digits[d.n-1] == '0' {
		d.n--
		d.exp++
	}
	if d.n == 0 {
		d.exp = 0
	}
	if d.n > 0 && d.n+d.exp > maxAmountDigits {
		return errTooLarge
	}
	return nil
}

// plain reads digits with at most one decimal separator point (the form
// of a JSON number's mantissa).
func (d *decimal) plain(s string, point byte) error {
	intPart, frac := s, ""
	if i := strings.IndexByte(s, point); i >= 0 {
		intPart, frac = s[:i], s[i+1:]
	}
	if intPart == "" && frac == "" {
		return errNoDigits
	}
	if err := d.appendDigits(intPart); err != nil {
		return err
	}
	return d.appendFraction(frac)
}

// grouped reads digits with grouping and at most one decimal separator.
func (d *decimal) grouped(s string, dec Decimal) error {
	dot, comma := 0, 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '.':
			dot++
		case ',':
			comma++
		}
	}
	var sep, group byte // the decimal separator and the thousands one, 0 for none
	lone := false       // sep was told from the text by appearing once, alone
	switch dec {
	case Point, Comma:
		sep, group = byte(dec), ','
		if dec == Comma {
			group = '.'
		}
		if (dec == Point && dot > 1) || (dec == Comma && comma > 1) {
			return errTwoDecimals
		}
	default:
		switch {
		case dot > 0 && comma > 0:
			sep = s[strings.LastIndexAny(s, ".,")]
			group = '.' + ',' - sep
			if (sep == '.' && dot > 1) || (sep == ',' && comma > 1) {
				return errTwoDecimals
			}
		case dot > 1:
			group = '.'
		case comma > 1:
			group = ','
		case dot == 1:
			sep, lone = '.', true
		case comma == 1:
			sep, lone = ',', true
		}
	}
	intPart, frac := s, ""
	if sep != 0 {
		if i := strings.LastIndexByte(s, sep); i >= 0 {
			intPart, frac = s[:i], s[i+1:]
		}
	}
	if intPart == "" && frac == "" {
		return errNoDigits
	}
	if err := d.appendGroups(intPart, group); err != nil {
		return err
	}
	whole := d.n // significant digits before the decimal separator
	if err := d.appendFraction(frac); err != nil {
		return err
	}
	// A lone separator before exactly three digits could group thousands,
	// unless nothing but zeros stands before it ("0.005", ".500"): no
	// grouped number starts with a zero group.
	if lone && len(frac) == 3 && whole > 0 {
		return ErrAmbiguous
	}
	return nil
}

// isSeparator reports whether r separates digits in an amount written as
// text: the decimal and thousands separators '.' and ',', and the
// thousands separators white space (non-breaking spaces included) and
// apostrophes.
func isSeparator(r rune) bool {
	return r == '.' || r == ',' || isSpaceGroup(r)
}

// isSpaceGroup reports whether r groups thousands whatever the decimal
// separator: white space (non-breaking spaces included) and apostrophes.
func isSpaceGroup(r rune) bool {
	return r == '\'' || r == '\u2019' || unicode.IsSpace(r)
}

// appendGroups appends an integer part that may group thousands with
// group ('.' or ',', or 0 for neither), spaces or apostrophes: the first
// group has 1–3 digits and every later one exactly 3.
func (d *decimal) appendGroups(s string, group byte) error {
	digits, groups := 0, 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case r >= '0' && r <= '9':
			if err := d.appendDigit(byte(r)); err != nil {
				return err
			}
			digits++
		case (group != 0 && r == rune(group)) || isSpaceGroup(r):
			if digits == 0 || (groups > 0 && digits != 3) || (groups == 0 && digits > 3) {
				return errGroups
			}
			groups++
			digits = 0
		default:
			return errChar
		}
	}
	if groups > 0 && digits != 3 {
		return errGroups
	}
	return nil
}

// appendDigits appends a run of ASCII digits; s may be empty.
func (d *decimal) appendDigits(s string) error {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return errChar
		}
		if err := d.appendDigit(s[i]); err != nil {
			return err
		}
	}
	return nil
}

// appendFraction appends the digits after the decimal separator.
func (d *decimal) appendFraction(s string) error {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			if r, _ := utf8.DecodeRuneInString(s[i:]); isSeparator(r) {
				return errFractionGroups
			}
			return errChar
		}
		if err := d.appendDigit(c); err != nil {
			return err
		}
	}
	d.exp -= len(s)
	return nil
}

// appendDigit appends one ASCII digit, dropping leading zeros, and refuses
// numbers too long to be money.
func (d *decimal) appendDigit(c byte) error {
	if c == '0' && d.n == 0 {
		return nil
	}
	if d.n == maxSignificant {
		return errTooLong
	}
	d.digits[d.n] = c
	d.n++
	return nil
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
func (d *decimal) cents(tx *Texts, neg bool) string {
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
	return tx.bytes(text[:t])
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
