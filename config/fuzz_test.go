package config

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzParse checks that no input makes Parse panic, and that every
// configuration it accepts is complete.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("testdata", "example.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(example),
		minimal,
		"",
		"~",
		"[]",
		"sources: [~, {}]",
		"server: {listen: ${LISTEN:-x}, admin_token: $$${A}}\n" + minimal,
		"a: &a {x: 1}\nb: {<<: [*a, *a]}\ndefaults: {breaker: *a}\n",
		"sources:\n  - &s {id: a}\n  - <<: *s\n    <<: {id: b}\n",
		"defaults: {breaker: {failure_statuses: [500, *x]}}",
		"query: {deadline: \"1s\\nmax: 2\"}\n---\nsecond: doc\n",
		doc(`store: {redis_url: "redis://[::1"}`, src(`operations: {by_id: {path: "/{id}{", accepts: [x]}}`)),
	} {
		f.Add([]byte(seed))
	}
	getenv := env(map[string]string{"A": "1", "LISTEN": "127.0.0.1:1", "CABA_TOKEN": "t\n: x"})
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml", getenv)
		if err != nil {
			if c != nil {
				t.Errorf("Parse returned a config with an error")
			}
			if err.Error() == "" {
				t.Errorf("empty error message")
			}
			return
		}
		if len(c.Sources) == 0 || c.Problems.BaseURI == "" {
			t.Errorf("accepted an incomplete config: %+v", c)
		}
		for _, s := range c.Sources {
			if s.Location == nil || s.BreakerKey == "" || len(s.Operations) == 0 {
				t.Errorf("accepted an incomplete source: %+v", s)
			}
		}
	})
}

// FuzzDecodeBreakerPatch checks the decoder of PUT
// /v1/admin/sources/{id}/breaker bodies: no input makes it panic; a
// rejected body is described by Errors, one non-empty message each; an
// accepted one encodes back to JSON that decodes to the same patch, and
// applying it then validating the result never panics.
func FuzzDecodeBreakerPatch(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"open_for": "5s"}`,
		`{"window": "2m", "min_calls": 3, "failure_ratio": 0.25, "consecutive_failures": 4, "open_for": "1m", "slow_call": "800ms", "failure_statuses": [503]}`,
		`{"consecutive_failures": 0, "slow_call": 0, "failure_statuses": []}`,
		`{"open_fro": "5s"}`,
		`{"window": 5, "min_calls": 1.5, "failure_ratio": "x", "open_for": "soon", "failure_statuses": "500"}`,
		`{"window": null}`,
		`{"min_calls": 1, "min_calls": 2}`,
		`[1]`,
		``,
		`{"window": "5s"`,
		`{} {}`,
		`{"failure_ratio": 1e400}`,
		`{"failure_ratio": -0}`,
		`{"min_calls": 99999999999999999999}`,
		`{"window": "-2562047h47m16.854775808s"}`,
		`{"window": "9223372036854775807ns", "open_for": "0.000000001s"}`,
		`{"failure_statuses": [500, 500, -1, 1e3]}`,
		`{"window": "\u0035s"}`,
		"{\"open_for\": \"5s\"}\n\t ",
		`{"a": {"b": [{"c": null}]}}`,
	} {
		f.Add([]byte(seed))
	}
	base := builtin().Defaults.Breaker
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodeBreakerPatch(data)
		if err != nil {
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error %v (%T), want Errors", err, err)
			}
			for _, e := range errs {
				if e.Msg == "" {
					t.Errorf("an error without a message: %+v", errs)
				}
			}
			return
		}
		b := p.Apply(base)
		_ = b.Validate("")
		again, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("encoding an accepted patch %+v: %v", p, err)
		}
		q, err := DecodeBreakerPatch(again)
		if err != nil {
			t.Fatalf("%s, the encoding of an accepted patch, is rejected: %v", again, err)
		}
		if got := q.Apply(base); !reflect.DeepEqual(got, b) {
			t.Errorf("round trip through %s: got %+v, want %+v", again, got, b)
		}
	})
}
