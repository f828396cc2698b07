package server

import (
	"strings"
	"testing"
)

func TestNegotiate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		accept []string
		want   media
	}{
		{nil, mediaJSON},
		{[]string{""}, mediaJSON},
		{[]string{"text/event-stream"}, mediaEventStream},
		{[]string{"application/x-ndjson"}, mediaNDJSON},
		{[]string{"application/json, application/problem+json"}, mediaJSON},
		{[]string{"application/x-ndjson, application/problem+json;q=0.5"}, mediaNDJSON},
		// Highest q wins; JSON on a tie with JSON.
		{[]string{"text/event-stream, application/json"}, mediaJSON},
		{[]string{"text/event-stream;q=0.9, application/json;q=0.8"}, mediaEventStream},
		{[]string{"application/json;q=0.5, application/x-ndjson;q=0.5"}, mediaJSON},
		{[]string{"application/json;q=0.501, application/x-ndjson;q=0.5"}, mediaJSON},
		{[]string{"application/json;q=0.499, application/x-ndjson;q=0.5"}, mediaNDJSON},
		// Without JSON, the range listed first among equals.
		{[]string{"application/x-ndjson, text/event-stream"}, mediaNDJSON},
		{[]string{"text/event-stream, application/x-ndjson"}, mediaEventStream},
		{[]string{"application/json;q=0, */*"}, mediaEventStream},
		// Wildcards, and the most specific range that matches.
		{[]string{"*/*"}, mediaJSON},
		{[]string{"text/*"}, mediaEventStream},
		{[]string{"application/*"}, mediaJSON},
		{[]string{"application/*;q=0.5, application/x-ndjson"}, mediaNDJSON},
		{[]string{"*/*;q=0.1, text/event-stream;q=0.2"}, mediaEventStream},
		{[]string{"text/event-stream;q=0, */*"}, mediaJSON},
		{[]string{"text/event-stream;q=0, text/*"}, mediaJSON},
		{[]string{"text/*;q=0, text/event-stream"}, mediaEventStream},
		{[]string{"text/event-stream;v=1;q=0.1, text/event-stream;q=1, application/json;q=0.5"}, mediaJSON},
		{[]string{"text/event-stream;q=0.1, text/event-stream;q=1, application/json;q=0.5"}, mediaJSON}, // the first of equals
		// Nothing acceptable, or nothing readable: JSON.
		{[]string{"text/html"}, mediaJSON},
		{[]string{"application/json;q=0"}, mediaJSON},
		{[]string{"text/event-stream;q=0"}, mediaJSON},
		{[]string{"garbage"}, mediaJSON},
		// Case, white space, parameters, quoted strings, empty elements.
		{[]string{"Text/Event-Stream"}, mediaEventStream},
		{[]string{"text/event-stream;Q=0.9, application/json;q=0.1"}, mediaEventStream},
		{[]string{" \t text/event-stream \t ; \t q=0.9 \t "}, mediaEventStream},
		{[]string{`text/event-stream; charset="utf-8, or not"; q=1`}, mediaEventStream},
		{[]string{`application/json; x="a\"b,c"; q=0.1, text/event-stream`}, mediaEventStream},
		{[]string{",, ,text/event-stream,,"}, mediaEventStream},
		{[]string{"text/event-stream;;q=0.5, application/json;q=0.4"}, mediaEventStream},
		// Several header lines are one list.
		{[]string{"application/json;q=0.1", "text/event-stream"}, mediaEventStream},
		{[]string{"text/event-stream", "application/json"}, mediaJSON},
		// Malformed elements are skipped, the rest read.
		{[]string{"text/event-stream;q=2"}, mediaJSON},
		{[]string{"text/event-stream;q=1.5, application/x-ndjson"}, mediaNDJSON},
		{[]string{"text/event-stream;q=0.1234"}, mediaJSON},
		{[]string{"text/event-stream;q=x"}, mediaJSON},
		{[]string{`text/event-stream;q="1"`}, mediaJSON},
		{[]string{"text/event-stream;q=0.5;q=1"}, mediaJSON},
		{[]string{"*/event-stream"}, mediaJSON},
		{[]string{"text/"}, mediaJSON},
		{[]string{"/event-stream"}, mediaJSON},
		{[]string{"text/event-stream junk, application/x-ndjson"}, mediaNDJSON},
		{[]string{`text/event-stream;x="unclosed, application/x-ndjson`}, mediaJSON},
		{[]string{"text/event-stream;x=, application/x-ndjson"}, mediaNDJSON},
		{[]string{"text/event-stream;=1, application/x-ndjson"}, mediaNDJSON},
		// q values at their bounds.
		{[]string{"text/event-stream;q=1.000"}, mediaEventStream},
		{[]string{"text/event-stream;q=1.001"}, mediaJSON},
		{[]string{"text/event-stream;q=0.001"}, mediaEventStream},
		{[]string{"text/event-stream;q=0."}, mediaJSON},
		{[]string{"text/event-stream;q=1."}, mediaEventStream},
	}
	for _, tt := range tests {
		if got := negotiate(tt.accept); got != tt.want {
			t.Errorf("negotiate(%q) = %v, want %v", tt.accept, got, tt.want)
		}
	}
}

