package normalize

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// formatDate normalises a date given as text in one of the default forms
// (no layout configured) to RFC 3339 with an offset, at seconds precision
// (a fraction is truncated).
//
// Accepted: "2006-01-02" or "02/01/2006" (day first; '-' and '.' also
// separate day-first dates), optionally followed by 'T' or spaces and a
// time "15:04", "15:04:05" or "15:04:05.999999999" (',' also introduces the
// fraction), optionally followed by an offset "Z", "-03:00", "-0300" or
// "-03". A time with an offset keeps it; a zone-less time is read in loc.
// A string of nine or more digits is Unix epoch seconds, as a JSON number
// would be (see formatEpoch); "/Date(1773490320000)/" and
// "/Date(1773490320000-0300)/" (the ASP.NET form) are epoch milliseconds,
// shown at their offset when they have one.
func formatDate(tx *Texts, s string, loc *time.Location) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) >= 9 && allDigits(s) {
		return formatEpoch(tx, s, loc)
	}
	if ms, ok := strings.CutPrefix(s, "/Date("); ok {
		return formatDotNet(tx, ms, loc)
	}
	t, ok := parseDate(s, loc)
	if !ok {
		return "", false
	}
	return tx.time(t), true
}

// formatEpoch renders a JSON number of Unix epoch seconds (milliseconds
// when its magnitude exceeds 1e12) as RFC 3339 in loc. A fraction of a
// second is dropped.
func formatEpoch(tx *Texts, num string, loc *time.Location) (string, bool) {
	sec, ok := epochWhole(num)
	if !ok {
		return "", false
	}
	if sec > 1e12 || sec < -1e12 {
		sec /= 1000
	}
	return formatUnix(tx, sec, 1, loc)
}

// epochWhole reads the whole part of a number literal (a fraction is
// dropped, toward zero).
func epochWhole(num string) (int64, bool) {
	if strings.ContainsAny(num, "eE") {
		f, err := strconv.ParseFloat(num, 64)
		if err != nil || math.Abs(f) >= 1e15 {
			return 0, false
		}
		return int64(f), true
	}
	whole, _, _ := strings.Cut(num, ".")
	if whole == "-" || whole == "" {
		whole = "0"
	}
	n, err := strconv.ParseInt(whole, 10, 64)
	return n, err == nil
}

// formatUnix renders n units (1 a second, 1000 a millisecond) since the
// Unix epoch as RFC 3339 in loc, refusing years outside 1–9999.
func formatUnix(tx *Texts, n, unit int64, loc *time.Location) (string, bool) {
	var t time.Time
	if unit == 1000 {
		t = time.UnixMilli(n).In(loc)
	} else {
		t = time.Unix(n, 0).In(loc)
	}
	if y := t.Year(); y < 1 || y > 9999 {
		return "", false
	}
	return tx.time(t), true
}

// formatDotNet renders the inside of an ASP.NET "/Date(ms±hhmm)/" date.
func formatDotNet(tx *Texts, s string, loc *time.Location) (string, bool) {
	s, ok := strings.CutSuffix(s, ")/")
	if !ok {
		return "", false
	}
	if i := strings.LastIndexAny(s, "+-"); i > 0 {
		p := scanner{s: s, i: i}
		zone, ok := p.zone()
		if !ok || !p.done() {
			return "", false
		}
		s, loc = s[:i], zone
	}
	if s == "" || !allDigits(strings.TrimPrefix(s, "-")) {
		return "", false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return "", false
	}
	return formatUnix(tx, n, 1000, loc)
}

