package sources

import (
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(1994, time.November, 6, 8, 49, 7, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"120", 120 * time.Second, true},
		{"0", 0, true},
		{" 5 ", 5 * time.Second, true},
		{"Sun, 06 Nov 1994 08:49:37 GMT", 30 * time.Second, true},  // IMF-fixdate
		{"Sunday, 06-Nov-94 08:49:37 GMT", 30 * time.Second, true}, // RFC 850
		{"Sun Nov  6 08:49:37 1994", 30 * time.Second, true},       // asctime
		{"Sun, 06 Nov 1994 08:48:37 GMT", 0, true},                 // in the past
		{"99999999999999999999999", time.Duration(maxSeconds) * time.Second, true},
		{"", 0, false},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{"Sun, 06 Nov 1994 25:49:37 GMT", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, ok := ParseRetryAfter(tt.in, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestParseRateLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		header    map[string][]string
		remaining int
		reset     time.Duration
		ok        bool
	}{
		{"draft item", map[string][]string{"RateLimit": {`"default";r=0;t=30`}}, 0, 30 * time.Second, true},
		{"quota left", map[string][]string{"RateLimit": {`"default";r=50;t=30`}}, 50, 30 * time.Second, true},
		{"token item", map[string][]string{"RateLimit": {`default;r=0;t=5`}}, 0, 5 * time.Second, true},
		{"spaces", map[string][]string{"RateLimit": {` "default" ; r=0 ; t=5 `}}, 0, 5 * time.Second, true},
		{"no reset", map[string][]string{"RateLimit": {`"default";r=0`}}, 0, 0, true},
		{"most restrictive", map[string][]string{"RateLimit": {`"daily";r=100;t=3600, "burst";r=0;t=5`}}, 0, 5 * time.Second, true},
		{"longest reset among exhausted", map[string][]string{"RateLimit": {`"a";r=0;t=5, "b";r=0;t=60`}}, 0, 60 * time.Second, true},
		{"several lines", map[string][]string{"RateLimit": {`"a";r=3;t=5`, `"b";r=1;t=9`}}, 1, 9 * time.Second, true},
		{"policy present", map[string][]string{"RateLimit": {`"default";r=0;t=30`}, "RateLimit-Policy": {`"default";q=100;w=60`}}, 0, 30 * time.Second, true},
		{"quoted comma", map[string][]string{"RateLimit": {`"a,b";r=1;t=2`}}, 1, 2 * time.Second, true},
		{"inner list", map[string][]string{"RateLimit": {`("a" "b");r=4;t=2`}}, 4, 2 * time.Second, true},
		{"fractional reset", map[string][]string{"RateLimit": {`"a";r=0;t=1.5`}}, 0, 2 * time.Second, true},
		{"dictionary draft", map[string][]string{"RateLimit": {`limit=10, remaining=0, reset=30`}}, 0, 30 * time.Second, true},
		{"legacy fields", map[string][]string{"RateLimit-Remaining": {"0"}, "RateLimit-Reset": {"20"}}, 0, 20 * time.Second, true},
		{"legacy without reset", map[string][]string{"RateLimit-Remaining": {"7"}}, 7, 0, true},
		{"no r", map[string][]string{"RateLimit": {`"x";t=5`}}, 0, 0, false},
		{"negative r", map[string][]string{"RateLimit": {`"x";r=-1;t=5`}}, 0, 0, false},
		{"garbage", map[string][]string{"RateLimit": {`nonsense`}}, 0, 0, false},
		{"unterminated string", map[string][]string{"RateLimit": {`"abc;r=0`}}, 0, 0, false},
		{"none", nil, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, vs := range tt.header {
				for _, v := range vs {
					h.Add(k, v)
				}
			}
			remaining, reset, ok := ParseRateLimit(h)
			if remaining != tt.remaining || reset != tt.reset || ok != tt.ok {
				t.Errorf("ParseRateLimit(%v) = %d, %v, %v; want %d, %v, %v", tt.header, remaining, reset, ok, tt.remaining, tt.reset, tt.ok)
			}
		})
	}
}
