package sources

import (
	"net/http"
	"testing"
	"time"
)

func FuzzParseRetryAfter(f *testing.F) {
	for _, seed := range []string{"120", "0", "-1", "", "Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "99999999999999999999999", "1.5"} {
		f.Add(seed)
	}
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := ParseRetryAfter(v, now)
		if d < 0 || (!ok && d != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", v, d, ok)
		}
	})
}

func FuzzParseRateLimit(f *testing.F) {
	for _, seed := range []string{`"default";r=0;t=30`, `default;r=5`, `"a";r=0;t=5, "b";r=100;t=60`, `limit=10, remaining=0, reset=30`, `("a" "b");r=1;t=2`, `"a\"b";r=0;t=1`, `"x`, `(((`, `;;;`, `r=0`, `"a";t=1.5;r=0`} {
		f.Add(seed, "0", "30")
	}
	f.Fuzz(func(t *testing.T, field, remaining, reset string) {
		h := http.Header{}
		h.Set("RateLimit", field)
		h.Set("RateLimit-Remaining", remaining)
		h.Set("RateLimit-Reset", reset)
		r, d, ok := ParseRateLimit(h)
		if r < 0 || d < 0 || (!ok && (r != 0 || d != 0)) {
			t.Fatalf("ParseRateLimit(%q, %q, %q) = %d, %v, %v", field, remaining, reset, r, d, ok)
		}
	})
}
