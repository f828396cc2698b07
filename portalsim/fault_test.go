package portalsim_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/portalsim"
)

func TestFaultJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want portalsim.Fault
	}{
		{"empty", `{}`, portalsim.Fault{Mode: portalsim.Healthy}},
		{"slow", `{"mode":"slow","latency":"800ms"}`, portalsim.Fault{Mode: portalsim.Slow, Latency: 800 * time.Millisecond}},
		{"flaky", `{"mode":"flaky","fail_rate":0.5,"retry_after":"2s"}`,
			portalsim.Fault{Mode: portalsim.Flaky, FailRate: 0.5, RetryAfter: 2 * time.Second}},
		{"forced status", `{"mode":"healthy","status":502,"latency":"1m30s"}`,
			portalsim.Fault{Mode: portalsim.Healthy, Status: 502, Latency: 90 * time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got portalsim.Fault
			if err := json.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatalf("Unmarshal(%s): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Unmarshal(%s) = %+v, want %+v", tt.in, got, tt.want)
			}
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			var back portalsim.Fault
			if err := json.Unmarshal(b, &back); err != nil || back != got {
				t.Errorf("round trip of %s = %+v, %v; want %+v", b, back, err, got)
			}
		})
	}
}

func TestFaultMarshalWritesDurationStrings(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(portalsim.Fault{Mode: portalsim.Throttle, RetryAfter: 20 * time.Second, Latency: 250 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"mode":"throttle","latency":"250ms","fail_rate":0,"retry_after":"20s","status":0}`
	if string(b) != want {
		t.Errorf("Marshal = %s, want %s", b, want)
	}
	if b, _ := json.Marshal(portalsim.Fault{}); !strings.Contains(string(b), `"mode":"healthy"`) {
		t.Errorf("zero Fault marshals as %s, want mode healthy", b)
	}
}

func TestFaultUnmarshalErrors(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"mode":"slow","latency":"soon"}`,
		`{"retry_after":5}`,
		`{"mode":"slow","delay":"1s"}`,
		`[]`,
	} {
		var f portalsim.Fault
		if err := json.Unmarshal([]byte(in), &f); err == nil {
			t.Errorf("Unmarshal(%s) = %+v, want an error", in, f)
		}
	}
}

func TestFaultValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		f    portalsim.Fault
		bad  []string // substrings of the error; none means valid
	}{
		{"zero", portalsim.Fault{}, nil},
		{"every mode", portalsim.Fault{Mode: portalsim.Oversized}, nil},
		{"unknown mode", portalsim.Fault{Mode: "broken"}, []string{"unknown mode"}},
		{"negative durations", portalsim.Fault{Latency: -1, RetryAfter: -time.Second}, []string{"latency", "retry_after"}},
		{"rate above 1", portalsim.Fault{Mode: portalsim.Flaky, FailRate: 1.5}, []string{"fail_rate"}},
		{"status", portalsim.Fault{Status: 99}, []string{"status 99"}},
		{"all at once", portalsim.Fault{Mode: "x", FailRate: -1, Status: 600}, []string{"unknown mode", "fail_rate", "status 600"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.f.Validate()
			if len(tt.bad) == 0 {
				if err != nil {
					t.Errorf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, portalsim.ErrInvalidFault) {
				t.Fatalf("Validate() = %v, want ErrInvalidFault", err)
			}
			for _, s := range tt.bad {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("Validate() = %q, want it to mention %q", err, s)
				}
			}
		})
	}
	for _, m := range portalsim.Modes() {
		if err := (portalsim.Fault{Mode: m}).Validate(); err != nil {
			t.Errorf("mode %s: Validate() = %v", m, err)
		}
	}
}

func TestFaultString(t *testing.T) {
	t.Parallel()
	tests := []struct {
		f    portalsim.Fault
		want string
	}{
		{portalsim.Fault{}, "healthy"},
		{portalsim.Fault{Mode: portalsim.Slow, Latency: 800 * time.Millisecond}, "slow (800ms)"},
		{portalsim.Fault{Mode: portalsim.Flaky, FailRate: 0.5, RetryAfter: 2 * time.Second}, "flaky (50% 503, Retry-After 2s)"},
		{portalsim.Fault{Mode: portalsim.Healthy, Status: 500, Latency: time.Second}, "healthy (+1s, status 500)"},
		{portalsim.Fault{Mode: portalsim.Captcha}, "captcha (challenge page)"},
		{portalsim.Fault{Mode: portalsim.Busy, Latency: time.Second}, "busy (too-many-queries page, +1s)"},
	}
	for _, tt := range tests {
		if got := tt.f.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.f, got, tt.want)
		}
	}
}
