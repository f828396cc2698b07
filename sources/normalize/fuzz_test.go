package normalize

import (
	"errors"
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// amountFormat is what every normalised amount looks like.
var amountFormat = regexp.MustCompile(`^-?(0|[1-9][0-9]*)\.[0-9]{2}$`)

// plainDecimal is the subset of amounts that math/big can check.
var plainDecimal = regexp.MustCompile(`^-?[0-9]{1,25}(\.[0-9]{1,25})?$`)

// FuzzAmount checks Amount against a math/big reference on plain decimals,
// its output format on everything, that "," and "." swap with the decimal
// configured, and that reading without decimal is one of the two readings
// with it.
func FuzzAmount(f *testing.F) {
	for _, seed := range []string{
		"0.005", "-0.005", "2.675", "1e2", "1.234,565", "$ 1.234,56", "999.995", "-0", "1e-3", "1,234.5",
		"185.000", "R$ 1.234,56", "1 234,5", "1e999999999", "U$S 1.000,00", "1\u00a0234", "12,5", "1'234.56",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Amount(in, Unset)
		point, errPoint := Amount(in, Point)
		comma, errComma := Amount(swapSeparators(in), Comma)
		for _, out := range []struct {
			s   string
			err error
		}{{got, err}, {point, errPoint}, {comma, errComma}} {
			if out.err == nil && !amountFormat.MatchString(out.s) {
				t.Fatalf("Amount(%q) = %q", in, out.s)
			}
			if out.err != nil && out.s != "" {
				t.Fatalf("Amount(%q) = %q with error %v", in, out.s, out.err)
			}
		}
		if point != comma || (errPoint == nil) != (errComma == nil) {
			t.Fatalf("Amount(%q, Point) = %q, %v but with ',' and '.' swapped, Comma: %q, %v", in, point, errPoint, comma, errComma)
		}
		comma, errComma = Amount(in, Comma)
		switch {
		case err == nil && !(errPoint == nil && got == point) && !(errComma == nil && got == comma):
			t.Fatalf("Amount(%q, Unset) = %q; with Point %q, %v; with Comma %q, %v", in, got, point, errPoint, comma, errComma)
		case errors.Is(err, ErrAmbiguous) && errPoint != nil && errComma != nil:
			t.Fatalf("Amount(%q) is ambiguous but its separator does not separate decimals: %v, %v", in, errPoint, errComma)
		}
		if !plainDecimal.MatchString(in) {
			return
		}
		if want := referenceAmount(in); errPoint != nil || point != want {
			t.Fatalf("Amount(%q, Point) = %q, %v; want %q", in, point, errPoint, want)
		}
		if want := referenceAmount(in); !errors.Is(err, ErrAmbiguous) && (err != nil || got != want) {
			t.Fatalf("Amount(%q, Unset) = %q, %v; want %q", in, got, err, want)
		}
		if n, errN := Number(in); errN != nil || n != point {
			t.Fatalf("Number(%q) = %q, %v; want %q", in, n, errN, point)
		}
	})
}

// swapSeparators exchanges '.' and ','.
func swapSeparators(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '.':
			return ','
		case ',':
			return '.'
		}
		return r
	}, s)
}

// referenceAmount rounds a plain decimal half away from zero with math/big.
func referenceAmount(s string) string {
	r, _ := new(big.Rat).SetString(s)
	neg := r.Sign() < 0
	r.Abs(r)
	r.Mul(r, big.NewRat(100, 1))
	r.Add(r, big.NewRat(1, 2))
	cents := new(big.Int).Quo(r.Num(), r.Denom()) // floor(|x|·100 + 1/2)
	text := cents.String()
	for len(text) < 3 {
		text = "0" + text
	}
	if neg && cents.Sign() != 0 {
		text = "-" + text
	}
	return text[:len(text)-2] + "." + text[len(text)-2:]
}

