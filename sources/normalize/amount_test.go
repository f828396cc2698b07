package normalize

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDecimal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want Decimal
		err  bool
	}{
		{"", Unset, false},
		{".", Point, false},
		{",", Comma, false},
		{" ", Unset, true},
		{"..", Unset, true},
		{"comma", Unset, true},
		{"'", Unset, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseDecimal(tt.in)
			if got != tt.want || (err != nil) != tt.err {
				t.Errorf("ParseDecimal(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.err)
			}
		})
	}
}

// amountCase is one Amount example: want is the normalised amount, or ""
// when err (nil meaning any error) is expected.
type amountCase struct {
	in   string
	dec  Decimal
	want string
	err  error
}

// errAny stands for any error in the tables.
var errAny = errors.New("any error")

func TestAmount(t *testing.T) {
	t.Parallel()
	tests := []amountCase{
		// Today's forms, without decimal.
		{"185000.5", Unset, "185000.50", nil},
		{"185000", Unset, "185000.00", nil},
		{"1.5e3", Unset, "1500.00", nil},
		{"1e2", Unset, "100.00", nil},
		{"1E+2", Unset, "100.00", nil},
		{"1.5E-1", Unset, "0.15", nil},
		{"5e-3", Unset, "0.01", nil},
		{"4e-3", Unset, "0.00", nil},
		{"1e-999999999", Unset, "0.00", nil},
		{"1.234e3", Unset, "1234.00", nil},
		{"$ 1.234,56", Unset, "1234.56", nil},
		{"1.234,56", Unset, "1234.56", nil},
		{"1.234,565", Unset, "1234.57", nil},
		{"1,234.565", Unset, "1234.57", nil},
		{"1,234.56", Unset, "1234.56", nil},
		{"12.345.678,9", Unset, "12345678.90", nil},
		{"1.234.567", Unset, "1234567.00", nil},
		{"1,234,567", Unset, "1234567.00", nil},
		{"1 234,56", Unset, "1234.56", nil},
		{"1\u00a0234,56", Unset, "1234.56", nil},
		{"1\u202f234,56", Unset, "1234.56", nil},
		{"1'234.56", Unset, "1234.56", nil},
		{"1’234.56", Unset, "1234.56", nil},
		{"1 234", Unset, "1234.00", nil},
		{"1'234'567", Unset, "1234567.00", nil},
		{"1,5", Unset, "1.50", nil},
		{"12.50", Unset, "12.50", nil},
		{"1234.5678", Unset, "1234.57", nil},
		{"12,5000", Unset, "12.50", nil},
		{"0.005", Unset, "0.01", nil}, // no thousands group is zero: not ambiguous
		{"-0.005", Unset, "-0.01", nil},
		{"0.004", Unset, "0.00", nil},
		{"-0.004", Unset, "0.00", nil},
		{"0.500", Unset, "0.50", nil},
		{".500", Unset, "0.50", nil},
		{"0.000", Unset, "0.00", nil},
		{"0.125", Unset, "0.13", nil},
		{"2.6750", Unset, "2.68", nil},
		{"0.124999999999999999999", Unset, "0.12", nil},
		{"2.675", Point, "2.68", nil},
		{"-2.675", Point, "-2.68", nil},
		{"1.005", Point, "1.01", nil},
		{"9.995", Point, "10.00", nil},
		{"999.995", Point, "1000.00", nil},
		{"-999.995", Point, "-1000.00", nil},
		{"999,995", Comma, "1000.00", nil},
		{"0", Unset, "0.00", nil},
		{"-0", Unset, "0.00", nil},
		{"0.0", Unset, "0.00", nil},
		{"+7", Unset, "7.00", nil},
		{".5", Unset, "0.50", nil},
		{"5.", Unset, "5.00", nil},
		{"00012.5", Unset, "12.50", nil},
		{"  12  ", Unset, "12.00", nil},
		{"-1.234,56", Unset, "-1234.56", nil},
		{"-$ 1.234,56", Unset, "-1234.56", nil},
		{"$ -1.234,56", Unset, "-1234.56", nil},
		{"\u2212 5", Unset, "-5.00", nil},
		{"ARS 100", Unset, "100.00", nil},
		{"100 ARS", Unset, "100.00", nil},
		{"U$S 1.000,00", Unset, "1000.00", nil},
		{"R$ 1.234,56", Unset, "1234.56", nil},
		{"R$ 195,23", Unset, "195.23", nil},
		{"USD 1,234.50", Unset, "1234.50", nil},
		{"1.234,56 €", Unset, "1234.56", nil},
		{"$\u00a01.500,00", Unset, "1500.00", nil},
		{"123456789012345678901234567890", Unset, "123456789012345678901234567890.00", nil},
		{"1e29", Unset, "100000000000000000000000000000.00", nil},

		// Ambiguous without decimal.
		{"185.000", Unset, "", ErrAmbiguous},
		{"1,234", Unset, "", ErrAmbiguous},
		{"$ 185.000", Unset, "", ErrAmbiguous},
		{"-1.234", Unset, "", ErrAmbiguous},
		{"1.234", Unset, "", ErrAmbiguous},
		{"€1.000", Unset, "", ErrAmbiguous},
		{"1 234.567", Unset, "", ErrAmbiguous},
		{"1234.567", Unset, "", ErrAmbiguous},
		{"2.675", Unset, "", ErrAmbiguous},
		{"1.000", Unset, "", ErrAmbiguous},
		{"999.995", Unset, "", ErrAmbiguous},
		{"185.000 ARS", Unset, "", ErrAmbiguous},
		{"1 23.456", Unset, "", errGroups}, // wrong whatever the separator

		// With decimal ",".
		{"R$ 1.234,56", Comma, "1234.56", nil},
		{"185.000", Comma, "185000.00", nil},
		{"$ 185.000", Comma, "185000.00", nil},
		{"1.234.567", Comma, "1234567.00", nil},
		{"12,5", Comma, "12.50", nil},
		{"1 234,5", Comma, "1234.50", nil},
		{"1.234,565", Comma, "1234.57", nil},
		{",5", Comma, "0.50", nil},
		{"5,", Comma, "5.00", nil},
		{"1,234", Comma, "1.23", nil},
		{"1,5e3", Comma, "1500.00", nil},
		{"-1.234,56", Comma, "-1234.56", nil},
		{"1.5", Comma, "", errGroups},
		{"1.2345", Comma, "", errGroups},
		{"1234.567", Comma, "", errGroups},
		{"1,234.56", Comma, "", errFractionGroups},
		{"1,2,3", Comma, "", errTwoDecimals},
		{"1.5e3", Comma, "", errExponentGroups},

		// With decimal ".".
		{"185.000", Point, "185.00", nil},
		{"1,234.56", Point, "1234.56", nil},
		{"1,234", Point, "1234.00", nil},
		{"1,234,567.891", Point, "1234567.89", nil},
		{"1.5e3", Point, "1500.00", nil},
		{"1 234.5", Point, "1234.50", nil},
		{"1,5", Point, "", errGroups},
		{"1.234,56", Point, "", errFractionGroups},
		{"1.2.3", Point, "", errTwoDecimals},
		{"1,5e3", Point, "", errExponentGroups},

		// Never amounts.
		{"", Unset, "", errNoDigits},
		{"   ", Unset, "", errNoDigits},
		{"$", Unset, "", errNoDigits},
		{"-", Unset, "", errNoDigits},
		{"abc", Unset, "", errNoDigits},
		{".", Unset, "", errNoDigits},
		{",", Comma, "", errNoDigits},
		{"1.2.3,4", Unset, "", errGroups},
		{"1,2,3.4,5", Unset, "", errTwoDecimals},
		{"1.2345,6", Unset, "", errGroups},
		{"12,34,56", Unset, "", errGroups},
		{"1.234.", Unset, "", errGroups},
		{"1 2", Unset, "", errGroups},
		{"1  234", Unset, "", errGroups},
		{"1-2", Unset, "", errChar},
		{"--5", Unset, "", errChar},
		{"5-", Unset, "", errChar},
		{"1e", Unset, "", errLoneE},
		{"e5", Unset, "", errLoneE},
		{"1 E", Unset, "", errLoneE},
		{"1e+", Unset, "", errExponent},
		{"1.5e3.2", Unset, "", errExponent},
		{"1,5e3", Unset, "", errExponentGroups},
		{"1 000e3", Unset, "", errExponentGroups},
		{"1e999999999", Unset, "", errTooLarge},
		{"1e30", Unset, "", errTooLarge},
		{"1234567890123456789012345678901", Unset, "", errTooLarge},
		{"0." + strings.Repeat("1", 65), Unset, "", errTooLong},
		{"NaN", Unset, "", errNoDigits},
		{"Infinity", Unset, "", errNoDigits},
		{"0x10", Unset, "", errChar},
		{"1/2", Unset, "", errChar},
		{"(100)", Unset, "", errChar},
	}
	for _, tt := range tests {
		t.Run(tt.in+"/"+decimalName(tt.dec), func(t *testing.T) {
			t.Parallel()
			got, err := Amount(tt.in, tt.dec)
			checkAmount(t, "Amount", tt, got, err)
		})
	}
}

