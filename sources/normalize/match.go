package normalize

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

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
	return (*Texts)(nil).Date(l, text, number, loc, now)
}

// Date is l.Date with the value in t.
func (t *Texts) Date(l Layouts, text string, number bool, loc *time.Location, now time.Time) (string, error) {
	if loc == nil {
		loc = time.UTC
	}
	if len(l.patterns) == 0 {
		return defaultDate(t, text, number, loc)
	}
	s := strings.TrimSpace(text)
	for i := range l.patterns {
		if out, f := l.patterns[i].read(t, s, number, loc, now); f.why == whyNone {
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
func defaultDate(tx *Texts, text string, number bool, loc *time.Location) (string, error) {
	var (
		out string
		ok  bool
	)
	if number {
		if out, ok = formatEpoch(tx, text, loc); !ok {
			return "", errEpoch
		}
		return out, nil
	}
	if out, ok = formatDate(tx, text, loc); !ok {
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
		_, f := p.read(nil, s, number, loc, now)
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
func (p *pattern) read(tx *Texts, s string, number bool, loc *time.Location, now time.Time) (string, failure) {
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
		out, ok := formatUnix(tx, n, p.epoch, loc)
		if !ok {
			return "", failure{why: whyEpoch}
		}
		return out, failure{}
	}
	var v values
	if f := p.match(s, &v); f.why != whyNone {
		return "", f
	}
	return v.format(tx, p.twoDigit, loc, now)
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
func (v *values) format(tx *Texts, twoDigit bool, loc *time.Location, now time.Time) (string, failure) {
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
	return tx.time(t), failure{}
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
	if s == "" {
		return 0, 0
	}
	r, _ := utf8.DecodeRuneInString(s)
	first, abbr := fold(r), false
	for _, m := range monthNames {
		if rune(m.name[0]) != first {
			continue
		}
		if k := foldPrefix(s, m.name); k > n {
			month, n, abbr = m.month, k, m.abbr
		}
	}
	if abbr && dot && strings.HasPrefix(s[n:], ".") {
		n++
	}
	return month, n
}
