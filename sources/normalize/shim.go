package normalize

// TEMPORARY: the lead's stand-in for the normalize package being written
// on branch normalize; removed when that branch is merged.

import (
	"errors"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

type Decimal byte

const (
	Unset Decimal = 0
	Point Decimal = '.'
	Comma Decimal = ','
)

func ParseDecimal(s string) (Decimal, error) {
	switch s {
	case "":
		return Unset, nil
	case ".":
		return Point, nil
	case ",":
		return Comma, nil
	}
	return Unset, errors.New(`want "." or ","`)
}

var ErrAmbiguous = errors.New("ambiguous: set decimal")

func Amount(text string, dec Decimal) (string, error) {
	s, ok := formatAmount(text)
	if !ok {
		return "", errors.New("not an amount")
	}
	return s, nil
}

func Number(literal string) (string, error) { return Amount(literal, Unset) }

type Layouts struct{ patterns []string }

func CompileLayouts(patterns []string) (Layouts, error) { return Layouts{patterns: patterns}, nil }

func (l Layouts) Patterns() []string { return l.patterns }

func (l Layouts) Date(text string, number bool, loc *time.Location, now time.Time) (string, error) {
	var s string
	var ok bool
	if number {
		s, ok = formatEpoch(text, loc)
	} else {
		s, ok = formatDate(text, loc)
	}
	if !ok {
		return "", errors.New("not a date")
	}
	return s, nil
}

const MaxText = 1000
const MaxID = 200

func Text(s string) string {
	if utf8.RuneCountInString(s) <= MaxText {
		return s
	}
	r := []rune(s)
	return string(r[:MaxText-1]) + "…"
}

func Suspect(s string) bool {
	return strings.ContainsRune(s, '\uFFFD') || strings.Contains(s, "Ã") || strings.Contains(s, "ï¿½")
}

func IsCurrency(code string) bool {
	switch strings.ToUpper(code) {
	case "ARS", "USD", "BRL", "UYU", "MXN", "EUR", "CLP":
		return true
	}
	return false
}

func Detail(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, strings.ToValidUTF8(s, ""))
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) > 200 {
		r := []rune(s)
		s = string(r[:199]) + "…"
	}
	return s
}

func Plate(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToUpper(r)
		}
		return -1
	}, s)
}

func Digits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}
