package normalize

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// testNow is "today" in the layout tests: 2026-03-14 12:00 in Buenos Aires.
func testNow(t testing.TB) (time.Time, *time.Location) {
	ba := mustLocation(t, "America/Argentina/Buenos_Aires")
	return time.Date(2026, 3, 14, 12, 0, 0, 0, ba), ba
}

func TestLayoutsDate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		layouts []string
		in      string
		number  bool
		want    string // "" means the value does not normalise
	}{
		// Real portal text (SPEC 12 and public scrapers).
		{[]string{"dd/MM/yyyy 'AS' HH:mm"}, "20/05/2017 AS 16:08", false, "2017-05-20T16:08:00-03:00"},
		{[]string{"dd/MM/yyyy 'AS' HH:mm"}, "20/05/2017 as 16:08", false, "2017-05-20T16:08:00-03:00"},
		{[]string{"dd/MM/yyyy 'AS' HH:mm"}, "20/05/2017 às 16:08", false, "2017-05-20T16:08:00-03:00"},
		{[]string{"dd/MM/yyyy 'às' HH:mm:ss"}, "10/06/2016 às 12:36:11", false, "2016-06-10T12:36:11-03:00"},
		{[]string{"dd/MM/yyyy 'às' HH:mm:ss"}, "10/06/2016 ÀS 12:36:11", false, "2016-06-10T12:36:11-03:00"},
		{[]string{"dd/MM/yyyy 'às' HH:mm:ss"}, "10/06/2016 AS 12:36:11", false, "2016-06-10T12:36:11-03:00"},
		{[]string{"dd/MM/yyyy 'às' HH:mm"}, "10/06/2016 às 12:36", false, "2016-06-10T12:36:00-03:00"},
		{[]string{"d/M/yy HH:mm 'HS'"}, "5/3/24 14:05 HS", false, "2024-03-05T14:05:00-03:00"},
		{[]string{"d/M/yy HH:mm 'HS'"}, "5/3/24 14:05 hs", false, "2024-03-05T14:05:00-03:00"},
		{[]string{"dd/MM/yyyy HH:mm 'hs.'"}, "14/03/2026 09:12 hs.", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"d 'de' MMMM 'de' yyyy"}, "14 de marzo de 2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"d 'de' MMMM 'de' yyyy"}, "14 DE MARZO DE 2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"d 'de' MMMM 'de' yyyy"}, "14 de março de 2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"d 'de' MMMM 'de' yyyy"}, "14 de MARÇO de 2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"d 'de' MMMM 'de' yyyy"}, "1 de setiembre de 2025", false, "2025-09-01T00:00:00-03:00"},
		{[]string{"d 'de' MMMM 'de' yyyy"}, "1 de setembro de 2025", false, "2025-09-01T00:00:00-03:00"},
		{[]string{"d 'de' MMMM 'de' yyyy"}, "1 de ago. de 2025", false, "2025-08-01T00:00:00-03:00"},
		{[]string{"dd-MMM-yyyy"}, "14-MAR-2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"dd-MMM-yyyy"}, "14-mAr-2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"dd-MMM-yyyy"}, "14-DIC-2025", false, "2025-12-14T00:00:00-03:00"},
		{[]string{"dd-MMM-yyyy"}, "14-dez-2025", false, "2025-12-14T00:00:00-03:00"},
		{[]string{"dd-MMM-yyyy"}, "14-Dec-2025", false, "2025-12-14T00:00:00-03:00"},
		{[]string{"dd-MMM-yyyy"}, "14-out-2025", false, "2025-10-14T00:00:00-03:00"},
		{[]string{"d MMM yyyy"}, "14 mar. 2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"d MMM yyyy"}, "14 mar 2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"d MMM yyyy"}, "14 marzo 2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"d MMM yyyy"}, "1 sept. 2025", false, "2025-09-01T00:00:00-03:00"},
		{[]string{"d MMM yyyy"}, "1 set. 2025", false, "2025-09-01T00:00:00-03:00"},
		{[]string{"d MMM yyyy"}, "1 jun. 2025", false, "2025-06-01T00:00:00-03:00"},
		{[]string{"d MMM yyyy"}, "1 junio 2025", false, "2025-06-01T00:00:00-03:00"},
		{[]string{"d MMM yyyy"}, "1 June 2025", false, "2025-06-01T00:00:00-03:00"},
		{[]string{"d MMM yyyy"}, "1 may. 2025", false, "2025-05-01T00:00:00-03:00"},
		{[]string{"d MMM yyyy"}, "1 mayo. 2025", false, ""}, // a full name takes no '.'
		{[]string{"d MMMM yyyy"}, "14 mar 2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"d MMMM yyyy"}, "14 Feb 2026", false, "2026-02-14T00:00:00-03:00"},
		{[]string{"d MMM. yyyy"}, "14 mar. 2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"d MMM. yyyy"}, "14 mar 2026", false, ""},
		{[]string{"MMM d, yyyy"}, "Mar 14, 2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssXX"}, "2026-03-14T09:12:00-0300", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssXX"}, "2026-03-14T09:12:00+0530", false, "2026-03-14T09:12:00+05:30"},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssXX"}, "2026-03-14T09:12:00Z", false, "2026-03-14T09:12:00Z"},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssXX"}, "2026-03-14T09:12:00+0000", false, "2026-03-14T09:12:00Z"},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssXX"}, "2026-03-14T09:12:00-03:00", false, ""},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssXX"}, "2026-03-14T09:12:00-03", false, ""},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssX"}, "2026-03-14T09:12:00-03", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssX"}, "2026-03-14T09:12:00-0330", false, "2026-03-14T09:12:00-03:30"},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssX"}, "2026-03-14T09:12:00-03:30", false, ""},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssXXX"}, "2026-03-14T09:12:00-03:00", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssXXX"}, "2026-03-14T09:12:00z", false, "2026-03-14T09:12:00Z"},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssXXX"}, "2026-03-14T09:12:00-0300", false, ""},
		{[]string{"yyyy-MM-dd'T'HH:mm:ssXXX"}, "2026-03-14T09:12:00+24:00", false, ""},
		{[]string{"yyyy-MM-dd'T'HH:mm:ss.SSSXXX"}, "2026-03-14T09:12:00.999+01:00", false, "2026-03-14T09:12:00+01:00"},
		{[]string{"yyyy-MM-ddXXX"}, "2026-03-14-03:00", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"yyyy-MM-dd HH:mm:ss XXX"}, "2026-03-14 09:12:00 +00:00", false, "2026-03-14T09:12:00Z"},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 09:12 PM", false, "2026-03-14T21:12:00-03:00"},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 09:12 pm", false, "2026-03-14T21:12:00-03:00"},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 09:12 AM", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 12:05 AM", false, "2026-03-14T00:05:00-03:00"},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 12:05 PM", false, "2026-03-14T12:05:00-03:00"},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 09:12 p.m.", false, "2026-03-14T21:12:00-03:00"},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 09:12 P.M.", false, "2026-03-14T21:12:00-03:00"},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 09:12 a.m.", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 09:12 p.\u00a0m.", false, "2026-03-14T21:12:00-03:00"},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 13:12 PM", false, ""},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 00:12 AM", false, ""},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 09:12 XM", false, ""},
		{[]string{"MM/dd/yyyy hh:mm a"}, "03/14/2026 09:12", false, ""},
		{[]string{"dd/MM/yyyy h 'o''clock' a"}, "14/03/2026 9 o'clock PM", false, "2026-03-14T21:00:00-03:00"},
		{[]string{"dd/MM/''yy"}, "14/03/'26", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"dd/MM/yyyy HH:mm:ss.SSS"}, "14/03/2026 09:12:00.123456789123", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"dd/MM/yyyy HH:mm:ss.S"}, "14/03/2026 09:12:59.5", false, "2026-03-14T09:12:59-03:00"},
		{[]string{"dd/MM/yyyy HH:mm:ss.SSS"}, "14/03/2026 09:12:00.", false, ""},
		{[]string{"d/M/yyyy H:m:s"}, "4/3/2026 9:5:7", false, "2026-03-04T09:05:07-03:00"},
		{[]string{"d/M/yyyy H:m:s"}, "04/03/2026 09:05:07", false, "2026-03-04T09:05:07-03:00"},
		{[]string{"d/M/yyyy H:m:s"}, "004/03/2026 09:05:07", false, ""},
		{[]string{"dd/MM/yyyy"}, "4/03/2026", false, ""},
		{[]string{"yyyyMMdd"}, "20260314", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"yyyyMMdd"}, "20260314", true, "2026-03-14T00:00:00-03:00"},
		{[]string{"yyyyMMddHHmmss"}, "20260314091200", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"ddMMyy"}, "140326", false, "2026-03-14T00:00:00-03:00"},

		// White space: one or more, non-breaking too; the value is trimmed.
		{[]string{"dd/MM/yyyy HH:mm"}, "14/03/2026\u00a009:12", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"dd/MM/yyyy HH:mm"}, "14/03/2026 \u202f\t 09:12", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"dd/MM/yyyy HH:mm"}, "  14/03/2026 09:12\n", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"dd/MM/yyyy HH:mm"}, "14/03/202609:12", false, ""},
		{[]string{" dd/MM/yyyy "}, "14/03/2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"dd/MM/yyyy  HH:mm"}, "14/03/2026 09:12", false, "2026-03-14T09:12:00-03:00"},

		// The whole value, or nothing; the first layout that reads it.
		{[]string{"dd/MM/yyyy"}, "20/05/2017 AS 16:08", false, ""},
		{[]string{"dd/MM/yyyy HH:mm"}, "14/03/2026", false, ""},
		{[]string{"dd/MM/yyyy HH:mm", "dd/MM/yyyy"}, "14/03/2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"dd/MM/yyyy HH:mm", "dd/MM/yyyy"}, "14/03/2026 09:12", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"MM/dd/yyyy", "dd/MM/yyyy"}, "14/03/2026", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"MM/dd/yyyy", "dd/MM/yyyy"}, "03/04/2026", false, "2026-03-04T00:00:00-03:00"},
		{[]string{"dd/MM/yyyy"}, "", false, ""},
		{[]string{"dd/MM/yyyy"}, "   ", false, ""},

		// Values are checked.
		{[]string{"dd/MM/yyyy"}, "29/02/2024", false, "2024-02-29T00:00:00-03:00"},
		{[]string{"dd/MM/yyyy"}, "29/02/2000", false, "2000-02-29T00:00:00-03:00"},
		{[]string{"dd/MM/yyyy"}, "29/02/2026", false, ""},
		{[]string{"dd/MM/yyyy"}, "29/02/1900", false, ""},
		{[]string{"dd/MM/yyyy"}, "31/04/2026", false, ""},
		{[]string{"dd/MM/yyyy"}, "00/03/2026", false, ""},
		{[]string{"dd/MM/yyyy"}, "14/13/2026", false, ""},
		{[]string{"dd/MM/yyyy"}, "14/00/2026", false, ""},
		{[]string{"dd/MM/yyyy"}, "14/03/0000", false, ""},
		{[]string{"dd/MM/yyyy"}, "01/01/0001", false, "0001-01-01T00:00:00-03:53"},
		{[]string{"dd/MM/yyyyXXX"}, "31/12/9999+00:00", false, "9999-12-31T00:00:00Z"},
		{[]string{"dd/MM/yyyy HH:mm"}, "14/03/2026 24:00", false, ""},
		{[]string{"dd/MM/yyyy HH:mm"}, "14/03/2026 23:60", false, ""},
		{[]string{"dd/MM/yyyy HH:mm:ss"}, "14/03/2026 23:59:60", false, ""},
		{[]string{"dd/MM/yyyy HH:mm:ss"}, "14/03/2026 23:59:59", false, "2026-03-14T23:59:59-03:00"},

		// yy: within 80 years before and 20 after today (2026-03-14).
		{[]string{"dd/MM/yy"}, "14/03/26", false, "2026-03-14T00:00:00-03:00"},
		{[]string{"dd/MM/yy"}, "01/01/00", false, "2000-01-01T00:00:00-03:00"},
		{[]string{"dd/MM/yy"}, "01/01/45", false, "2045-01-01T00:00:00-03:00"},
		{[]string{"dd/MM/yy"}, "01/01/46", false, "2046-01-01T00:00:00-03:00"},
		{[]string{"dd/MM/yy"}, "01/06/46", false, "1946-06-01T00:00:00-04:00"},
		{[]string{"dd/MM/yy"}, "01/01/47", false, "1947-01-01T00:00:00-03:00"},
		{[]string{"dd/MM/yy"}, "31/12/99", false, "1999-12-31T00:00:00-03:00"},
		{[]string{"dd/MM/yy"}, "29/02/00", false, "2000-02-29T00:00:00-03:00"},
		{[]string{"dd/MM/yy"}, "14/03/2026", false, ""},

		// Epochs.
		{[]string{"epoch_s"}, "1773490320", true, "2026-03-14T09:12:00-03:00"},
		{[]string{"epoch_s"}, "1773490320.9", true, "2026-03-14T09:12:00-03:00"},
		{[]string{"epoch_s"}, "1.77349032e9", true, "2026-03-14T09:12:00-03:00"},
		{[]string{"epoch_s"}, "1773490320", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"epoch_s"}, " 1773490320 ", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"epoch_s"}, "-86400", false, "1969-12-30T21:00:00-03:00"},
		{[]string{"epoch_s"}, "0", true, "1969-12-31T21:00:00-03:00"},
		{[]string{"epoch_s"}, "1773490320000", true, ""},
		{[]string{"epoch_s"}, "1773490320abc", false, ""},
		{[]string{"epoch_s"}, "14/03/2026", false, ""},
		{[]string{"epoch_s"}, "1e300", true, ""},
		{[]string{"epoch_ms"}, "1773490320000", true, "2026-03-14T09:12:00-03:00"},
		{[]string{"epoch_ms"}, "1773490320999", false, "2026-03-14T09:12:00-03:00"},
		{[]string{"epoch_ms"}, "1773490320", true, "1970-01-21T09:38:10-03:00"},
		{[]string{"epoch_ms"}, "-86400000", false, "1969-12-30T21:00:00-03:00"},
		{[]string{"epoch_ms"}, "99999999999999999999", true, ""},
		{[]string{"epoch_s", "epoch_ms"}, "1773490320000", true, "2026-03-14T09:12:00-03:00"},
		{[]string{"dd/MM/yyyy", "epoch_s"}, "1773490320", true, "2026-03-14T09:12:00-03:00"},
		{[]string{"epoch_s", "dd/MM/yyyy"}, "14/03/2026", false, "2026-03-14T00:00:00-03:00"},
	}
	now, ba := testNow(t)
	for _, tt := range tests {
		t.Run(strings.Join(tt.layouts, "|")+"/"+tt.in, func(t *testing.T) {
			t.Parallel()
			l, err := CompileLayouts(tt.layouts)
			if err != nil {
				t.Fatalf("CompileLayouts(%q): %v", tt.layouts, err)
			}
			got, err := l.Date(tt.in, tt.number, ba, now)
			if tt.want == "" {
				if err == nil {
					t.Errorf("Date(%q) with %q = %q, want an error", tt.in, tt.layouts, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("Date(%q) with %q = %q, %v; want %q", tt.in, tt.layouts, got, err, tt.want)
			}
		})
	}
}

// TestTwoDigitYearWindow checks the ICU window at both its ends, for
// several todays.
func TestTwoDigitYearWindow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		now, in, want string
	}{
		{"2026-03-14T12:00:00Z", "14/03/46 11:59", "2046-03-14T11:59:00Z"}, // before the window's start: 100 years later
		{"2026-03-14T12:00:00Z", "14/03/46 12:00", "1946-03-14T12:00:00Z"}, // the window's start
		{"2026-03-14T12:00:00Z", "13/03/46 23:00", "2046-03-13T23:00:00Z"},
		{"2026-03-14T12:00:00Z", "15/03/46 00:00", "1946-03-15T00:00:00Z"},
		{"2000-01-01T00:00:00Z", "01/01/20", "1920-01-01T00:00:00Z"},
		{"2000-01-01T00:00:00Z", "31/12/19 23:59", "2019-12-31T23:59:00Z"},
		{"2000-01-01T00:00:00Z", "31/12/99 23:59", "1999-12-31T23:59:00Z"},
		{"2099-06-01T00:00:00Z", "01/01/00 00:00", "2100-01-01T00:00:00Z"},
		{"2099-06-01T00:00:00Z", "01/01/19 00:00", "2119-01-01T00:00:00Z"},
		{"2099-06-01T00:00:00Z", "01/07/19 00:00", "2019-07-01T00:00:00Z"},
	}
	lt := mustCompile(t, "dd/MM/yy HH:mm", "dd/MM/yy")
	for _, tt := range tests {
		t.Run(tt.now+"/"+tt.in, func(t *testing.T) {
			t.Parallel()
			now, err := time.Parse(time.RFC3339, tt.now)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := lt.Date(tt.in, false, time.UTC, now); err != nil || got != tt.want {
				t.Errorf("Date(%q) at %s = %q, %v; want %q", tt.in, tt.now, got, err, tt.want)
			}
		})
	}
}

func TestCompileLayoutsErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern string
		reason  string // a part of the reason; "" when the pattern compiles
	}{
		{"dd/MM/yyy", "yyy"},
		{"d/M/y", "a year is yyyy"},
		{"dd/MM/yyyyy", "yyyyy"},
		{"dd/MM/yyyy E", "pattern letter E (day of week) is not supported"},
		{"DD/MM/YYYY", "pattern letter D (day of year"},
		{"dd/MM/YYYY", "week-based year"},
		{"dd/MM/yyyy HH:mm z", "use X, XX or XXX"},
		{"dd/MM/yyyy HH:mm Z", "use XX for -0300"},
		{"dd/MM/yyyy kk:mm", "hour 1–24"},
		{"dd/MM/yyyy T HH:mm", "unknown pattern letter T (quote literal letters"},
		{"dd/MM/yyyy 'às HH:mm", "unterminated quote"},
		{"dd/MM/yyyy 'às'' HH:mm", "unterminated quote"},
		{"'", "unterminated quote"},
		{"", "no field"},
		{"'hello'", "no field"},
		{"--/--", "no field"},
		{"MM/yyyy", "no day"},
		{"dd/yyyy", "no month"},
		{"dd/MM", "no year"},
		{"HH:mm", "no year"},
		{"dd/MM/yyyy mm", "minutes without an hour"},
		{"dd/MM/yyyy HH:ss", "seconds without minutes"},
		{"dd/MM/yyyy HH:mm.SSS", "without seconds"},
		{"dd/MM/yyyy hh:mm", "without a (AM/PM)"},
		{"dd/MM/yyyy HH:mm a", "a (AM/PM) without h or hh"},
		{"dd/MM/yyyy dd", "two fields for the day"},
		{"dd/MM/yyyy HH:mm hh a", "two fields for the hour"},
		{"dd/MMM/yyyy MM", "two fields for the month"},
		{"dd/MM/yyyy yy", "two fields for the year"},
		{"dd/MM/yyyy HH:mm XX XXX", "two fields for the offset"},
		{"dMyyyy", "d is followed directly by digits (M)"},
		{"ddMyyyy", "M is followed directly by digits (yyyy)"},
		{"dd/MM/yyyy H'0'", `H is followed directly by digits ("0")`},
		{"dd/MM/yyyy HH:mm:ss.SSS'9'", "SSS is followed directly by digits"},
		{"yyyy-MM-dd'T'HH:mm:ssX'1'", "X is followed directly by digits"},
		{"yyyy-MM-dd'T'HH:mm:ssXX'1'", ""},
		{"dd/MM/yyyy HH:mm XXXX", "offsets with seconds"},
		{"dd MMMMM yyyy", "narrow month"},
		{"ddd/MM/yyyy", "ddd: use d or dd"},
		{"dd/MM/yyyy HHH:mm", "HHH: use H or HH"},
		{"dd/MM/yyyy hh:mm aaaa", "aaaa: use a"},
		{"epoch_s dd", "whole patterns"},
		{"EPOCH_S", "pattern letter E"},
		{"dd/MM/yyyy\xff", "UTF-8"},
		{"dd/MM/yyyy às HH:mm", "the field s touches a letter"},
		{"dd/MM/yyyy HH:mmhs", "two fields for the hour (the second is h)"},
		{"dd/MM/yyyy HH:mmñ", "the field mm touches a letter"},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			t.Parallel()
			_, err := CompileLayouts([]string{"dd/MM/yyyy", tt.pattern})
			if tt.reason == "" {
				if err != nil {
					t.Errorf("CompileLayouts(%q): %v", tt.pattern, err)
				}
				return
			}
			var le *LayoutError
			if !errors.As(err, &le) {
				t.Fatalf("CompileLayouts(%q) = %v, want a *LayoutError", tt.pattern, err)
			}
			if le.Index != 1 || le.Pattern != tt.pattern || !strings.Contains(le.Reason, tt.reason) {
				t.Errorf("CompileLayouts(%q) = %+v, want index 1 and a reason with %q", tt.pattern, le, tt.reason)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "layout[1] ") {
				t.Errorf("error %q does not name the pattern by index", msg)
			}
		})
	}
}

