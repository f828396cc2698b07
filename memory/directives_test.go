package memory_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/memory"
)

func TestParseDirectives(t *testing.T) {
	t.Parallel()
	tests := []struct {
		fields []string
		want   memory.Directives
		bad    bool
	}{
		{nil, memory.Directives{}, false},
		{[]string{""}, memory.Directives{}, false},
		{[]string{"no-cache"}, memory.Directives{NoCache: true}, false},
		{[]string{"No-Cache"}, memory.Directives{NoCache: true}, false},
		{[]string{"max-age=0"}, memory.Directives{NoCache: true}, false},
		{[]string{"max-age=60"}, memory.Directives{MaxAge: time.Minute}, false},
		{[]string{`max-age="60"`}, memory.Directives{MaxAge: time.Minute}, false},
		{[]string{"MAX-AGE = 60"}, memory.Directives{MaxAge: time.Minute}, false},
		{[]string{"stale-if-error=600"}, memory.Directives{StaleIfError: 10 * time.Minute}, false},
		{[]string{"stale-if-error=0"}, memory.Directives{}, false},
		{[]string{"no-cache, stale-if-error=600"}, memory.Directives{NoCache: true, StaleIfError: 10 * time.Minute}, false},
		{[]string{"max-age=60", "stale-if-error=30"}, memory.Directives{MaxAge: time.Minute, StaleIfError: 30 * time.Second}, false},
		{[]string{"max-age=60, max-age=30"}, memory.Directives{MaxAge: 30 * time.Second}, false},
		{[]string{"max-age=30, max-age=0"}, memory.Directives{NoCache: true}, false},
		{[]string{"max-age=99999999999999999999999"}, memory.Directives{MaxAge: (1 << 31) * time.Second}, false},
		{[]string{",, no-store ,max-age=5,"}, memory.Directives{MaxAge: 5 * time.Second}, false},
		{[]string{`foo="a,max-age=0", max-age=5`}, memory.Directives{MaxAge: 5 * time.Second}, false},
		{[]string{"no-transform, only-if-cached, private"}, memory.Directives{}, false},
		{[]string{"max-age"}, memory.Directives{}, true},
		{[]string{"max-age="}, memory.Directives{}, true},
		{[]string{"max-age=-1"}, memory.Directives{}, true},
		{[]string{"max-age=1.5"}, memory.Directives{}, true},
		{[]string{"stale-if-error=ten"}, memory.Directives{}, true},
		{[]string{`stale-if-error="`}, memory.Directives{}, true},
	}
	for _, tt := range tests {
		got, err := memory.ParseDirectives(tt.fields)
		if tt.bad {
			if !errors.Is(err, memory.ErrDirective) {
				t.Errorf("%q: got %+v, %v; want ErrDirective", tt.fields, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: got %+v, %v; want %+v", tt.fields, got, err, tt.want)
		}
	}
}

func TestParseDirectivesNeverRepeatsTheValue(t *testing.T) {
	t.Parallel()
	_, err := memory.ParseDirectives([]string{"max-age=AB123CD"})
	if err == nil || strings.Contains(err.Error(), "AB123CD") {
		t.Errorf("got %v, want an error that does not repeat the value", err)
	}
}

func TestDirectivesDecide(t *testing.T) {
	t.Parallel()
	p := memory.Policy{Fresh: time.Minute, Stale: 10 * time.Minute}
	tests := []struct {
		name         string
		d            memory.Directives
		p            memory.Policy
		age          time.Duration
		fresh, stale bool
	}{
		{"young", memory.Directives{}, p, 30 * time.Second, true, false},
		{"as old as fresh", memory.Directives{}, p, time.Minute, false, false},
		{"no-cache", memory.Directives{NoCache: true}, p, time.Second, false, false},
		{"within max-age", memory.Directives{MaxAge: 40 * time.Second}, p, 30 * time.Second, true, false},
		{"beyond max-age", memory.Directives{MaxAge: 20 * time.Second}, p, 30 * time.Second, false, false},
		{"max-age does not extend fresh", memory.Directives{MaxAge: time.Hour}, p, 2 * time.Minute, false, false},
		{"stale allowed", memory.Directives{StaleIfError: time.Hour}, p, 5 * time.Minute, false, true},
		{"stale bounded by the source", memory.Directives{StaleIfError: time.Hour}, p, 11 * time.Minute, false, false},
		{"stale bounded by the request", memory.Directives{StaleIfError: time.Minute}, p, 5 * time.Minute, false, false},
		{"no-cache may still stand in", memory.Directives{NoCache: true, StaleIfError: time.Hour}, p, time.Second, false, true},
		{"fresh off", memory.Directives{}, memory.Policy{Stale: time.Hour}, time.Second, false, false},
		{"stale off", memory.Directives{StaleIfError: time.Hour}, memory.Policy{Fresh: time.Minute}, 2 * time.Minute, false, false},
	}
	for _, tt := range tests {
		if got := tt.d.Fresh(tt.p, tt.age); got != tt.fresh {
			t.Errorf("%s: Fresh got %v, want %v", tt.name, got, tt.fresh)
		}
		if got := tt.d.Stale(tt.p, tt.age); got != tt.stale {
			t.Errorf("%s: Stale got %v, want %v", tt.name, got, tt.stale)
		}
	}
}

// FuzzParseDirectives: any header parses or is refused, never panics, and
// what it allows is within what was asked.
func FuzzParseDirectives(f *testing.F) {
	for _, s := range []string{"no-cache", "max-age=60", `max-age="5", stale-if-error=600`, `a="\",max-age=0"`, "max-age=99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := memory.ParseDirectives([]string{s})
		if err != nil {
			if d != (memory.Directives{}) {
				t.Errorf("%q: an error with directives %+v", s, d)
			}
			return
		}
		if d.MaxAge < 0 || d.StaleIfError < 0 || d.MaxAge > (1<<31)*time.Second || d.StaleIfError > (1<<31)*time.Second {
			t.Errorf("%q: out of range %+v", s, d)
		}
		if d.NoCache && !strings.Contains(strings.ToLower(s), "no-cache") && !strings.Contains(strings.ToLower(s), "max-age") {
			t.Errorf("%q: no-cache out of nothing", s)
		}
	})
}
