package aggregator

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/multas/aggregator/problem"
)

// plateShape is an independent statement of the accepted plate formats,
// used as the oracle of the tests and fuzz targets.
var plateShape = regexp.MustCompile(`^(?:[A-Z]{3}[0-9]{3}|[A-Z]{2}[0-9]{3}[A-Z]{2}|[0-9]{3}[A-Z]{3}|[A-Z][0-9]{3}[A-Z]{3})$`)

func TestParseDomain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want string // empty: must fail
	}{
		// The four formats.
		{"old car", "ABC123", "ABC123"},
		{"mercosur car", "AB123CD", "AB123CD"},
		{"old motorcycle", "123ABC", "123ABC"},
		{"mercosur motorcycle", "A123BCD", "A123BCD"},

		// Case.
		{"lower old car", "abc123", "ABC123"},
		{"lower mercosur", "ab123cd", "AB123CD"},
		{"mixed case", "aB123Cd", "AB123CD"},
		{"lower motorcycle", "123abc", "123ABC"},
		{"lower mercosur motorcycle", "a123bcd", "A123BCD"},

		// Separators.
		{"spaces", "ab 123 cd", "AB123CD"},
		{"dashes", "AB-123-CD", "AB123CD"},
		{"dots", "AB.123.CD", "AB123CD"},
		{"underscores", "AB_123_CD", "AB123CD"},
		{"mixed separators", "a-b 1.2_3 c d", "AB123CD"},
		{"leading and trailing", "  -ABC 123.  ", "ABC123"},
		{"repeated", "ABC---123", "ABC123"},
		{"separator between every char", "A-B-C-1-2-3", "ABC123"},
		{"motorcycle dashed", "A-123-BCD", "A123BCD"},
		{"exactly 32 bytes", strings.Repeat(" ", 26) + "ABC123", "ABC123"},
		{"33 bytes", strings.Repeat(" ", 27) + "ABC123", ""},

		// Empty.
		{"empty", "", ""},
		{"only separators", " -._ ", ""},

		// Wrong lengths.
		{"five chars", "AB123", ""},
		{"old car short", "ABC12", ""},
		{"old car long", "ABC1234", ""},
		{"mercosur short", "AB123C", ""},
		{"mercosur long", "AB123CDE", ""},
		{"motorcycle long", "AB1234CD", ""},
		{"eight chars", "ABCD1234", ""},
		{"all letters", "ABCDEFG", ""},
		{"all digits", "1234567", ""},
		{"huge", strings.Repeat("A", 1<<20), ""},

		// Letters and digits in the wrong places.
		{"digit in letters old", "AB1123", ""},
		{"letter in digits old", "ABC1D3", ""},
		{"swapped mercosur", "12ABC34", ""},
		{"mercosur digit at end", "AB123C4", ""},
		{"mercosur letter in digits", "AB1C3DE", ""},
		{"motorcycle letter in digits", "12A ABC", ""},
		{"mercosur motorcycle two letters first", "AB12BCD", ""},
		{"mercosur motorcycle digit first", "1123BCD", ""},
		{"reversed old car", "321CBA", "321CBA"}, // 999AAA is a motorcycle

		// Characters that are neither letters, digits nor separators.
		{"tab", "ABC\t123", ""},
		{"newline", "ABC123\n", ""},
		{"slash", "AB/123/CD", ""},
		{"plus", "ABC+123", ""},
		{"NUL", "ABC\x00123", ""},
		{"invalid UTF-8", "ABC\xff123", ""},

		// Unicode tricks.
		{"Ñ", "ÑBC123", ""},
		{"ñ", "ñbc123", ""},
		{"fullwidth letters", "ＡＢＣ123", ""},
		{"fullwidth digits", "ABC１２３", ""},
		{"arabic-indic digits", "ABC١٢٣", ""},
		{"combining acute", "A\u0301BC123", ""},
		{"accented letter", "ÁBC123", ""},
		{"kelvin sign", "\u212aBC123", ""},
		{"long s", "\u017fBC123", ""},
		{"dotless i", "\u0131BC123", ""},
		{"cyrillic A", "\u0410BC123", ""},
		{"no-break space", "ABC\u00a0123", ""},
		{"en dash", "AB\u2013123\u2013CD", ""},
		{"zero-width space", "ABC\u200b123", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := ParseDomain(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParseDomain succeeded with %q, want an error", got)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("error %v does not wrap ErrInvalid", err)
				}
				if got != "" {
					t.Errorf("got %q with an error, want empty", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// A CUIT's check digit: 20-12345678-6 (verified by hand: Σ = 148, 148 mod
// 11 = 5, 11 − 5 = 6).
func TestParseID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string
		want     string // empty: must fail
		wantKind IDKind
	}{
		// CUIT/CUIL with valid check digits.
		{"cuit dashed", "20-12345678-6", "20123456786", CUIT},
		{"cuit plain", "20123456786", "20123456786", CUIT},
		{"cuit spaces", "20 12345678 6", "20123456786", CUIT},
		{"cuit dots", "20.12345678.6", "20123456786", CUIT},
		{"cuit dotted dni part", "20-12.345.678-6", "20123456786", CUIT},
		{"cuit leading and trailing", " 20-12345678-6 ", "20123456786", CUIT},
		{"cuil 27", "27-12345678-0", "27123456780", CUIT},         // Σ mod 11 = 0: 11 → 0
		{"cuit 20 check 0", "20-12345670-0", "20123456700", CUIT}, // Σ mod 11 = 0: 11 → 0
		{"cuil 23", "23-12345678-5", "23123456785", CUIT},
		{"cuil 24", "24-00000001-5", "24000000015", CUIT},
		{"cuit 30", "30-12345678-1", "30123456781", CUIT},
		{"cuit 33", "33-50000000-2", "33500000002", CUIT},
		{"cuit 34", "34-00000001-0", "34000000010", CUIT},
		{"cuit 20-11111111", "20-11111111-2", "20111111112", CUIT},
		{"unknown prefix is not checked", "99-12345678-1", "99123456781", CUIT},
		{"exactly 32 bytes", strings.Repeat(" ", 19) + "20-12345678-6", "20123456786", CUIT},
		{"33 bytes", strings.Repeat(" ", 20) + "20-12345678-6", "", ""},

		// Wrong check digits.
		{"check off by one", "20-12345678-7", "", ""},
		{"check off by minus one", "20-12345678-5", "", ""},
		{"check 0 expected, 1 given", "27-12345678-1", "", ""},
		{"transposed digits", "20-21345678-6", "", ""},
		// Σ mod 11 = 1: the check would be 10, so no digit is valid.
		{"check would be 10, digit 0", "20-12345676-0", "", ""},
		{"check would be 10, digit 1", "20-12345676-1", "", ""},
		{"check would be 10, digit 9", "20-12345676-9", "", ""},
		{"check would be 10, other", "20-12345693-0", "", ""},

		// DNI.
		{"dni 8", "12345678", "12345678", DNI},
		{"dni 8 dotted", "12.345.678", "12345678", DNI},
		{"dni 7", "1234567", "1234567", DNI},
		{"dni 7 dotted", "1.234.567", "1234567", DNI},
		{"dni spaces", "12 345 678", "12345678", DNI},

		// Wrong lengths.
		{"empty", "", "", ""},
		{"only separators", " -. ", "", ""},
		{"6 digits", "123456", "", ""},
		{"9 digits", "123456789", "", ""},
		{"10 digits", "2012345678", "", ""},
		{"12 digits", "201234567861", "", ""},
		{"huge", strings.Repeat("1", 1<<20), "", ""},

		// Other characters.
		{"letter", "20-1234567X-6", "", ""},
		{"underscore", "20_12345678_6", "", ""},
		{"slash", "20/12345678/6", "", ""},
		{"plus sign", "+20123456786", "", ""},
		{"minus sign is a separator, not a sign", "-12345678", "12345678", DNI},
		{"tab", "12345678\t", "", ""},
		{"NUL", "1234\x005678", "", ""},
		{"invalid UTF-8", "1234\xff5678", "", ""},

		// Unicode tricks.
		{"fullwidth digits", "１２３４５６７８", "", ""},
		{"one fullwidth digit", "1234567８", "", ""},
		{"arabic-indic digits", "١٢٣٤٥٦٧٨", "", ""},
		{"superscript digit", "1234567\u00b9", "", ""},
		{"combining mark", "12345678\u0301", "", ""},
		{"en dash", "20\u201312345678\u20136", "", ""},
		{"no-break space", "12\u00a0345\u00a0678", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, kind, err := ParseID(tt.in)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("ParseID succeeded with %q (%s), want an error", got, kind)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("error %v does not wrap ErrInvalid", err)
				}
				if got != "" || kind != "" {
					t.Errorf("got %q (%q) with an error, want empty", got, kind)
				}
				return
			}
			if err != nil {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if kind != tt.wantKind {
				t.Errorf("kind %q, want %q", kind, tt.wantKind)
			}
		})
	}
}