// FuzzNumber checks Number's output format, and a math/big reference on
// JSON number literals.
func FuzzNumber(f *testing.F) {
	for _, seed := range []string{"1234.5", "1e3", "-0.005", "1.234", "1e999999999", "-1E-2", "0"} {
		f.Add(seed)
	}
	jsonNumber := regexp.MustCompile(`^-?(0|[1-9][0-9]{0,24})(\.[0-9]{1,25})?([eE][-+]?[0-9]{1,2})?$`)
	f.Fuzz(func(t *testing.T, in string) {
		got, err := Number(in)
		if err == nil && !amountFormat.MatchString(got) {
			t.Fatalf("Number(%q) = %q", in, got)
		}
		if !jsonNumber.MatchString(in) {
			return
		}
		r, ok := new(big.Rat).SetString(in)
		if !ok {
			t.Fatalf("big.Rat does not read %q", in)
		}
		if new(big.Int).Quo(new(big.Int).Abs(r.Num()), r.Denom()).BitLen() > 99 { // 30 digits
			return
		}
		want := referenceAmount(r.FloatString(80))
		if err != nil || got != want {
			t.Fatalf("Number(%q) = %q, %v; want %q", in, got, err, want)
		}
	})
}

// rfc3339Seconds reports whether s is RFC 3339 with an offset at seconds
// precision.
func rfc3339Seconds(s string) bool {
	_, err := time.Parse(time.RFC3339, s)
	return err == nil && len(s) <= len("2006-01-02T15:04:05-07:00") && !strings.Contains(s, ".")
}

// FuzzDate checks that every date the default forms accept comes out as
// RFC 3339 with an offset, at seconds precision.
func FuzzDate(f *testing.F) {
	for _, seed := range []string{"2026-03-14T09:12:00-03:00", "2026-03-14", "14/03/2026 09:12", "1773490320", "/Date(1773490320000-0300)/", "2026-03-14T09:12:00.5+05:30", "29/02/2024"} {
		f.Add(seed, false)
	}
	f.Add("1.77349032e12", true)
	now, ba := testNow(f)
	f.Fuzz(func(t *testing.T, in string, number bool) {
		got, err := Layouts{}.Date(in, number, ba, now)
		if err == nil && !rfc3339Seconds(got) {
			t.Fatalf("Date(%q, %v) = %q, not RFC 3339 at seconds precision", in, number, got)
		}
	})
}

// FuzzLayouts compiles random patterns and applies them to random values:
// never a panic, every date RFC 3339 at seconds precision, every compile
// error a *LayoutError, and work bounded by the sizes of the two.
func FuzzLayouts(f *testing.F) {
	for _, seed := range [][2]string{
		{"dd/MM/yyyy 'AS' HH:mm", "20/05/2017 AS 16:08"},
		{"dd/MM/yyyy 'às' HH:mm:ss", "10/06/2016 às 12:36:11"},
		{"d/M/yy HH:mm 'HS'", "5/3/24 14:05 HS"},
		{"d 'de' MMMM 'de' yyyy", "14 de marzo de 2026"},
		{"dd-MMM-yyyy", "14-MAR-2026"},
		{"d MMM yyyy", "14 mar. 2026"},
		{"yyyy-MM-dd'T'HH:mm:ssXX", "2026-03-14T09:12:00-0300"},
		{"yyyy-MM-dd'T'HH:mm:ss.SSSXXX", "2026-03-14T09:12:00.123-03:00"},
		{"MM/dd/yyyy hh:mm a", "03/14/2026 09:12 PM"},
		{"epoch_s", "1773490320"},
		{"epoch_ms", "1773490320000"},
		{"yyyyMMdd", "20260314"},
		{"dd/MM/''yy h 'o''clock' a", "14/03/'26 9 o'clock p. m."},
		{"'", ""},
		{"yyy", "2026"},
	} {
		f.Add(seed[0], seed[1], false)
	}
	now, ba := testNow(f)
	f.Fuzz(func(t *testing.T, pattern, in string, number bool) {
		l, err := CompileLayouts([]string{pattern, "dd/MM/yyyy"})
		if err != nil {
			var le *LayoutError
			if !errors.As(err, &le) || le.Index != 0 || le.Pattern != pattern || le.Reason == "" {
				t.Fatalf("CompileLayouts(%q) = %v, not a *LayoutError for it", pattern, err)
			}
			return
		}
		if p := &l.patterns[0]; p.epoch == 0 && len(p.toks) > len(pattern) {
			t.Fatalf("%q compiles to %d tokens", pattern, len(p.toks))
		}
		got, err := l.Date(in, number, ba, now)
		if err == nil && !rfc3339Seconds(got) {
			t.Fatalf("Date(%q) with %q = %q, not RFC 3339 at seconds precision", in, pattern, got)
		}
		if err != nil && len(err.Error()) > 500+2*len(pattern) {
			t.Fatalf("Date(%q) with %q: an error of %d bytes", in, pattern, len(err.Error()))
		}
	})
}

