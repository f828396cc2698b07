package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeBreakerPatch(t *testing.T) {
	t.Parallel()
	base := builtin().Defaults.Breaker
	tests := []struct {
		name    string
		body    string
		want    Breaker
		wantErr []string // "key: message part"
	}{
		{"empty object", `{}`, base, nil},
		{"one key", `{"open_for": "5s"}`, func() Breaker { b := base.clone(); b.OpenFor = d("5s"); return b }(), nil},
		{"every key", `{"window": "2m", "min_calls": 3, "failure_ratio": 0.25, "consecutive_failures": 4,
			"open_for": "1m", "slow_call": "800ms", "failure_statuses": [503]}`,
			Breaker{d("2m"), 3, 0.25, 4, d("1m"), d("800ms"), []int{503}}, nil},
		{"explicit zeros", `{"consecutive_failures": 0, "slow_call": 0, "failure_statuses": []}`,
			func() Breaker { b := base.clone(); b.ConsecutiveFailures = 0; b.FailureStatuses = []int{}; return b }(), nil},
		{"unknown key", `{"open_fro": "5s"}`, Breaker{}, []string{`open_fro: unknown key (did you mean "open_for"?)`}},
		{"wrong case", `{"Open_For": "5s"}`, Breaker{}, []string{"Open_For: unknown key"}},
		{"every bad value at once", `{"window": 5, "min_calls": 1.5, "failure_ratio": "x", "open_for": "soon", "failure_statuses": "500"}`, Breaker{}, []string{
			"window: want a Go duration", "min_calls: want an integer", "failure_ratio: want a number",
			"open_for: want a Go duration", "failure_statuses: want a list",
		}},
		{"null", `{"window": null}`, Breaker{}, []string{"window: must not be null"}},
		{"repeated", `{"min_calls": 1, "min_calls": 2}`, Breaker{}, []string{"min_calls: repeated key"}},
		{"not an object", `[1]`, Breaker{}, []string{"want a JSON object"}},
		{"empty body", ``, Breaker{}, []string{"want a JSON object"}},
		{"truncated", `{"window": "5s"`, Breaker{}, []string{"invalid JSON"}},
		{"trailing data", `{} {}`, Breaker{}, []string{"unexpected data after the JSON object"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := DecodeBreakerPatch([]byte(tc.body))
			if tc.wantErr != nil {
				var errs Errors
				if !errors.As(err, &errs) {
					t.Fatalf("got %v, want Errors", err)
				}
				if len(errs) != len(tc.wantErr) {
					t.Errorf("got %d errors, want %d: %v", len(errs), len(tc.wantErr), errs)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(errs.Error(), w) {
						t.Errorf("no %q in %v", w, errs)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeBreakerPatch: %v", err)
			}
			got := p.Apply(base)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestBreakerPatchApplyDoesNotAlias(t *testing.T) {
	t.Parallel()
	base := builtin().Defaults.Breaker
	statuses := []int{502}
	got := BreakerPatch{FailureStatuses: &statuses}.Apply(base)
	statuses[0] = 599
	if got.FailureStatuses[0] != 502 {
		t.Errorf("Apply shares the patch's slice")
	}
	got = BreakerPatch{}.Apply(base)
	got.FailureStatuses[0] = 599
	if base.FailureStatuses[0] != 500 {
		t.Errorf("Apply shares the breaker's slice")
	}
}

func TestBreakerValidate(t *testing.T) {
	t.Parallel()
	base := builtin().Defaults.Breaker
	tests := []struct {
		name  string
		patch string
		want  []string
	}{
		{"valid", `{"failure_ratio": 1, "consecutive_failures": 3}`, nil},
		{"ratio zero", `{"failure_ratio": 0}`, []string{"breaker.failure_ratio: must be greater than 0 and at most 1"}},
		{"ratio above one", `{"failure_ratio": 1.5}`, []string{"breaker.failure_ratio: must be greater than 0 and at most 1"}},
		{"ratio negative", `{"failure_ratio": -0.1}`, []string{"breaker.failure_ratio: must be greater than 0 and at most 1"}},
		{"several", `{"window": "-1s", "min_calls": 0, "consecutive_failures": -1, "open_for": "0s", "slow_call": "-1ms", "failure_statuses": [429, 503]}`, []string{
			"breaker.window: must be positive",
			"breaker.min_calls: must be at least 1",
			"breaker.consecutive_failures: must not be negative",
			"breaker.open_for: must be positive",
			"breaker.slow_call: must not be negative",
			"breaker.failure_statuses[0]: must be a 5xx status (500–599), got 429",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := DecodeBreakerPatch([]byte(tc.patch))
			if err != nil {
				t.Fatal(err)
			}
			errs := p.Apply(base).Validate("breaker")
			if len(errs) != len(tc.want) {
				t.Fatalf("got %d errors, want %d: %v", len(errs), len(tc.want), errs)
			}
			for i, w := range tc.want {
				if got := errs[i].Error(); !strings.HasPrefix(got, w) {
					t.Errorf("error %d: got %q, want %q", i, got, w)
				}
			}
		})
	}
	if errs := (Breaker{}).Validate(""); len(errs) == 0 || errs[0].Key != "window" {
		t.Errorf("Validate with no prefix: got %v", errs)
	}
}