func TestCompileLayoutsEveryError(t *testing.T) {
	t.Parallel()
	_, err := CompileLayouts([]string{"yyy", "dd/MM/yyyy", "E"})
	if err == nil {
		t.Fatal("no error")
	}
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok || len(joined.Unwrap()) != 2 {
		t.Fatalf("error %v: want both bad patterns", err)
	}
	want := `layout[0] "yyy": yyy: a year is yyyy (four digits) or yy (two digits, read within 80 years before and 20 after today)` + "\n" +
		`layout[2] "E": pattern letter E (day of week) is not supported`
	if err.Error() != want {
		t.Errorf("error:\n%s\nwant:\n%s", err, want)
	}
}

func TestCompileLayoutsAccepted(t *testing.T) {
	t.Parallel()
	for _, p := range []string{
		"d M yy H m s", "dd MM yyyy HH mm ss", "d MMM yyyy", "d MMMM yyyy", "dd/MM/yyyy hh:mm a",
		"dd/MM/yyyy h:mm aa", "yyyy-MM-dd'T'HH:mm:ss.SSSSSSSSSXXX", "yyyy-MM-dd'T'HH:mm:ssX",
		"yyyy-MM-dd'T'HH:mm:ssXX", "dd.MM.yyyy", "yyyyMMddHHmmss", "'Fecha:' dd/MM/yyyy", "epoch_s", "epoch_ms",
		"dd/MM/yyyy 'às' HH:mm", "d/M/yy HH:mm 'HS'", "d 'de' MMMM 'de' yyyy", "dd 'de' MMM'.' yyyy",
	} {
		if _, err := CompileLayouts([]string{p}); err != nil {
			t.Errorf("CompileLayouts(%q): %v", p, err)
		}
	}
}