// checkAmount compares an Amount or Number result with a case.
func checkAmount(t *testing.T, fn string, tt amountCase, got string, err error) {
	t.Helper()
	switch {
	case tt.err == nil && (err != nil || got != tt.want):
		t.Errorf("%s(%q, %s) = %q, %v; want %q", fn, tt.in, decimalName(tt.dec), got, err, tt.want)
	case tt.err != nil && err == nil:
		t.Errorf("%s(%q, %s) = %q; want error %v", fn, tt.in, decimalName(tt.dec), got, tt.err)
	case tt.err != nil && tt.err != errAny && !errors.Is(err, tt.err):
		t.Errorf("%s(%q, %s): error %v; want %v", fn, tt.in, decimalName(tt.dec), err, tt.err)
	case err != nil && strings.Contains(err.Error(), tt.in) && strings.TrimSpace(tt.in) != "":
		t.Errorf("%s(%q, %s): error %q quotes the value", fn, tt.in, decimalName(tt.dec), err)
	}
}

func decimalName(d Decimal) string {
	if d == Unset {
		return "unset"
	}
	return string(rune(d))
}

func TestAmbiguousMessage(t *testing.T) {
	t.Parallel()
	if msg := ErrAmbiguous.Error(); !strings.Contains(msg, "decimal") {
		t.Errorf("ErrAmbiguous = %q, does not tell to set decimal", msg)
	}
}

