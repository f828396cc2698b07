package sources

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// maxSeconds is the largest number of seconds a time.Duration holds; longer
// delays saturate there (callers clamp to their own maximum pause).
const maxSeconds = math.MaxInt64 / int64(time.Second)

// ParseRetryAfter reads a Retry-After field value (RFC 9110, 10.2.3):
// delay-seconds, or an HTTP-date in any of its three forms (IMF-fixdate,
// RFC 850, asctime), relative to now. A date in the past gives (0, true);
// an empty, negative or otherwise malformed value gives (0, false).
// Enormous delays saturate instead of overflowing.
func ParseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if allDigits(v) {
		return seconds(v), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d < 0 {
		d = 0
	}
	return d, true
}

// seconds converts a run of ASCII digits to a duration, saturating.
func seconds(digits string) time.Duration {
	var n int64
	for i := 0; i < len(digits); i++ {
		n = n*10 + int64(digits[i]-'0')
		if n > maxSeconds {
			return time.Duration(maxSeconds) * time.Second
		}
	}
	return time.Duration(n) * time.Second
}

// ParseRateLimit reads the rate-limit fields of an answer: the RateLimit
// field of the IETF httpapi draft (a structured field list whose items carry
// the parameters r, remaining quota, and t, seconds until it resets, as in
// `"default";r=0;t=30`), the dictionary form of earlier drafts
// (`limit=10, remaining=0, reset=30`), or the legacy separate fields
// RateLimit-Remaining and RateLimit-Reset. ok is false when none of them
// carries a remaining quota.
//
// When the field lists several quota policies, the most restrictive one
// is returned: the lowest remaining quota and, among those, the longest
// reset. A client that respects that item respects them all, whichever
// policy RateLimit-Policy names.
func ParseRateLimit(h http.Header) (remaining int, reset time.Duration, ok bool) {
	if vals := h["Ratelimit"]; len(vals) > 0 {
		var best, dict quota
		for _, v := range vals {
			parseRateLimitField(v, &best, &dict)
		}
		best.merge(dict)
		if best.hasR {
			return best.remaining(), best.reset(), true
		}
	}
	var q quota
	q.r, q.hasR = firstInteger(h["Ratelimit-Remaining"])
	if !q.hasR {
		return 0, 0, false
	}
	q.t, q.hasT = firstInteger(h["Ratelimit-Reset"])
	return q.remaining(), q.reset(), true
}

// quota is one rate-limit item: r is the remaining quota and t the seconds
// until it resets, each valid only when its has flag is set.
type quota struct {
	r, t       int64
	hasR, hasT bool
}

// merge keeps the more restrictive of q and o in q.
func (q *quota) merge(o quota) {
	switch {
	case !o.hasR:
	case !q.hasR, o.r < q.r, o.r == q.r && o.t > q.t:
		*q = o
	}
}

func (q quota) remaining() int {
	if q.r > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(q.r)
}

func (q quota) reset() time.Duration {
	if !q.hasT {
		return 0
	}
	return time.Duration(min(q.t, maxSeconds)) * time.Second
}

// parseRateLimitField reads one RateLimit field line. List members (items
// with parameters) are merged into best; the key=value members of the
// dictionary form accumulate in dict. Malformed members are skipped.
func parseRateLimitField(v string, best, dict *quota) {
	for v != "" {
		var member string
		member, v = cutMember(v)
		member = strings.TrimSpace(member)
		if member == "" {
			continue
		}
		params, isDict := skipBareItem(member)
		if isDict {
			key, value, _ := strings.Cut(member, "=")
			value, _, _ = strings.Cut(value, ";")
			n, ok := parseInteger(strings.TrimSpace(value))
			switch strings.ToLower(strings.TrimSpace(key)) {
			case "remaining", "r":
				dict.r, dict.hasR = n, ok
			case "reset", "t":
				dict.t, dict.hasT = n, ok
			}
			continue
		}
		var q quota
		for params != "" {
			var p string
			p, params, _ = strings.Cut(params, ";")
			key, value, _ := strings.Cut(p, "=")
			n, ok := parseInteger(strings.TrimSpace(value))
			switch strings.TrimSpace(key) {
			case "r":
				q.r, q.hasR = n, ok
			case "t":
				q.t, q.hasT = n, ok
			}
		}
		best.merge(q)
	}
}

// cutMember splits v at its first comma outside a quoted string or an
// inner list.
func cutMember(v string) (member, rest string) {
	depth, quoted := 0, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case quoted && c == '\\':
			i++
		case c == '"':
			quoted = !quoted
		case quoted:
		case c == '(':
			depth++
		case c == ')' && depth > 0:
			depth--
		case c == ',' && depth == 0:
			return v[:i], v[i+1:]
		}
	}
	return v, ""
}

// skipBareItem skips the item of a list member (a quoted string, an inner
// list, or a token) and returns its parameters without the leading ';'.
// isDict reports a dictionary member (a key followed by '=').
func skipBareItem(member string) (params string, isDict bool) {
	i := 0
	switch member[0] {
	case '"':
		for i = 1; i < len(member) && member[i] != '"'; i++ {
			if member[i] == '\\' {
				i++
			}
		}
		i++
	case '(':
		for depth := 0; i < len(member); i++ {
			if member[i] == '(' {
				depth++
			} else if member[i] == ')' {
				if depth--; depth == 0 {
					i++
					break
				}
			}
		}
	default:
		for i < len(member) && member[i] != ';' && member[i] != '=' {
			i++
		}
		if i < len(member) && member[i] == '=' {
			return "", true
		}
	}
	if i >= len(member) {
		return "", false
	}
	_, params, _ = strings.Cut(member[i:], ";")
	return params, false
}

// parseInteger reads a non-negative decimal integer; a fraction is rounded
// up (t=1.5 waits two seconds), and huge values saturate.
func parseInteger(s string) (int64, bool) {
	whole, frac, hasFrac := strings.Cut(s, ".")
	if !allDigits(whole) || (hasFrac && !allDigits(frac)) {
		return 0, false
	}
	n := int64(seconds(whole) / time.Second)
	if hasFrac && strings.Trim(frac, "0") != "" && n < maxSeconds {
		n++
	}
	return n, true
}

// firstInteger reads the first member of a legacy numeric field.
func firstInteger(vals []string) (int64, bool) {
	if len(vals) == 0 {
		return 0, false
	}
	first, _, _ := strings.Cut(vals[0], ",")
	return parseInteger(strings.TrimSpace(first))
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
