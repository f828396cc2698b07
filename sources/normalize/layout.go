package normalize

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
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

// field ends the literal being collected and adds t; a month name takes
// an abbreviation's '.' unless the pattern writes it.
func (b *patternBuilder) field(t token) {
	b.flush()
	b.toks = append(b.toks, t)
}

// flush ends the literal being collected.
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

// Date normalises a date to RFC 3339 with an offset, at seconds precision
// (a fraction is truncated). number says the value was a JSON number (text
// is then its literal). loc is the zone of zone-less times (nil is UTC);
// now is today, for yy (read as ICU does: within 80 years before and 20
// after now).
//
// Without layouts the value is one of the default forms, and a JSON number
// is epoch seconds, or milliseconds when its magnitude exceeds 1e12. With
// layouts, the first pattern that reads the whole value (white space
// around it trimmed) wins; a JSON number is read by its literal, like
// text. When none does, the error lists what each pattern expected where.
// No error quotes the value.
func (l Layouts) Date(text string, number bool, loc *time.Location, now time.Time) (string, error) {
	if loc == nil {
		loc = time.UTC
	}
	if len(l.patterns) == 0 {
		return defaultDate(text, number, loc)
	}
	s := strings.TrimSpace(text)
	for i := range l.patterns {
		if out, f := l.patterns[i].read(s, number, loc, now); f.why == whyNone {
			return out, nil
		}
	}
	return "", l.failure(s, number, loc, now)
}

// The errors of the default forms.
var (
	errDefaultForms = errors.New("not a date in a default form (ISO 8601 yyyy-mm-dd; dd/mm/yyyy, dd-mm-yyyy or dd.mm.yyyy; each with an optional time and offset; epoch seconds; /Date(ms)/): set layout")
	errEpoch        = errors.New("not epoch seconds or milliseconds of a year 1–9999")
)

// defaultDate reads the default forms (no layout configured).
func defaultDate(text string, number bool, loc *time.Location) (string, error) {
	var (
		out string
		ok  bool
	)
	if number {
		if out, ok = formatEpoch(text, loc); !ok {
			return "", errEpoch
		}
		return out, nil
	}
	if out, ok = formatDate(text, loc); !ok {
		return "", errDefaultForms
	}
	return out, nil
}

// failure explains why no pattern reads s: it reads again, this time
// keeping what went wrong.
func (l Layouts) failure(s string, number bool, loc *time.Location, now time.Time) error {
	var b strings.Builder
	b.WriteString("no layout reads the whole value:")
	for i := range l.patterns {
		p := &l.patterns[i]
		_, f := p.read(s, number, loc, now)
		if i > 0 {
			b.WriteByte(';')
		}
		fmt.Fprintf(&b, " layout[%d] %q ", i, p.text)
		b.WriteString(f.describe(p, s))
	}
	return errors.New(b.String())
}

// why says what went wrong in a reading.
type why uint8

const (
	whyNone     why = iota // read
	whyToken               // the token tok does not match at pos
	whyTrailing            // text remains at pos after the pattern
	whyEmpty               // nothing to read
	whyEpoch               // not an epoch within years 1–9999
	whyMonth
	whyDay
	whyHour
	whyHour12
	whyMinute
	whySecond
	whyYear
)

// failure is why one pattern does not read a value; it costs nothing to
// make, and is described only when every pattern failed.
type failure struct {
	why why
	tok int
	pos int
}

// whyText describes the failures about the values read.
var whyText = [...]string{
	whyEmpty:  "has nothing to read",
	whyEpoch:  "reads no epoch of a year 1–9999",
	whyMonth:  "reads a month outside 1–12",
	whyDay:    "reads a day that its month does not have",
	whyHour:   "reads an hour outside 0–23",
	whyHour12: "reads an hour outside 1–12",
	whyMinute: "reads minutes outside 0–59",
	whySecond: "reads seconds outside 0–59",
	whyYear:   "reads a year outside 1–9999",
}