// TestLayoutsDateError checks what a value that no layout reads says: every
// pattern tried and where it stopped, never the value.
func TestLayoutsDateError(t *testing.T) {
	t.Parallel()
	now, ba := testNow(t)
	tests := []struct {
		layouts []string
		in      string
		want    string
	}{
		{[]string{"dd/MM/yyyy HH:mm", "dd/MM/yyyy"}, "20/05/2017 AS 16:08",
			`no layout reads the whole value: layout[0] "dd/MM/yyyy HH:mm" expects HH at character 12; layout[1] "dd/MM/yyyy" ends before character 11 (of 19)`},
		{[]string{"dd/MM/yyyy 'às' HH:mm"}, "20/05/2017 a 16:08",
			`no layout reads the whole value: layout[0] "dd/MM/yyyy 'às' HH:mm" expects "às" at character 12`},
		{[]string{"dd/MM/yyyy"}, "31/02/2026",
			`no layout reads the whole value: layout[0] "dd/MM/yyyy" reads a day that its month does not have`},
		{[]string{"dd/MM/yyyy HH:mm"}, "14/03/2026\u00a024:00",
			`no layout reads the whole value: layout[0] "dd/MM/yyyy HH:mm" reads an hour outside 0–23`},
		{[]string{"dd/MM/yyyy HH:mm"}, "14/03/2026 09:12 HS",
			`no layout reads the whole value: layout[0] "dd/MM/yyyy HH:mm" ends before character 17 (of 19)`},
		{[]string{"dd/MM/yyyy HH:mm"}, "14/03/202609:12",
			`no layout reads the whole value: layout[0] "dd/MM/yyyy HH:mm" expects white space at character 11`},
		{[]string{"epoch_ms", "d MMM yyyy"}, "14 foo 2026",
			`no layout reads the whole value: layout[0] "epoch_ms" reads no epoch of a year 1–9999; layout[1] "d MMM yyyy" expects MMM at character 4`},
		{[]string{"dd/MM/yyyy"}, "",
			`no layout reads the whole value: layout[0] "dd/MM/yyyy" has nothing to read`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			l, err := CompileLayouts(tt.layouts)
			if err != nil {
				t.Fatal(err)
			}
			_, err = l.Date(tt.in, false, ba, now)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Date(%q) error:\n%v\nwant:\n%s", tt.in, err, tt.want)
			}
		})
	}
}