// TestErrorsDoNotEchoInput: plates and ids are personal data, and parse
// errors end up in logs.
func TestErrorsDoNotEchoInput(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"AB123C", "ab-123-c", "XYZ12345", "ZZ999Z9", "QÑR123", "Q+R123"} {
		_, err := ParseDomain(in)
		if err == nil {
			t.Fatalf("ParseDomain(%q) succeeded, want an error", in)
		}
		msg := strings.ToUpper(err.Error())
		if strings.Contains(msg, strings.ToUpper(in)) || strings.Contains(msg, strings.ToUpper(strings.ReplaceAll(in, "-", ""))) {
			t.Errorf("ParseDomain error %q repeats its input %q", err, in)
		}
	}
	for _, in := range []string{"20-12345678-7", "20123456787", "123456789", "12.345.6789", "2012345678X"} {
		_, _, err := ParseID(in)
		if err == nil {
			t.Fatalf("ParseID(%q) succeeded, want an error", in)
		}
		if strings.Contains(err.Error(), in) || strings.Contains(err.Error(), "2345") {
			t.Errorf("ParseID error %q repeats its input %q", err, in)
		}
	}
}

func TestNewQuery(t *testing.T) {
	t.Parallel()
	plate := problem.InvalidParam{Name: "domain", Reason: "not a valid Argentine plate (accepted: AAA999, AA999AA, 999AAA, A999AAA)"}
	id := problem.InvalidParam{Name: "id", Reason: "not a valid CUIT/CUIL (11 digits, check digit) or DNI (7–8 digits)"}
	both := []problem.InvalidParam{
		{Name: "domain", Reason: "exactly one of domain or id is allowed"},
		{Name: "id", Reason: "exactly one of domain or id is allowed"},
	}
	neither := []problem.InvalidParam{
		{Name: "domain", Reason: "exactly one of domain or id is required"},
		{Name: "id", Reason: "exactly one of domain or id is required"},
	}
	tests := []struct {
		name             string
		domain, id       string
		hasDomain, hasID bool
		want             Query
		wantParams       []problem.InvalidParam
		wantOp           Operation
	}{
		{"domain", "ab 123 cd", "", true, false, Query{Domain: "AB123CD"}, nil, ByDomain},
		{"domain old", "abc-123", "", true, false, Query{Domain: "ABC123"}, nil, ByDomain},
		{"cuit", "", "20-12345678-6", false, true, Query{ID: "20123456786", IDKind: CUIT}, nil, ByID},
		{"dni", "", "12.345.678", false, true, Query{ID: "12345678", IDKind: DNI}, nil, ByID},
		{"invalid domain", "AB123C", "", true, false, Query{}, []problem.InvalidParam{plate}, ""},
		{"empty domain", "", "", true, false, Query{}, []problem.InvalidParam{plate}, ""},
		{"invalid id", "", "20-12345678-7", false, true, Query{}, []problem.InvalidParam{id}, ""},
		{"empty id", "", "", false, true, Query{}, []problem.InvalidParam{id}, ""},
		{"both valid", "AB123CD", "20123456786", true, true, Query{}, both, ""},
		{"both empty", "", "", true, true, Query{}, both, ""},
		{"both invalid", "x", "y", true, true, Query{}, both, ""},
		{"neither", "", "", false, false, Query{}, neither, ""},
		{"neither, values ignored", "AB123CD", "20123456786", false, false, Query{}, neither, ""},
		{"absent id value ignored", "AB123CD", "junk", true, false, Query{Domain: "AB123CD"}, nil, ByDomain},
		{"absent domain value ignored", "junk", "1234567", false, true, Query{ID: "1234567", IDKind: DNI}, nil, ByID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, params := NewQuery(tt.domain, tt.id, tt.hasDomain, tt.hasID)
			if got != tt.want {
				t.Errorf("query %+v, want %+v", got, tt.want)
			}
			if len(params) != len(tt.wantParams) {
				t.Fatalf("params %+v, want %+v", params, tt.wantParams)
			}
			for i := range params {
				if params[i] != tt.wantParams[i] {
					t.Errorf("params[%d] = %+v, want %+v", i, params[i], tt.wantParams[i])
				}
			}
			if tt.wantParams == nil && got.Operation() != tt.wantOp {
				t.Errorf("operation %q, want %q", got.Operation(), tt.wantOp)
			}
		})
	}
}

