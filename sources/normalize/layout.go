package normalize

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Layouts is a compiled `layout` list (SPEC 12): Unicode TR35 patterns
// tried in order. The zero value reads the default forms. A Layouts is
// immutable and safe for concurrent use.
type Layouts struct {
	patterns []pattern
}

// LayoutError is what is wrong in one pattern of a `layout` list.
// CompileLayouts returns one for every bad pattern, joined with
// errors.Join (errors.As finds the first).
type LayoutError struct {
	Index   int    // the pattern's position in the list, from 0
	Pattern string // the pattern as configured
	Reason  string // what is wrong in it
}

func (e *LayoutError) Error() string {
	return fmt.Sprintf("layout[%d] %q: %s", e.Index, e.Pattern, e.Reason)
}

// pattern is one compiled pattern: a TR35 pattern as tokens, or a keyword
// (epoch is then 1 for epoch_s, 1000 for epoch_ms).
type pattern struct {
	text     string
	epoch    int64
	toks     []token
	twoDigit bool // the year is yy
}

// tokKind is what a token reads.
type tokKind uint8

const (
	kLiteral   tokKind = iota // lit, case and accents ignored
	kSpace                    // one or more white-space characters
	kNumber                   // min to max ASCII digits into slot
	kMonthName                // a month name or abbreviation
	kFraction                 // one or more digits of a fraction of a second
	kAMPM                     // AM or PM
	kOffset                   // an offset; min is the number of X
)

// slot is the value a number field sets.
type slot uint8

const (
	sYear  slot = iota // yyyy
	sYear2             // yy
	sMonth             // M, MM, MMM, MMMM
	sDay
	sHour   // H, HH
	sHour12 // h, hh
	sMinute
	sSecond
	numSlots
)

// A field's group: a pattern has at most one field of each.
const (
	gYear = iota
	gMonth
	gDay
	gHour
	gMinute
	gSecond
	gFraction
	gAMPM
	gOffset
	numGroups
)

// token is one element of a compiled pattern.
type token struct {
	kind     tokKind
	slot     slot
	min, max int
	dot      bool   // a month abbreviation may be followed by '.'
	lit      string // kLiteral: the literal, folded (see fold)
	text     string // the token as the pattern writes it, for messages
}

// The keywords of whole-pattern epochs.
const (
	epochSeconds = "epoch_s"
	epochMillis  = "epoch_ms"
)

// CompileLayouts compiles a `layout` list. An empty list is the zero
// Layouts (the default forms). A bad pattern is a *LayoutError naming it
// (by index and text) and what is wrong in it; every bad pattern is
// reported.
func CompileLayouts(patterns []string) (Layouts, error) {
	if len(patterns) == 0 {
		return Layouts{}, nil
	}
	l := Layouts{patterns: make([]pattern, len(patterns))}
	var errs []error
	for i, p := range patterns {
		var reason string
		l.patterns[i], reason = compile(p)
		if reason != "" {
			errs = append(errs, &LayoutError{Index: i, Pattern: p, Reason: reason})
		}
	}
	if errs != nil {
		return Layouts{}, errors.Join(errs...)
	}
	return l, nil
}

// Patterns returns the patterns as configured (for messages); nil for the
// default forms.
func (l Layouts) Patterns() []string {
	if len(l.patterns) == 0 {
		return nil
	}
	out := make([]string, len(l.patterns))
	for i := range l.patterns {
		out[i] = l.patterns[i].text
	}
	return out
}

// compile compiles one pattern; a non-empty reason says what is wrong.
func compile(p string) (pattern, string) {
	c := pattern{text: p}
	switch p {
	case epochSeconds:
		c.epoch = 1
		return c, ""
	case epochMillis:
		c.epoch = 1000
		return c, ""
	}
	if !utf8.ValidString(p) {
		return c, "not valid UTF-8"
	}
	var (
		b    patternBuilder
		seen [numGroups]bool
	)
	for i := 0; i < len(p); {
		switch ch := p[i]; {
		case ch == '\'':
			n, ok := b.quoted(p[i:])
			if !ok {
				return c, `an unterminated quote (a literal quote is written '')`
			}
			i += n
		case isASCIILetter(ch):
			n := 1
			for i+n < len(p) && p[i+n] == ch {
				n++
			}
			t, group, reason := field(ch, n, p)
			if reason != "" {
				return c, reason
			}
			before, _ := utf8.DecodeLastRuneInString(p[:i])
			after, _ := utf8.DecodeRuneInString(p[i+n:])
			if before >= utf8.RuneSelf && unicode.IsLetter(before) || after >= utf8.RuneSelf && unicode.IsLetter(after) {
				return c, fmt.Sprintf("the field %s touches a letter of the text around it: quote literal text ('às')", t.text)
			}
			if seen[group] {
				return c, fmt.Sprintf("two fields for the %s (the second is %s)", groupNames[group], t.text)
			}
			seen[group] = true
			b.field(t)
			i += n
		default:
			r, size := utf8.DecodeRuneInString(p[i:])
			b.literal(r, p[i:i+size])
			i += size
		}
	}
	b.flush()
	// The value is trimmed: white space around the pattern reads nothing.
	toks := b.toks
	if len(toks) > 0 && toks[0].kind == kSpace {
		toks = toks[1:]
	}
	if n := len(toks); n > 0 && toks[n-1].kind == kSpace {
		toks = toks[:n-1]
	}
	c.toks = toks
	for _, t := range toks {
		c.twoDigit = c.twoDigit || (t.kind == kNumber && t.slot == sYear2)
	}
	return c, check(toks, &seen)
}