func TestPatterns(t *testing.T) {
	t.Parallel()
	if got := (Layouts{}).Patterns(); got != nil {
		t.Errorf("zero Layouts: Patterns() = %q, want nil", got)
	}
	in := []string{"dd/MM/yyyy HH:mm", "epoch_s"}
	l, err := CompileLayouts(in)
	if err != nil {
		t.Fatal(err)
	}
	got := l.Patterns()
	if strings.Join(got, "|") != strings.Join(in, "|") {
		t.Errorf("Patterns() = %q, want %q", got, in)
	}
	got[0] = "changed"
	if l.Patterns()[0] != in[0] {
		t.Error("Patterns() shares its slice with the Layouts")
	}
	if l, err := CompileLayouts(nil); err != nil || l.Patterns() != nil {
		t.Errorf("CompileLayouts(nil) = %v, %v; want the zero Layouts", l, err)
	}
}

// TestMonthNames checks that no month name stands for two months, and that
// every month has names in the three languages.
func TestMonthNames(t *testing.T) {
	t.Parallel()
	seen := map[string]int{}
	perMonth := map[int]int{}
	for _, m := range monthNames {
		if other, ok := seen[m.name]; ok {
			t.Errorf("%q is month %d and %d", m.name, other, m.month)
		}
		seen[m.name] = m.month
		perMonth[m.month]++
		for _, r := range m.name {
			if fold(r) != r || r > 'z' {
				t.Errorf("%q is not folded ASCII", m.name)
			}
		}
	}
	for month := 1; month <= 12; month++ {
		if perMonth[month] < 3 {
			t.Errorf("month %d has %d names", month, perMonth[month])
		}
	}
}