// referenceDomain is ParseDomain written differently (regular expressions
// and the strings package), for differential fuzzing.
var (
	domainAlphabet   = regexp.MustCompile(`^[A-Za-z0-9 ._-]*$`)
	domainSeparators = strings.NewReplacer(" ", "", ".", "", "_", "", "-", "")
)

func referenceDomain(s string) (string, bool) {
	if len(s) > 32 || !domainAlphabet.MatchString(s) {
		return "", false
	}
	p := strings.ToUpper(domainSeparators.Replace(s))
	return p, plateShape.MatchString(p)
}

func FuzzParseDomain(f *testing.F) {
	for _, s := range []string{
		"ABC123", "AB123CD", "123ABC", "A123BCD", "ab 123 cd", "AB-123-CD", "a.b_1-2 3cd",
		"", " ", "AB123C", "ABC1234", "ÑBC123", "ABC１２３", "A\u0301BC123", "\u212aBC123",
		"\u017fbc123", "ABC\xff123", strings.Repeat(" ", 26) + "abc123", strings.Repeat("-", 40),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseDomain(s)
		want, ok := referenceDomain(s)
		if (err == nil) != ok {
			t.Fatalf("ParseDomain(%q): error %v, reference ok %v", s, err, ok)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseDomain(%q): error %v does not wrap ErrInvalid", s, err)
			}
			if got != "" {
				t.Fatalf("ParseDomain(%q) = %q with an error", s, got)
			}
			return
		}
		if got != want {
			t.Fatalf("ParseDomain(%q) = %q, reference %q", s, got, want)
		}
		if !plateShape.MatchString(got) {
			t.Fatalf("ParseDomain(%q) = %q: not a documented shape", s, got)
		}
		for i := 0; i < len(got); i++ {
			if got[i] >= utf8.RuneSelf {
				t.Fatalf("ParseDomain(%q) = %q: not ASCII", s, got)
			}
		}
		again, err := ParseDomain(got)
		if err != nil || again != got {
			t.Fatalf("ParseDomain(%q) = %q, %v; want it to re-parse to itself", got, again, err)
		}
		lower, err := ParseDomain(strings.ToLower(got))
		if err != nil || lower != got {
			t.Fatalf("ParseDomain(lower %q) = %q, %v; want %q", got, lower, err, got)
		}
	})
}