func TestNumber(t *testing.T) {
	t.Parallel()
	tests := []amountCase{
		{in: "1234.5", want: "1234.50"},
		{in: "1e3", want: "1000.00"},
		{in: "-0.005", want: "-0.01"},
		{in: "0.005", want: "0.01"},
		{in: "2.675", want: "2.68"},
		{in: "1.234", want: "1.23"},
		{in: "185.000", want: "185.00"},
		{in: "185000", want: "185000.00"},
		{in: "-0", want: "0.00"},
		{in: "0", want: "0.00"},
		{in: "1.5E-1", want: "0.15"},
		{in: "1e-999999999", want: "0.00"},
		{in: "152.11", want: "152.11"},
		{in: "-1e2", want: "-100.00"},
		{in: "1e29", want: "100000000000000000000000000000.00"},

		{in: "", err: errNoDigits},
		{in: "-", err: errNoDigits},
		{in: "1,5", err: errChar},
		{in: "1 000", err: errChar},
		{in: "$5", err: errChar},
		{in: "1e", err: errExponent},
		{in: "1e999999999", err: errTooLarge},
		{in: "1e30", err: errTooLarge},
		{in: "--1", err: errChar},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := Number(tt.in)
			checkAmount(t, "Number", tt, got, err)
		})
	}
}
