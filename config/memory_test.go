package config

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// memoryKey is a valid memory key: 32 bytes in base64.
const memoryKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func TestMemoryValidation(t *testing.T) {
	t.Parallel()
	remembers := src("id: cba", "remember: {fresh: 30s}")
	tests := []struct {
		name string
		data string
		want []want
	}{
		{"a source remembers without a key", doc("", src(), remembers), []want{{"memory.key", `required: source "cba" (sources[1]) remembers`}}},
		{"defaults remember without a key", doc("defaults: {remember: {stale: 10m}}"), []want{{"memory.key", "required"}}},
		{"key not base64", doc(`memory: {key: "!!!"}`), []want{{"memory.key", "want 32 random bytes in base64"}}},
		{"key too short", doc(`memory: {key: "c2hvcnQ="}`), []want{{"memory.key", "decodes to 5 bytes, want 32"}}},
		{"previous key too short", doc(`memory: {key: "` + memoryKey + `", previous_keys: ["c2hvcnQ="]}`), []want{{"memory.previous_keys[0]", "decodes to 5 bytes"}}},
		{"previous keys without a key", doc(`memory: {previous_keys: ["` + memoryKey + `"]}`), []want{{"memory.key", "required with memory.previous_keys"}}},
		{"bounds", doc(`memory: {max_entries: 0, max_entry_bytes: 100}`), []want{
			{"memory.max_entries", "must be at least 1"}, {"memory.max_entry_bytes", "must be at least 256"}}},
		{"negative remember", doc(`memory: {key: "`+memoryKey+`"}`, src("remember: {fresh: -1s, stale: -1s}")), []want{
			{"sources[0].remember.fresh", "must not be negative"}, {"sources[0].remember.stale", "must not be negative"}}},
		{"unknown remember key", doc("", src("remember: {fersh: 1s}")), []want{{"sources[0].remember.fersh", `unknown key (did you mean "fresh"?)`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := parseErrors(t, tt.data, nil)
			if len(errs) != len(tt.want) {
				t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(tt.want), errs)
			}
			for i, w := range tt.want {
				if errs[i].Key != w.key || !strings.Contains(errs[i].Msg, w.msg) {
					t.Errorf("error %d: got %q, want %s: …%s…", i, errs[i].Error(), w.key, w.msg)
				}
			}
		})
	}
}

// The memory block's keys are secrets: an unset ${NAME} is an error naming
// it, and no message shows a key's value.
func TestMemoryKeyIsSecret(t *testing.T) {
	t.Parallel()
	errs := parseErrors(t, doc(`memory: {key: "${MEMORY_KEY}", previous_keys: ["${OLD_KEY}"]}`), nil)
	if len(errs) != 2 || errs[0].Key != "memory.key" || !strings.Contains(errs[0].Msg, "${MEMORY_KEY}") ||
		errs[1].Key != "memory.previous_keys[0]" || !strings.Contains(errs[1].Msg, "${OLD_KEY}") {
		t.Errorf("got %v, want memory.key naming ${MEMORY_KEY} and memory.previous_keys[0] naming ${OLD_KEY}", errs)
	}
	bad := "AAAAAAAAAAAAAAAAAAAAAAAAsecretish" // base64 of 24 bytes
	errs = parseErrors(t, doc(`memory: {key: "${K}"}`), env(map[string]string{"K": bad}))
	if len(errs) != 1 || strings.Contains(errs[0].Error(), bad) {
		t.Errorf("got %v, want one error that does not show the key", errs)
	}
}

func TestMemoryDefaultsAndMerge(t *testing.T) {
	t.Parallel()
	c := mustParse(t, doc(`memory: {key: "${K}", previous_keys: ["`+memoryKey+`"]}
defaults: {remember: {fresh: 30s, stale: 10m}}`, src("remember: {fresh: 5s}"), src("id: cba")), env(map[string]string{"K": strings.TrimRight(memoryKey, "=")}))
	if c.Memory.MaxEntries != 100000 || c.Memory.MaxEntryBytes != 65536 {
		t.Errorf("memory bounds: got %+v, want 100000 and 65536", c.Memory)
	}
	if got := c.Sources[0].Remember; got.Fresh != Duration(5*time.Second) || got.Stale != Duration(10*time.Minute) {
		t.Errorf("sources[0].remember: got %+v, want fresh 5s merged over stale 10m", got)
	}
	if got := c.Sources[1].Remember; got.Fresh != Duration(30*time.Second) || got.Stale != Duration(10*time.Minute) {
		t.Errorf("sources[1].remember: got %+v, want the defaults", got)
	}
	if !c.Remembers() {
		t.Errorf("Remembers: false")
	}
	cur, prev, err := c.Memory.Keys()
	if err != nil || len(cur) != 32 || len(prev) != 1 || !bytes.Equal(cur, prev[0]) {
		t.Errorf("Keys: got %x, %x, %v", cur, prev, err)
	}
	if off := mustParse(t, minimal, nil); off.Remembers() || off.Sources[0].Remember.Remembers() {
		t.Errorf("by default a source remembers")
	}
}