// referenceID is ParseID written differently, for differential fuzzing:
// a CUIT is valid when Σ weight·digit over all eleven digits, with weight 1
// for the check digit, is a multiple of 11 (which also rules out the
// "check would be 10" case, as no digit is 10).
var (
	idAlphabet   = regexp.MustCompile(`^[0-9 .-]*$`)
	idSeparators = strings.NewReplacer(" ", "", ".", "", "-", "")
)

func referenceID(s string) (string, IDKind, bool) {
	if len(s) > 32 || !idAlphabet.MatchString(s) {
		return "", "", false
	}
	d := idSeparators.Replace(s)
	switch len(d) {
	case 7, 8:
		return d, DNI, true
	case 11:
		weights := []int{5, 4, 3, 2, 7, 6, 5, 4, 3, 2, 1}
		sum := 0
		for i, w := range weights {
			sum += w * int(d[i]-'0')
		}
		return d, CUIT, sum%11 == 0
	}
	return "", "", false
}

func FuzzParseID(f *testing.F) {
	for _, s := range []string{
		"20-12345678-6", "20123456786", "27-12345678-0", "20-12345670-0", "30-12345678-1",
		"33-50000000-2", "20-12345678-7", "20-12345676-0", "12.345.678", "1234567", "123456",
		"123456789", "", "-", "１２３４５６７８", "12345678\u0301", "20_12345678_6",
		strings.Repeat(" ", 19) + "20-12345678-6", strings.Repeat("1", 40),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, kind, err := ParseID(s)
		want, wantKind, ok := referenceID(s)
		if (err == nil) != ok {
			t.Fatalf("ParseID(%q): error %v, reference ok %v", s, err, ok)
		}
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseID(%q): error %v does not wrap ErrInvalid", s, err)
			}
			if got != "" || kind != "" {
				t.Fatalf("ParseID(%q) = %q, %q with an error", s, got, kind)
			}
			return
		}
		if got != want || kind != wantKind {
			t.Fatalf("ParseID(%q) = %q, %q; reference %q, %q", s, got, kind, want, wantKind)
		}
		for i := 0; i < len(got); i++ {
			if got[i] < '0' || got[i] > '9' {
				t.Fatalf("ParseID(%q) = %q: not ASCII digits only", s, got)
			}
		}
		switch {
		case kind == CUIT && len(got) == 11:
		case kind == DNI && (len(got) == 7 || len(got) == 8):
		default:
			t.Fatalf("ParseID(%q) = %q, %q: not a documented shape", s, got, kind)
		}
		again, againKind, err := ParseID(got)
		if err != nil || again != got || againKind != kind {
			t.Fatalf("ParseID(%q) = %q, %q, %v; want it to re-parse to itself", got, again, againKind, err)
		}
	})
}

func TestPersonIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		want []string
	}{
		{"20314159269", []string{"20314159269", "31415926"}},
		{"27314159263", []string{"27314159263", "31415926"}},
		{"20012345675", []string{"20012345675", "01234567", "1234567"}},
		{"30712345671", []string{"30712345671"}}, // a company: no DNI inside
		{"31415926", []string{"31415926", "20314159269", "23314159268", "24314159264", "27314159263"}},
		// No valid CUIT/CUIL is 27-01234567-x: three of them.
		{"1234567", []string{"1234567", "20012345675", "23012345674", "24012345670"}},
	}
	for _, tt := range tests {
		got := PersonIDs(tt.id)
		if !slices.Equal(got, tt.want) {
			t.Errorf("PersonIDs(%s): got %v, want %v", tt.id, got, tt.want)
		}
		for _, id := range got {
			if n, _, err := ParseID(id); err != nil || n != id {
				t.Errorf("PersonIDs(%s) lists %s, not a valid normalised id: %v", tt.id, id, err)
			}
		}
	}
}