// parseDate parses the text forms documented on formatDate.
func parseDate(s string, loc *time.Location) (time.Time, bool) {
	var (
		year, mon, day int
		ok             bool
	)
	p := scanner{s: s}
	if len(s) >= 10 && s[4] == '-' && s[7] == '-' {
		year, ok = p.digits(4, 4)
		p.i++ // '-'
		mon, ok = p.digitsAnd(ok, 2, 2)
		p.i++
		day, ok = p.digitsAnd(ok, 2, 2)
	} else {
		day, ok = p.digits(1, 2)
		sep := p.peek()
		if sep != '/' && sep != '-' && sep != '.' {
			return time.Time{}, false
		}
		p.i++
		mon, ok = p.digitsAnd(ok, 1, 2)
		ok = ok && p.peek() == sep
		p.i++
		year, ok = p.digitsAnd(ok, 4, 4)
	}
	if !ok || year < 1 || mon < 1 || mon > 12 || day < 1 || day > daysIn(time.Month(mon), year) {
		return time.Time{}, false
	}
	var hour, minute, sec, nsec int
	if !p.done() {
		switch p.peek() {
		case 'T', 't':
			p.i++
		case ' ':
			p.skipSpaces()
		default:
			return time.Time{}, false
		}
		hour, ok = p.digits(1, 2)
		ok = ok && p.peek() == ':'
		p.i++
		minute, ok = p.digitsAnd(ok, 2, 2)
		if ok && p.peek() == ':' {
			p.i++
			sec, ok = p.digits(2, 2)
			if ok && (p.peek() == '.' || p.peek() == ',') {
				p.i++
				nsec, ok = p.fraction()
			}
		}
		if !ok || hour > 23 || minute > 59 || sec > 59 {
			return time.Time{}, false
		}
		p.skipSpaces()
		if !p.done() {
			zone, ok := p.zone()
			if !ok || !p.done() {
				return time.Time{}, false
			}
			loc = zone
		}
	}
	t := time.Date(year, time.Month(mon), day, hour, minute, sec, nsec, loc)
	if y := t.Year(); y < 1 || y > 9999 {
		return time.Time{}, false
	}
	return t, true
}

// scanner reads a date left to right.
type scanner struct {
	s string
	i int
}

func (p *scanner) done() bool { return p.i >= len(p.s) }

// peek returns the next byte, or 0 at the end.
func (p *scanner) peek() byte {
	if p.done() {
		return 0
	}
	return p.s[p.i]
}

func (p *scanner) skipSpaces() {
	for !p.done() && p.s[p.i] == ' ' {
		p.i++
	}
}

// digits reads between lo and hi ASCII digits as a number.
func (p *scanner) digits(lo, hi int) (int, bool) {
	n, start := 0, p.i
	for !p.done() && p.i-start < hi {
		c := p.s[p.i]
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
		p.i++
	}
	return n, p.i-start >= lo
}

// digitsAnd is digits when ok is still true.
func (p *scanner) digitsAnd(ok bool, lo, hi int) (int, bool) {
	if !ok {
		return 0, false
	}
	return p.digits(lo, hi)
}

// fraction reads the digits of a fraction of a second as nanoseconds;
// digits past the ninth are read and ignored.
func (p *scanner) fraction() (int, bool) {
	n, count := 0, 0
	for !p.done() && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		if count < 9 {
			n = n*10 + int(p.s[p.i]-'0')
		}
		count++
		p.i++
	}
	for i := count; i < 9; i++ {
		n *= 10
	}
	return n, count > 0
}

// zone reads "Z", "UTC", "GMT", or a sign and hours with optional
// minutes, with or without a colon.
func (p *scanner) zone() (*time.Location, bool) {
	if rest := p.s[p.i:]; strings.EqualFold(rest, "UTC") || strings.EqualFold(rest, "GMT") {
		p.i = len(p.s)
		return time.UTC, true
	}
	switch c := p.peek(); c {
	case 'Z', 'z':
		p.i++
		return time.UTC, true
	case '+', '-':
		p.i++
		h, ok := p.digits(2, 2)
		m := 0
		if ok && !p.done() {
			if p.peek() == ':' {
				p.i++
			}
			m, ok = p.digits(2, 2)
		}
		if !ok || h > 23 || m > 59 {
			return nil, false
		}
		off := (h*60 + m) * 60
		if off == 0 {
			return time.UTC, true
		}
		if c == '-' {
			off = -off
		}
		return time.FixedZone("", off), true
	}
	return nil, false
}

// daysIn is the number of days of month m in year y.
func daysIn(m time.Month, y int) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// allDigits reports whether s is made of ASCII digits only.
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}