// groupNames names the field groups in messages.
var groupNames = [numGroups]string{"year", "month", "day", "hour", "minutes", "seconds", "fraction of a second", "AM/PM marker", "offset"}

// check says what is wrong in a pattern as a whole: the fields a date
// needs, fields that need others, and numbers of variable width that no
// literal ends.
func check(toks []token, seen *[numGroups]bool) string {
	hour12, fields := false, 0
	for _, t := range toks {
		hour12 = hour12 || (t.kind == kNumber && t.slot == sHour12)
		if t.kind != kLiteral && t.kind != kSpace {
			fields++
		}
	}
	switch {
	case fields == 0:
		return "no field (a date needs a year yyyy or yy, a month M and a day d; or the whole pattern is epoch_s or epoch_ms)"
	case !seen[gYear]:
		return "no year (yyyy or yy)"
	case !seen[gMonth]:
		return "no month (M, MM, MMM or MMMM)"
	case !seen[gDay]:
		return "no day (d or dd)"
	case seen[gMinute] && !seen[gHour]:
		return "minutes without an hour"
	case seen[gSecond] && !seen[gMinute]:
		return "seconds without minutes"
	case seen[gFraction] && !seen[gSecond]:
		return "a fraction of a second (S) without seconds"
	case hour12 && !seen[gAMPM]:
		return "h or hh (the 12-hour clock) without a (AM/PM): use HH for the 24-hour clock"
	case seen[gAMPM] && !hour12:
		return "a (AM/PM) without h or hh (the 12-hour clock)"
	}
	for i := 0; i+1 < len(toks); i++ {
		t, next := toks[i], toks[i+1]
		variable := (t.kind == kNumber && t.min != t.max) || t.kind == kFraction || (t.kind == kOffset && t.min == 1)
		if variable && startsWithDigit(next) {
			return fmt.Sprintf("%s is followed directly by digits (%s), so where it ends is a guess: give it a fixed width or separate them", t.text, next.text)
		}
	}
	return ""
}

// startsWithDigit reports whether what t reads may begin with a digit.
func startsWithDigit(t token) bool {
	switch t.kind {
	case kNumber, kFraction:
		return true
	case kLiteral:
		return t.lit[0] >= '0' && t.lit[0] <= '9'
	}
	return false
}

// field compiles a run of n pattern letters ch.
func field(ch byte, n int, p string) (t token, group int, reason string) {
	t.text = strings.Repeat(string(rune(ch)), n)
	number := func(s slot, g int) (token, int, string) {
		t.kind, t.slot, t.min, t.max = kNumber, s, n, 2
		if n > 2 {
			return t, g, fmt.Sprintf("%s: use %c or %c%c", t.text, ch, ch, ch)
		}
		return t, g, ""
	}
	switch ch {
	case 'd':
		return number(sDay, gDay)
	case 'H':
		return number(sHour, gHour)
	case 'h':
		return number(sHour12, gHour)
	case 'm':
		return number(sMinute, gMinute)
	case 's':
		return number(sSecond, gSecond)
	case 'M':
		if n <= 2 {
			return number(sMonth, gMonth)
		}
		t.kind, t.slot, t.dot = kMonthName, sMonth, true
		if n > 4 {
			return t, gMonth, fmt.Sprintf("%s (the narrow month) is not supported: use MMM or MMMM for names, M or MM for numbers", t.text)
		}
		return t, gMonth, ""
	case 'y':
		t.kind = kNumber
		switch n {
		case 2:
			t.slot, t.min, t.max = sYear2, 2, 2
			return t, gYear, ""
		case 4:
			t.slot, t.min, t.max = sYear, 4, 4
			return t, gYear, ""
		}
		return t, gYear, fmt.Sprintf("%s: a year is yyyy (four digits) or yy (two digits, read within 80 years before and 20 after today)", t.text)
	case 'S':
		t.kind = kFraction
		return t, gFraction, ""
	case 'a':
		t.kind = kAMPM
		if n > 3 {
			return t, gAMPM, fmt.Sprintf("%s: use a (AM/PM, a.m./p.m.)", t.text)
		}
		return t, gAMPM, ""
	case 'X':
		t.kind, t.min = kOffset, n
		if n > 3 {
			return t, gOffset, fmt.Sprintf("%s (offsets with seconds) is not supported: use X (Z, ±hh, ±hhmm), XX (Z, ±hhmm) or XXX (Z, ±hh:mm)", t.text)
		}
		return t, gOffset, ""
	}
	if strings.Contains(p, "epoch_") {
		return t, 0, "epoch_s and epoch_ms are whole patterns: nothing may stand around them"
	}
	if hint, ok := letterHints[ch]; ok {
		return t, 0, fmt.Sprintf("pattern letter %c (%s) is not supported", ch, hint)
	}
	return t, 0, fmt.Sprintf("unknown pattern letter %c (quote literal letters: 'T')", ch)
}