// describe says what f is, without quoting the value.
func (f failure) describe(p *pattern, s string) string {
	at := utf8.RuneCountInString(s[:f.pos]) + 1
	switch f.why {
	case whyToken:
		if f.pos == len(s) {
			return fmt.Sprintf("expects %s at character %d, past the end", p.toks[f.tok].text, at)
		}
		return fmt.Sprintf("expects %s at character %d", p.toks[f.tok].text, at)
	case whyTrailing:
		return fmt.Sprintf("ends before character %d (of %d)", at, utf8.RuneCountInString(s))
	}
	return whyText[f.why]
}

// read reads s with p.
func (p *pattern) read(s string, number bool, loc *time.Location, now time.Time) (string, failure) {
	if s == "" {
		return "", failure{why: whyEmpty}
	}
	if p.epoch != 0 {
		if !number && !isNumberLiteral(s) {
			return "", failure{why: whyEpoch}
		}
		n, ok := epochWhole(s)
		if !ok {
			return "", failure{why: whyEpoch}
		}
		out, ok := formatUnix(n, p.epoch, loc)
		if !ok {
			return "", failure{why: whyEpoch}
		}
		return out, failure{}
	}
	var v values
	if f := p.match(s, &v); f.why != whyNone {
		return "", f
	}
	return v.format(p.twoDigit, loc, now)
}

// values are what a pattern read.
type values struct {
	n      [numSlots]int
	pm     int8 // 0: no marker, 1: AM, 2: PM
	off    int  // seconds east of UTC, when hasOff
	hasOff bool
}

// match reads s whole with p's tokens into v.
func (p *pattern) match(s string, v *values) failure {
	pos := 0
	for i := range p.toks {
		t := &p.toks[i]
		rest := s[pos:]
		n := 0
		switch t.kind {
		case kLiteral:
			n = foldPrefix(rest, t.lit)
		case kSpace:
			n = len(rest) - len(strings.TrimLeftFunc(rest, unicode.IsSpace))
		case kNumber:
			v.n[t.slot], n = readDigits(rest, t.min, t.max)
		case kFraction:
			_, n = readDigits(rest, 1, len(rest))
		case kMonthName:
			v.n[sMonth], n = monthName(rest, t.dot)
		case kAMPM:
			v.pm, n = readAMPM(rest)
		case kOffset:
			v.off, n = readOffset(rest, t.min)
			v.hasOff = n > 0
		}
		if n == 0 {
			return failure{why: whyToken, tok: i, pos: pos}
		}
		pos += n
	}
	if pos < len(s) {
		return failure{why: whyTrailing, pos: pos}
	}
	return failure{}
}

// format checks the values read and renders them as RFC 3339.
func (v *values) format(twoDigit bool, loc *time.Location, now time.Time) (string, failure) {
	year, ambiguous := v.n[sYear], false
	if twoDigit {
		year, ambiguous = twoDigitYear(v.n[sYear2], now)
	}
	hour := v.n[sHour]
	if v.pm != 0 {
		h := v.n[sHour12]
		if h < 1 || h > 12 {
			return "", failure{why: whyHour12}
		}
		hour = h % 12
		if v.pm == 2 {
			hour += 12
		}
	}
	mon, day, minute, sec := v.n[sMonth], v.n[sDay], v.n[sMinute], v.n[sSecond]
	switch {
	case year < 1 || year > 9999:
		return "", failure{why: whyYear}
	case mon < 1 || mon > 12:
		return "", failure{why: whyMonth}
	case hour > 23:
		return "", failure{why: whyHour}
	case minute > 59:
		return "", failure{why: whyMinute}
	case sec > 59:
		return "", failure{why: whySecond}
	}
	zone := loc
	if v.hasOff {
		zone = time.FixedZone("", v.off)
	}
	if ambiguous && time.Date(year, time.Month(mon), day, hour, minute, sec, 0, zone).Before(now.AddDate(-80, 0, 0)) {
		year += 100
	}
	if day < 1 || day > daysIn(time.Month(mon), year) {
		return "", failure{why: whyDay}
	}
	t := time.Date(year, time.Month(mon), day, hour, minute, sec, 0, zone)
	if y := t.Year(); y < 1 || y > 9999 {
		return "", failure{why: whyYear}
	}
	return t.Format(time.RFC3339), failure{}
}

