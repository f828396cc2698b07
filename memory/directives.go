package memory

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Directives are what a request's Cache-Control allows the answer to take
// from memory (SPEC 14, RFC 9111 section 5.2.1 and RFC 5861). The zero value
// is a request without any: a fresh answer may be served, a stale one may
// not stand in.
type Directives struct {
	// NoCache (no-cache, or max-age=0): every portal is called.
	NoCache bool
	// MaxAge (max-age=N, N > 0), when positive, bounds the age of a fresh
	// answer served; zero leaves it to the source's remember.fresh.
	MaxAge time.Duration
	// StaleIfError (stale-if-error=N), when positive, lets a remembered
	// answer at most this old (and at most the source's remember.stale)
	// stand in for a source that failed or was skipped.
	StaleIfError time.Duration
}

// maxDelta is the largest delta-seconds read (RFC 9111 section 1.2.2: a
// larger one is taken as 2^31).
const maxDelta = 1 << 31

// ErrDirective is wrapped by ParseDirectives' errors.
var ErrDirective = fmt.Errorf("invalid Cache-Control")

// ParseDirectives reads the request's Cache-Control field lines. Names are
// case-insensitive; directives other than no-cache, max-age and
// stale-if-error are ignored, as caches do. A max-age or stale-if-error
// whose value is not delta-seconds (quoted or not) is an error, which says
// which directive and why but never repeats the value. A directive given
// twice keeps its most restrictive value.
func ParseDirectives(fields []string) (Directives, error) {
	var d Directives
	maxAge, stale := -1, -1
	for _, field := range fields {
		for _, item := range splitList(field) {
			name, value, hasValue := strings.Cut(item, "=")
			name = strings.ToLower(strings.TrimSpace(name))
			value = strings.TrimSpace(value)
			switch name {
			case "no-cache":
				d.NoCache = true
			case "max-age", "stale-if-error":
				n, err := deltaSeconds(value, hasValue)
				if err != nil {
					return Directives{}, fmt.Errorf("%w: %s %s", ErrDirective, name, err)
				}
				if name == "max-age" {
					maxAge = minDelta(maxAge, n)
				} else {
					stale = minDelta(stale, n)
				}
			}
		}
	}
	switch {
	case maxAge == 0:
		d.NoCache = true
	case maxAge > 0:
		d.MaxAge = time.Duration(maxAge) * time.Second
	}
	if stale > 0 {
		d.StaleIfError = time.Duration(stale) * time.Second
	}
	return d, nil
}

// minDelta is the smaller of cur (-1 when unset) and n.
func minDelta(cur, n int) int {
	if cur < 0 || n < cur {
		return n
	}
	return cur
}

// splitList splits a field value at the commas outside quoted strings,
// dropping empty elements (RFC 9110 section 5.6.1).
func splitList(s string) []string {
	var out []string
	start, quoted, escaped := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case escaped:
			escaped = false
		case quoted && c == '\\':
			escaped = true
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			out = appendItem(out, s[start:i])
			start = i + 1
		}
	}
	return appendItem(out, s[start:])
}

func appendItem(out []string, item string) []string {
	if item = strings.TrimSpace(item); item != "" {
		out = append(out, item)
	}
	return out
}

// deltaSeconds reads delta-seconds, quoted or not (RFC 9111 section 5.2
// asks recipients to accept the quoted form).
func deltaSeconds(v string, present bool) (int, error) {
	if !present {
		return 0, fmt.Errorf("needs a number of seconds")
	}
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		v = v[1 : len(v)-1]
	}
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return 0, fmt.Errorf("wants a whole number of seconds")
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > maxDelta {
		return maxDelta, nil // only digits, too many of them: 2^31
	}
	return int(n), nil
}

// Fresh reports whether a remembered answer of age may be the entry of a
// source remembering under p, without calling its portal.
func (d Directives) Fresh(p Policy, age time.Duration) bool {
	if d.NoCache || p.Fresh <= 0 || age >= p.Fresh {
		return false
	}
	return d.MaxAge <= 0 || age <= d.MaxAge
}

// MayServeFresh reports whether any remembered answer could be served
// fresh under d for p: when not, there is nothing to read first.
func (d Directives) MayServeFresh(p Policy) bool {
	return !d.NoCache && p.Fresh > 0
}

// Stale reports whether a remembered answer of age may stand in for a
// source remembering under p that failed or was skipped.
func (d Directives) Stale(p Policy, age time.Duration) bool {
	return d.MayStandIn(p) && age <= min(d.StaleIfError, p.Stale)
}

// MayStandIn reports whether any remembered answer could stand in under
// d for p.
func (d Directives) MayStandIn(p Policy) bool {
	return d.StaleIfError > 0 && p.Stale > 0
}
