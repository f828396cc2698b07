package config

import (
	"os"
	"path/filepath"
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