// FuzzText checks the invariants of the text functions.
func FuzzText(f *testing.F) {
	for _, seed := range []string{"", "Exceso de velocidad", "  a\n\tb  ", "\u202eevil\u202c", "C\xf3rdoba", "CÃ³rdoba", strings.Repeat("ñ ", 300)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if got := Text(in); utf8.RuneCountInString(got) > MaxText || (got != in && !strings.HasSuffix(got, "…")) || !strings.HasPrefix(in, strings.TrimSuffix(got, "…")) {
			t.Fatalf("Text(%q) = %q", in, got)
		}
		d := Detail(in)
		if !utf8.ValidString(d) || utf8.RuneCountInString(d) > 200 || d != strings.TrimSpace(d) || strings.Contains(d, "  ") {
			t.Fatalf("Detail(%q) = %q", in, d)
		}
		for _, r := range d {
			if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) || (unicode.IsSpace(r) && r != ' ') {
				t.Fatalf("Detail(%q) = %q keeps %U", in, d, r)
			}
		}
		if !strings.HasSuffix(d, "…") && Detail(d) != d {
			t.Fatalf("Detail(%q) = %q, but Detail of that is %q", in, d, Detail(d))
		}
		if p := Plate(in); Plate(p) != p {
			t.Fatalf("Plate(%q) = %q is not stable", in, p)
		}
		if d := Digits(in); !allDigits(d) && d != "" {
			t.Fatalf("Digits(%q) = %q", in, d)
		}
		_ = Suspect(in)
		_ = IsCurrency(in)
	})
}

// TestHostileInput checks that large and hostile values stay cheap: each
// call is linear in its input, with no backtracking.
func TestHostileInput(t *testing.T) {
	t.Parallel()
	now, ba := testNow(t)
	patterns := make([]string, 50)
	for i := range patterns {
		patterns[i] = "d 'de' MMMM 'de' yyyy h:m:s.SSS a '" + strconv.Itoa(i) + "'"
	}
	l, err := CompileLayouts(patterns)
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("1", 1<<20)
	values := []string{
		huge,
		"14 de " + strings.Repeat("marzo", 1<<18),
		"14 de marzo de 2026" + strings.Repeat(" ", 1<<20) + "x",
		"1e" + huge,
		"1." + huge,
		strings.Repeat("1.", 1<<19),
		strings.Repeat("$", 1<<20) + "1",
	}
	start := time.Now()
	for _, v := range values {
		_, _ = l.Date(v, false, ba, now)
		_, _ = Layouts{}.Date(v, false, ba, now)
		_, _ = Layouts{}.Date(v, true, ba, now)
		_, _ = Amount(v, Unset)
		_, _ = Amount(v, Comma)
		_, _ = Number(v)
		_ = Detail(v)
		_ = Text(v)
		_ = Suspect(v)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("hostile values took %v", d)
	}
}
