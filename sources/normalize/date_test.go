package normalize

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the tests need America/Argentina/Buenos_Aires everywhere
)

func TestFormatDate(t *testing.T) {
	t.Parallel()
	ba, err := time.LoadLocation("America/Argentina/Buenos_Aires")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   string
		want string // "" means unparseable
	}{
		{"2026-03-14T09:12:00-03:00", "2026-03-14T09:12:00-03:00"},
		{"2026-03-14T09:12:00+05:30", "2026-03-14T09:12:00+05:30"},
		{"2026-03-14T09:12:00Z", "2026-03-14T09:12:00Z"},
		{"2026-03-14t09:12:00z", "2026-03-14T09:12:00Z"},
		{"2026-03-14T09:12:00.123456789Z", "2026-03-14T09:12:00Z"},
		{"2026-03-14T09:12:00-0300", "2026-03-14T09:12:00-03:00"},
		{"2026-03-14T09:12:00-03", "2026-03-14T09:12:00-03:00"},
		{"2026-03-14T09:12:00+00:00", "2026-03-14T09:12:00Z"},
		{"2026-03-14 09:12:00 UTC", "2026-03-14T09:12:00Z"},
		{"2026-03-14T09:12:00", "2026-03-14T09:12:00-03:00"},
		{"2026-03-14T09:12:00.5", "2026-03-14T09:12:00-03:00"},
		{"2026-03-14T09:12:00,5", "2026-03-14T09:12:00-03:00"},
		{"2026-03-14 09:12:00", "2026-03-14T09:12:00-03:00"},
		{"2026-03-14T09:12", "2026-03-14T09:12:00-03:00"},
		{"2026-03-14", "2026-03-14T00:00:00-03:00"},
		{" 2026-03-14 ", "2026-03-14T00:00:00-03:00"},
		{"14/03/2026 09:12:00", "2026-03-14T09:12:00-03:00"},
		{"14/03/2026 09:12", "2026-03-14T09:12:00-03:00"},
		{"14/03/2026", "2026-03-14T00:00:00-03:00"},
		{"4/3/2026 9:05", "2026-03-04T09:05:00-03:00"},
		{"14-03-2026", "2026-03-14T00:00:00-03:00"},
		{"14.03.2026", "2026-03-14T00:00:00-03:00"},
		{"29/02/2024", "2024-02-29T00:00:00-03:00"},
		{"1773490320", "2026-03-14T09:12:00-03:00"},
		{"/Date(1773490320000)/", "2026-03-14T09:12:00-03:00"},
		{"/Date(1773490320000+0100)/", "2026-03-14T13:12:00+01:00"},
		{"/Date(-86400000)/", "1969-12-30T21:00:00-03:00"},

		{"/Date(abc)/", ""},
		{"/Date(1773490320000", ""},
		{"/Date(1773490320000+01)/x", ""},
		{"", ""},
		{"yesterday", ""},
		{"2026-02-30", ""},
		{"29/02/2026", ""},
		{"2026-13-01", ""},
		{"2026-00-01", ""},
		{"0000-01-01", ""},
		{"14/03/26", ""},
		{"14/03-2026", ""},
		{"2026-03-14T25:00", ""},
		{"2026-03-14T09:60", ""},
		{"2026-03-14T09:12:61", ""},
		{"2026-03-14T09:12:00+25:00", ""},
		{"2026-03-14T09:12:00.Z", ""},
		{"2026-03-14X09:12", ""},
		{"2026-03-14T", ""},
		{"2026-03-14T09:12:00 -03:00 extra", ""},
		{"2026/03/14", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, ok := formatDate(nil, tt.in, ba)
			if tt.want == "" {
				if ok {
					t.Errorf("formatDate(%q) = %q, want unparseable", tt.in, got)
				}
				return
			}
			if !ok || got != tt.want {
				t.Errorf("formatDate(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
			}
		})
	}
}

func TestFormatEpoch(t *testing.T) {
	t.Parallel()
	ba, err := time.LoadLocation("America/Argentina/Buenos_Aires")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   string
		want string
	}{
		{"1773490320", "2026-03-14T09:12:00-03:00"},
		{"1773490320.999", "2026-03-14T09:12:00-03:00"},
		{"1773490320000", "2026-03-14T09:12:00-03:00"},
		{"1.77349032e9", "2026-03-14T09:12:00-03:00"},
		{"1.77349032e12", "2026-03-14T09:12:00-03:00"},
		{"0", "1969-12-31T21:00:00-03:00"},
		{"-86400", "1969-12-30T21:00:00-03:00"},
		{"999999999999", ""}, // seconds past year 9999
		{"1e300", ""},
		{"99999999999999999999", ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, ok := formatEpoch(nil, tt.in, ba)
			if tt.want == "" {
				if ok {
					t.Errorf("formatEpoch(%q) = %q, want unparseable", tt.in, got)
				}
				return
			}
			if !ok || got != tt.want {
				t.Errorf("formatEpoch(%q) = %q, %v; want %q", tt.in, got, ok, tt.want)
			}
		})
	}
}

// TestDefaultForms checks that the zero Layouts is today's formatDate and
// formatEpoch, with errors.
func TestDefaultForms(t *testing.T) {
	t.Parallel()
	ba := mustLocation(t, "America/Argentina/Buenos_Aires")
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, ba)
	tests := []struct {
		in     string
		number bool
		want   string // "" means an error
	}{
		{"2026-03-14T09:12:00-03:00", false, "2026-03-14T09:12:00-03:00"},
		{"14/03/2026 09:12", false, "2026-03-14T09:12:00-03:00"},
		{"1773490320", false, "2026-03-14T09:12:00-03:00"},
		{"/Date(1773490320000)/", false, "2026-03-14T09:12:00-03:00"},
		{"1773490320", true, "2026-03-14T09:12:00-03:00"},
		{"1773490320000", true, "2026-03-14T09:12:00-03:00"},
		{"1.77349032e9", true, "2026-03-14T09:12:00-03:00"},
		{"14/03/26", false, ""},
		{"20/05/2017 AS 16:08", false, ""},
		{"1e300", true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := Layouts{}.Date(tt.in, tt.number, ba, now)
			if tt.want == "" {
				if err == nil {
					t.Errorf("Date(%q, %v) = %q, want an error", tt.in, tt.number, got)
				} else if strings.Contains(err.Error(), tt.in) {
					t.Errorf("Date(%q, %v): error %q quotes the value", tt.in, tt.number, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Date(%q, %v) = %q, %v; want %q", tt.in, tt.number, got, err, tt.want)
			}
		})
	}
}

// TestDateNilLocation checks that a nil location is UTC, not a panic.
func TestDateNilLocation(t *testing.T) {
	t.Parallel()
	l, err := CompileLayouts([]string{"dd/MM/yyyy"})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []Layouts{{}, l} {
		if got, err := l.Date("14/03/2026", false, nil, time.Time{}); err != nil || got != "2026-03-14T00:00:00Z" {
			t.Errorf("Date with a nil location = %q, %v; want 2026-03-14T00:00:00Z", got, err)
		}
	}
}

func mustLocation(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}