// letterHints explains the TR35 letters a pattern may not use.
var letterHints = map[byte]string{
	'G': "era", 'u': "extended year: use yyyy", 'U': "cyclic year", 'r': "related year: use yyyy",
	'Y': "week-based year: use yyyy or yy", 'Q': "quarter", 'q': "quarter", 'L': "stand-alone month: use M, MM, MMM or MMMM",
	'l': "deprecated", 'w': "week of year", 'W': "week of month", 'D': "day of year: use d or dd for the day of the month",
	'F': "day of week in month", 'g': "modified Julian day", 'E': "day of week", 'e': "day of week", 'c': "day of week",
	'b': "day period: use a", 'B': "day period: use a", 'K': "hour 0–11: use h or hh with a", 'k': "hour 1–24: use H or HH",
	'j': "skeleton only", 'J': "skeleton only", 'C': "skeleton only", 'A': "milliseconds in day",
	'z': "zone name: use X, XX or XXX", 'Z': "zone offset: use XX for -0300, XXX for -03:00", 'O': "localized offset: use XXX",
	'v': "zone name: use X, XX or XXX", 'V': "zone id: use X, XX or XXX", 'x': "offset without Z: use X, XX or XXX",
}

func isASCIILetter(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// patternBuilder collects the tokens of a pattern, merging literal text
// and runs of white space.
type patternBuilder struct {
	toks []token
	lit  []byte // folded literal being collected
	text []byte // the same literal as written
}

// quoted reads a quoted literal at the start of p ('às', or a doubled
// quote for a quote, inside quotes too) and returns its length in bytes.
func (b *patternBuilder) quoted(p string) (int, bool) {
	if strings.HasPrefix(p, "''") {
		b.literal('\'', "''")
		return 2, true
	}
	i := 1
	for {
		j := strings.IndexByte(p[i:], '\'')
		if j < 0 {
			return 0, false
		}
		for _, r := range p[i : i+j] {
			b.literal(r, string(r))
		}
		i += j + 1
		if !strings.HasPrefix(p[i:], "'") {
			return i, true
		}
		b.literal('\'', "'")
		i++
	}
}

// literal adds one literal character, written as text.
func (b *patternBuilder) literal(r rune, text string) {
	if unicode.IsSpace(r) {
		b.flush()
		if n := len(b.toks); n == 0 || b.toks[n-1].kind != kSpace {
			b.toks = append(b.toks, token{kind: kSpace, text: "white space"})
		}
		return
	}
	b.lit = utf8.AppendRune(b.lit, fold(r))
	b.text = append(b.text, text...)
}

// field ends the literal being collected and adds t.
func (b *patternBuilder) field(t token) {
	b.flush()
	b.toks = append(b.toks, t)
}

// flush ends the literal being collected. A month name just before it
// takes an abbreviation's '.' only when the literal does not start with one
// ("d MMM. yyyy").
func (b *patternBuilder) flush() {
	if len(b.lit) == 0 {
		return
	}
	lit := string(b.lit)
	b.toks = append(b.toks, token{kind: kLiteral, lit: lit, text: strconv.Quote(string(b.text))})
	b.lit, b.text = b.lit[:0], b.text[:0]
	if n := len(b.toks); n >= 2 && b.toks[n-2].kind == kMonthName {
		b.toks[n-2].dot = lit[0] != '.'
	}
}