func TestNegotiateAllocatesNothing(t *testing.T) {
	fields := []string{`Application/JSON;q=0.5, text/event-stream; charset="utf-8"; q=0.9, */*;q=0.1`}
	if n := testing.AllocsPerRun(100, func() { negotiate(fields) }); n != 0 {
		t.Errorf("negotiate allocates %v times a call, want 0 (it runs on every query)", n)
	}
}

// FuzzNegotiate checks the Accept parser on any header: it never fails,
// always picks one of the offers, and keeps the properties RFC 9110 gives
// the header whatever it holds.
func FuzzNegotiate(f *testing.F) {
	for _, s := range []string{
		"", "*/*", "text/event-stream", "application/x-ndjson;q=0.5, application/json;q=0.4",
		`text/event-stream; a="b,\"c"; q=1, */*;q=0`, "text/*;q=0.001", ",,;", `"`, `a/b;c="\`,
		"application/json;q=0, */*", "TEXT/EVENT-STREAM;Q=1",
	} {
		f.Add(s, "application/json;q=0.3")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		got := negotiate([]string{a})
		if got != mediaJSON && got != mediaEventStream && got != mediaNDJSON {
			t.Fatalf("negotiate(%q) = %d, not an offer", a, got)
		}
		// A stream is chosen only when the header names it, or a
		// wildcard covers it.
		lower := asciiLower(a)
		if got == mediaEventStream && !strings.Contains(lower, "event-stream") && !strings.Contains(lower, "*") {
			t.Errorf("negotiate(%q) = %v, which it does not name", a, got)
		}
		if got == mediaNDJSON && !strings.Contains(lower, "x-ndjson") && !strings.Contains(lower, "*") {
			t.Errorf("negotiate(%q) = %v, which it does not name", a, got)
		}
		// Media types and parameter names are case-insensitive, and no
		// value is read but q, whose digits case does not change.
		if up := negotiate([]string{asciiUpper(a)}); up != got {
			t.Errorf("negotiate(%q) = %v, but %v in upper case", a, got, up)
		}
		// Empty elements and white space around them change nothing.
		if padded := negotiate([]string{" ,\t" + a + " , "}); padded != got {
			t.Errorf("negotiate(%q) = %v, but %v with empty elements around it", a, got, padded)
		}
		// Accepting JSON as much as anything makes the answer JSON.
		if with := negotiate([]string{"application/json", a}); with != mediaJSON && !mentionsJSON(lower) {
			t.Errorf("negotiate(%q) = %v with application/json listed first", a, with)
		}
		// Several header lines are one list, joined by commas (outside
		// quoted strings, which a field line cannot leave open).
		if !strings.ContainsAny(a+b, `"\`) {
			if split, joined := negotiate([]string{a, b}), negotiate([]string{a + "," + b}); split != joined {
				t.Errorf("negotiate(%q, %q) = %v, but %v as one line", a, b, split, joined)
			}
		}
	})
}

// mentionsJSON reports whether a header may name application/json itself
// (and so refuse it, or weigh it, more specifically than a later element).
func mentionsJSON(lower string) bool {
	return strings.Contains(lower, "application/json")
}

func asciiLower(s string) string { return mapASCII(s, 'A', 'Z', 'a'-'A') }
func asciiUpper(s string) string { return mapASCII(s, 'a', 'z', 'A'-'a') }

func mapASCII(s string, from, to byte, delta int) string {
	b := []byte(s)
	for i, c := range b {
		if from <= c && c <= to {
			b[i] = byte(int(c) + delta)
		}
	}
	return string(b)
}
