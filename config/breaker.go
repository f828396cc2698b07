package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// Breaker configures the circuit breaker of each (breaker_key, operation)
// of a source (SPEC 4.1).
type Breaker struct {
	// Window is the rolling window the failure ratio is computed over.
	Window Duration `yaml:"window" json:"window"`
	// MinCalls is the number of calls in the window before the ratio counts.
	MinCalls int `yaml:"min_calls" json:"min_calls"`
	// FailureRatio trips the breaker when reached (greater than 0, at most 1).
	FailureRatio float64 `yaml:"failure_ratio" json:"failure_ratio"`
	// ConsecutiveFailures, when positive, trips after that many failures in a row.
	ConsecutiveFailures int `yaml:"consecutive_failures" json:"consecutive_failures"`
	// OpenFor is how long the breaker stays open.
	OpenFor Duration `yaml:"open_for" json:"open_for"`
	// SlowCall, when positive, counts calls slower than it as failures.
	SlowCall Duration `yaml:"slow_call" json:"slow_call"`
	// FailureStatuses are the HTTP statuses (500–599) counted as failures.
	FailureStatuses []int `yaml:"failure_statuses" json:"failure_statuses"`
}

// Validate checks b with the rules used at start-up. key prefixes the key
// path of every problem (such as "sources[0].breaker"; "" for none).
func (b Breaker) Validate(key string) Errors {
	var errs Errors
	if b.Window <= 0 {
		errs.add(child(key, "window"), "must be positive")
	}
	if b.MinCalls < 1 {
		errs.add(child(key, "min_calls"), "must be at least 1")
	}
	if !(b.FailureRatio > 0 && b.FailureRatio <= 1) {
		errs.add(child(key, "failure_ratio"), "must be greater than 0 and at most 1")
	}
	if b.ConsecutiveFailures < 0 {
		errs.add(child(key, "consecutive_failures"), "must not be negative (0 turns the rule off)")
	}
	if b.OpenFor <= 0 {
		errs.add(child(key, "open_for"), "must be positive")
	}
	if b.SlowCall < 0 {
		errs.add(child(key, "slow_call"), "must not be negative (0 turns the rule off)")
	}
	for i, s := range b.FailureStatuses {
		if s < 500 || s > 599 {
			errs.add(index(child(key, "failure_statuses"), i), "must be a 5xx status (500–599), got %d", s)
		}
	}
	return errs
}

// diff names the settings where b and o differ, with both values; empty
// when they are the same (failure statuses compare as sets).
func (b Breaker) diff(o Breaker) []string {
	var out []string
	note := func(key string, x, y any) {
		out = append(out, fmt.Sprintf("%s %v vs %v", key, x, y))
	}
	if b.Window != o.Window {
		note("window", b.Window, o.Window)
	}
	if b.MinCalls != o.MinCalls {
		note("min_calls", b.MinCalls, o.MinCalls)
	}
	if b.FailureRatio != o.FailureRatio {
		note("failure_ratio", b.FailureRatio, o.FailureRatio)
	}
	if b.ConsecutiveFailures != o.ConsecutiveFailures {
		note("consecutive_failures", b.ConsecutiveFailures, o.ConsecutiveFailures)
	}
	if b.OpenFor != o.OpenFor {
		note("open_for", b.OpenFor, o.OpenFor)
	}
	if b.SlowCall != o.SlowCall {
		note("slow_call", b.SlowCall, o.SlowCall)
	}
	if x, y := statusSet(b.FailureStatuses), statusSet(o.FailureStatuses); !slices.Equal(x, y) {
		note("failure_statuses", x, y)
	}
	return out
}

// statusSet is s sorted, without repeats.
func statusSet(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return slices.Compact(s)
}

// BreakerPatch is a partial breaker block, as PUT
// /v1/admin/sources/{id}/breaker takes it: nil fields keep their value.
type BreakerPatch struct {
	Window              *Duration `yaml:"window,omitempty" json:"window,omitempty"`
	MinCalls            *int      `yaml:"min_calls,omitempty" json:"min_calls,omitempty"`
	FailureRatio        *float64  `yaml:"failure_ratio,omitempty" json:"failure_ratio,omitempty"`
	ConsecutiveFailures *int      `yaml:"consecutive_failures,omitempty" json:"consecutive_failures,omitempty"`
	OpenFor             *Duration `yaml:"open_for,omitempty" json:"open_for,omitempty"`
	SlowCall            *Duration `yaml:"slow_call,omitempty" json:"slow_call,omitempty"`
	FailureStatuses     *[]int    `yaml:"failure_statuses,omitempty" json:"failure_statuses,omitempty"`
}