// twoDigitYear reads a two-digit year as ICU does: within the century that
// starts 80 years before now. The one two-digit year that starts it is
// ambiguous: the century's first year before the start instant is read a
// hundred years later (format decides, knowing the whole date).
func twoDigitYear(yy int, now time.Time) (year int, ambiguous bool) {
	start := now.AddDate(-80, 0, 0).Year()
	year = start/100*100 + yy
	if yy < start%100 {
		year += 100
	}
	return year, yy == start%100
}

// readDigits reads min to max ASCII digits at the start of s; n is 0 when
// there are fewer than min. Values beyond any field saturate.
func readDigits(s string, min, max int) (v, n int) {
	for n < max && n < len(s) && s[n] >= '0' && s[n] <= '9' {
		if v < 1e8 {
			v = v*10 + int(s[n]-'0')
		}
		n++
	}
	if n < min {
		return 0, 0
	}
	return v, n
}

// readAMPM reads an AM/PM marker at the start of s: AM, PM, a.m., p.m.
// ("a. m." too), case-insensitive. pm is 1 for AM, 2 for PM.
func readAMPM(s string) (pm int8, n int) {
	if s == "" {
		return 0, 0
	}
	switch s[0] | 0x20 {
	case 'a':
		pm = 1
	case 'p':
		pm = 2
	default:
		return 0, 0
	}
	n = 1
	dotted := strings.HasPrefix(s[n:], ".")
	if dotted {
		n++
		n += len(s[n:]) - len(strings.TrimLeftFunc(s[n:], unicode.IsSpace))
	}
	if n >= len(s) || s[n]|0x20 != 'm' {
		return 0, 0
	}
	n++
	if dotted && strings.HasPrefix(s[n:], ".") {
		n++
	}
	return pm, n
}

// readOffset reads an offset at the start of s as X (x = 1: Z, ±hh,
// ±hhmm), XX (2: Z, ±hhmm) or XXX (3: Z, ±hh:mm); off is in seconds.
func readOffset(s string, x int) (off, n int) {
	if s == "" {
		return 0, 0
	}
	if s[0] == 'Z' || s[0] == 'z' {
		return 0, 1
	}
	if s[0] != '+' && s[0] != '-' {
		return 0, 0
	}
	h, hn := readDigits(s[1:], 2, 2)
	if hn == 0 {
		return 0, 0
	}
	n = 3
	m := 0
	switch x {
	case 1:
		if mm, mn := readDigits(s[n:], 2, 2); mn > 0 {
			m, n = mm, n+2
		}
	case 2:
		mm, mn := readDigits(s[n:], 2, 2)
		if mn == 0 {
			return 0, 0
		}
		m, n = mm, n+2
	default:
		if !strings.HasPrefix(s[n:], ":") {
			return 0, 0
		}
		mm, mn := readDigits(s[n+1:], 2, 2)
		if mn == 0 {
			return 0, 0
		}
		m, n = mm, n+3
	}
	if h > 23 || m > 59 {
		return 0, 0
	}
	off = (h*60 + m) * 60
	if s[0] == '-' {
		off = -off
	}
	return off, n
}

