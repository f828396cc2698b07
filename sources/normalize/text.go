package normalize

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/currency"
)

// MaxText is the most characters (runes) a mapped text value keeps (SPEC
// 9); MaxID is the longest id, in runes, that normalises.
const (
	MaxText = 1000
	MaxID   = 200
)

// maxDetail is the most characters (runes) of a problem's detail.
const maxDetail = 200

// ellipsis ends a value that was cut.
const ellipsis = "…"

// Text cuts s to at most MaxText runes: a cut value is its first
// MaxText-1 runes and "…", MaxText runes in all. An invalid byte counts as
// a rune. s itself is returned when it fits.
func Text(s string) string {
	if len(s) <= MaxText {
		return s // no more runes than bytes
	}
	return cut(s, MaxText)
}

// cut returns s when it has at most max runes, else its first max-1 runes
// and "…".
func cut(s string, max int) string {
	runes := 0
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		if runes == max-1 {
			if i+size == len(s) {
				return s
			}
			return s[:i] + ellipsis
		}
		i += size
		runes++
	}
	return s
}

// Suspect reports whether s holds U+FFFD, invalid UTF-8 or a typical
// mojibake sequence: UTF-8 read as windows-1252 or ISO-8859-1 ("Ã©", "Ã¡",
// "Ã³", "Ã±", "Ã‘", "Âº", "Â°", "ï¿½", "â€œ", …), a sign that the charset
// is wrong.
func Suspect(s string) bool {
	var prev rune
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			prev = rune(s[i])
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError: // U+FFFD itself, or an invalid byte
			return true
		case (prev == 'Ã' || prev == 'Â') && isMojibakeTrail(r):
			// The lead byte C3 or C2 of a two-byte sequence (Latin-1
			// letters and signs), then its continuation byte read as one
			// character.
			return true
		case prev == 'â' && r > 0xBF && isMojibakeTrail(r):
			// E2 80…E2 86: punctuation, currency signs, arrows.
			return true
		case prev == 'ï' && (r == '¿' || r == '»'): // EF BF BD (U+FFFD), EF BB BF (BOM)
			return true
		}
		prev = r
		i += size
	}
	return false
}

// isMojibakeTrail reports whether r is what a UTF-8 continuation byte
// (80–BF) becomes when read as ISO-8859-1 (itself) or windows-1252 (the
// specials of 80–9F).
func isMojibakeTrail(r rune) bool {
	if r >= 0x80 && r <= 0xBF {
		return true
	}
	switch r {
	case '€', '‚', 'ƒ', '„', '…', '†', '‡', 'ˆ', '‰', 'Š', '‹', 'Œ', 'Ž',
		'‘', '’', '“', '”', '•', '–', '—', '˜', '™', 'š', '›', 'œ', 'ž', 'Ÿ':
		return true
	}
	return false
}

// IsCurrency reports whether code is an ISO 4217 currency code
// (golang.org/x/text/currency), case-insensitive. `units.code` must not be
// one: UF, UR and UMA are not currencies.
func IsCurrency(code string) bool {
	if len(code) != 3 {
		return false
	}
	_, err := currency.ParseISO(code)
	return err == nil
}

// Detail makes portal text fit a problem's `detail` (SPEC 12 errors.detail,
// SPEC 9): white space around it trimmed and inside it collapsed to one
// space (line breaks and tabs are white space), other control characters
// (Unicode Cc) and format characters (Cf: bidirectional overrides and
// isolates, zero-width ones, the BOM…) removed, invalid UTF-8 dropped, at
// most 200 runes (a cut value is its first 199 runes, without a space at
// the end, and "…"). The result is plain text, to be escaped wherever it
// is shown as markup.
func Detail(s string) string {
	if cleanDetail(s) {
		return s
	}
	var b strings.Builder
	b.Grow(min(len(s), utf8.UTFMax*maxDetail))
	runes, cutAt, space := 0, 0, false
	for i := 0; i < len(s); {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		i += size
		switch {
		case r > ' ' && r < 0x7f:
		case unicode.IsSpace(r):
			space = runes > 0
			continue
		case r == utf8.RuneError && size == 1, unicode.Is(unicode.Cc, r), unicode.Is(unicode.Cf, r):
			continue
		}
		if runes+1 > maxDetail || (space && runes+2 > maxDetail) {
			return strings.TrimRight(b.String()[:cutAt], " ") + ellipsis
		}
		if space {
			b.WriteByte(' ')
			runes++
			space = false
			if runes == maxDetail-1 {
				cutAt = b.Len()
			}
		}
		b.WriteRune(r)
		runes++
		if runes == maxDetail-1 {
			cutAt = b.Len()
		}
	}
	return b.String()
}

// cleanDetail reports whether s is already what Detail makes of it:
// printable ASCII without white space around it or runs of it inside, and
// short enough.
func cleanDetail(s string) bool {
	if len(s) > maxDetail {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' || c >= 0x7f || (c == ' ' && (i == 0 || i == len(s)-1 || s[i+1] == ' ')) {
			return false
		}
	}
	return true
}

// Plate normalises a value as the query's plate is (SPEC 12 `match`):
// upper case, every separator (anything not a letter or digit) removed.
func Plate(s string) string {
	if plainPlate(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			b.WriteRune(unicode.ToUpper(r))
		}
	}
	return b.String()
}

// plainPlate reports whether s is ASCII upper-case letters and digits.
func plainPlate(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z') && !(c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Digits normalises a value as the query's id is (SPEC 12 `match`): its
// ASCII digits only.
func Digits(s string) string {
	if allDigits(s) || s == "" {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= '0' && c <= '9' {
			b = append(b, c)
		}
	}
	return string(b)
}