// Apply returns b with every field set in p replaced. The result never
// shares its FailureStatuses with b or p.
func (p BreakerPatch) Apply(b Breaker) Breaker {
	b = b.clone()
	if p.Window != nil {
		b.Window = *p.Window
	}
	if p.MinCalls != nil {
		b.MinCalls = *p.MinCalls
	}
	if p.FailureRatio != nil {
		b.FailureRatio = *p.FailureRatio
	}
	if p.ConsecutiveFailures != nil {
		b.ConsecutiveFailures = *p.ConsecutiveFailures
	}
	if p.OpenFor != nil {
		b.OpenFor = *p.OpenFor
	}
	if p.SlowCall != nil {
		b.SlowCall = *p.SlowCall
	}
	if p.FailureStatuses != nil {
		b.FailureStatuses = slices.Clone(*p.FailureStatuses)
		if b.FailureStatuses == nil {
			b.FailureStatuses = []int{}
		}
	}
	return b
}

// DecodeBreakerPatch reads a JSON object with the config key names of a
// breaker block. It is strict: key names match exactly, unknown or repeated
// keys and null values are errors, durations are Go duration strings. When
// the object is readable but wrong, the error is an Errors with one entry
// per bad key. It does not validate the values: apply the patch and call
// Breaker.Validate.
func DecodeBreakerPatch(data []byte) (BreakerPatch, error) {
	var p BreakerPatch
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return BreakerPatch{}, Errors{{Msg: "want a JSON object"}}
	}
	var errs Errors
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return BreakerPatch{}, Errors{{Msg: "invalid JSON: " + err.Error()}}
		}
		key, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return BreakerPatch{}, Errors{{Msg: "invalid JSON: " + err.Error()}}
		}
		if seen[key] {
			errs.add(child("", key), "repeated key")
			continue
		}
		seen[key] = true
		if string(raw) == "null" {
			errs.add(child("", key), "must not be null (leave the key out to keep the current value)")
			continue
		}
		var msg string
		switch key {
		case "window":
			p.Window, msg = jsonDuration(raw)
		case "min_calls":
			p.MinCalls, msg = jsonInt(raw)
		case "failure_ratio":
			var f float64
			if err := json.Unmarshal(raw, &f); err != nil || math.IsNaN(f) {
				msg = "want a number"
			} else {
				p.FailureRatio = &f
			}
		case "consecutive_failures":
			p.ConsecutiveFailures, msg = jsonInt(raw)
		case "open_for":
			p.OpenFor, msg = jsonDuration(raw)
		case "slow_call":
			p.SlowCall, msg = jsonDuration(raw)
		case "failure_statuses":
			var s []int
			if err := json.Unmarshal(raw, &s); err != nil || s == nil {
				msg = "want a list of integer statuses"
			} else {
				p.FailureStatuses = &s
			}
		default:
			msg = "unknown key"
			if s := suggest(key, breakerKeys()); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
		}
		if msg != "" {
			errs.add(child("", key), "%s", msg)
		}
	}
	if _, err := dec.Token(); err != nil {
		return BreakerPatch{}, Errors{{Msg: "invalid JSON: " + err.Error()}}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BreakerPatch{}, Errors{{Msg: "unexpected data after the JSON object"}}
	}
	if len(errs) > 0 {
		return BreakerPatch{}, errs
	}
	return p, nil
}

// breakerKeys are the key names of a breaker block.
func breakerKeys() []string {
	return []string{"window", "min_calls", "failure_ratio", "consecutive_failures", "open_for", "slow_call", "failure_statuses"}
}

// jsonDuration decodes a Go duration string (or 0).
func jsonDuration(raw json.RawMessage) (*Duration, string) {
	var d Duration
	if err := d.UnmarshalJSON(raw); err != nil {
		return nil, err.Error()
	}
	return &d, ""
}

// jsonInt decodes an integer.
func jsonInt(raw json.RawMessage) (*int, string) {
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, "want an integer"
	}
	return &n, ""
}