// isNumberLiteral reports whether s is written as a number: an optional
// sign, digits, an optional fraction and an optional exponent.
func isNumberLiteral(s string) bool {
	if s != "" && (s[0] == '-' || s[0] == '+') {
		s = s[1:]
	}
	_, n := readDigits(s, 1, len(s))
	if n == 0 {
		return false
	}
	s = s[n:]
	if strings.HasPrefix(s, ".") {
		_, n = readDigits(s[1:], 0, len(s))
		s = s[1+n:]
	}
	if s != "" && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s != "" && (s[0] == '-' || s[0] == '+') {
			s = s[1:]
		}
		_, n = readDigits(s, 1, len(s))
		if n == 0 {
			return false
		}
		s = s[n:]
	}
	return s == ""
}

// foldPrefix returns the length in s of a prefix that folds to lit (see
// fold), or 0.
func foldPrefix(s, lit string) int {
	i := 0
	for _, want := range lit {
		if i >= len(s) {
			return 0
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if fold(r) != want {
			return 0
		}
		i += size
	}
	return i
}

// fold maps a letter to lower case without its accent ("Ç" → 'c'), so that
// literals and month names match whatever their case and accents.
func fold(r rune) rune {
	if r < utf8.RuneSelf {
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		return r
	}
	r = unicode.ToLower(r)
	switch r {
	case 'á', 'à', 'â', 'ã', 'ä', 'å':
		return 'a'
	case 'ç':
		return 'c'
	case 'é', 'è', 'ê', 'ë':
		return 'e'
	case 'í', 'ì', 'î', 'ï':
		return 'i'
	case 'ñ':
		return 'n'
	case 'ó', 'ò', 'ô', 'õ', 'ö':
		return 'o'
	case 'ú', 'ù', 'û', 'ü':
		return 'u'
	}
	return r
}

// monthNames are the month names and abbreviations MMM and MMMM read, in
// Spanish, Portuguese and English, folded. No name means two months.
var monthNames = [...]struct {
	name  string
	month int
	abbr  bool // may be followed by '.'
}{
	{"ene", 1, true}, {"jan", 1, true}, {"enero", 1, false}, {"janeiro", 1, false}, {"january", 1, false},
	{"feb", 2, true}, {"fev", 2, true}, {"febrero", 2, false}, {"fevereiro", 2, false}, {"february", 2, false},
	{"mar", 3, true}, {"marzo", 3, false}, {"marco", 3, false}, {"march", 3, false},
	{"abr", 4, true}, {"apr", 4, true}, {"abril", 4, false}, {"april", 4, false},
	{"may", 5, true}, {"mai", 5, true}, {"mayo", 5, false}, {"maio", 5, false},
	{"jun", 6, true}, {"junio", 6, false}, {"junho", 6, false}, {"june", 6, false},
	{"jul", 7, true}, {"julio", 7, false}, {"julho", 7, false}, {"july", 7, false},
	{"ago", 8, true}, {"aug", 8, true}, {"agosto", 8, false}, {"august", 8, false},
	{"sep", 9, true}, {"sept", 9, true}, {"set", 9, true}, {"septiembre", 9, false}, {"setiembre", 9, false}, {"setembro", 9, false}, {"september", 9, false},
	{"oct", 10, true}, {"out", 10, true}, {"octubre", 10, false}, {"outubro", 10, false}, {"october", 10, false},
	{"nov", 11, true}, {"noviembre", 11, false}, {"novembro", 11, false}, {"november", 11, false},
	{"dic", 12, true}, {"dez", 12, true}, {"dec", 12, true}, {"diciembre", 12, false}, {"dezembro", 12, false}, {"december", 12, false},
}

// monthName reads the longest month name or abbreviation at the start of
// s, and the '.' after an abbreviation when dot allows it.
func monthName(s string, dot bool) (month, n int) {
	abbr := false
	for _, m := range monthNames {
		if k := foldPrefix(s, m.name); k > n {
			month, n, abbr = m.month, k, m.abbr
		}
	}
	if abbr && dot && strings.HasPrefix(s[n:], ".") {
		n++
	}
	return month, n
}
