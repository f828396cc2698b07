package portalsim

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Jurisdiction is one simulated portal: who it is, which dialect it speaks,
// how it misbehaves at start, and its data.
type Jurisdiction struct {
	ID    string `json:"id"`   // source id, e.g. "caba"
	Name  string `json:"name"` // e.g. "Ciudad de Buenos Aires"
	Shape Shape  `json:"shape"`
	Fault Fault  `json:"fault"` // initial behaviour
	// Seed seeds the portal's random source (the 503s of Flaky); zero
	// derives a fixed seed from ID, so every run behaves the same.
	Seed    uint64   `json:"seed,omitempty"`
	Records []Record `json:"records"`

	// Paging, OAuth2 and Session tune the dialects that have something to
	// tune (ShapePaged, ShapeOAuth2, ShapeSession); other shapes ignore
	// them. Their zero values are the documented defaults.
	Paging  Paging  `json:"paging,omitzero"`
	OAuth2  OAuth2  `json:"oauth2,omitzero"`
	Session Session `json:"session,omitzero"`
}

// withDefaults is j with the defaults of Paging, OAuth2 and Session
// written out, and its own copies of Records and of the scopes.
func (j Jurisdiction) withDefaults() Jurisdiction {
	j.Records = append([]Record(nil), j.Records...)
	j.Paging = j.Paging.withDefaults()
	j.OAuth2 = j.OAuth2.withDefaults()
	j.Session = j.Session.withDefaults()
	return j
}

// Record is one infraction held by a portal. The portal translates it into
// its Shape: Date, Amount and Status are written in a neutral form here.
type Record struct {
	// Domain is the plate, in any case and with any separators.
	Domain string `json:"domain,omitempty"`
	// CUIT and DNI identify the offender; a lookup by id matches either.
	CUIT string `json:"cuit,omitempty"`
	DNI  string `json:"dni,omitempty"`
	// ID is the portal's infraction number, unique within the portal.
	ID string `json:"id"`
	// Date is the portal's civil time, "2006-01-02T15:04:05": Argentina's
	// (UTC-3) for the shapes of SPEC 6 and 8, that of the portal's
	// Shape.Locale for the shapes of SPEC 12, none of which writes an
	// offset.
	Date        string `json:"date"`
	Description string `json:"description,omitempty"`
	Place       string `json:"place,omitempty"`
	// Amount is a decimal string such as "185000.00"; it may carry more
	// than two decimals, to exercise rounding. It may be empty (no money:
	// a written warning) in the shapes of SPEC 12 (RealShapes), each of
	// which writes its absence its own way ("ISENTO", "-", no member).
	Amount string `json:"amount"`
	// Units is the fine in legal units, a decimal such as "100" or "2.5",
	// written by the shapes of SPEC 12 that state them, each in its own
	// unit (ShapeNested and ShapeArrays UF, ShapeErrorFlag UR,
	// ShapeEnvelope UMA); empty when the record has none.
	Units string `json:"units,omitempty"`
	// Currency is sent by the shapes that have one; empty leaves it out.
	Currency string `json:"currency,omitempty"`
	// Status is StatusUnpaid, StatusPaid or StatusInProcess, which each
	// shape words its own way, or any other text, sent as it is.
	Status string `json:"status"`
	// After, a Go duration, holds the record back until that long after
	// the portal started: an infraction that appears while the portal runs
	// (what a watch, SPEC 15, is there to notice). Empty: from the start.
	After string `json:"after,omitempty"`
}

// after is how long after the portal's start r appears (validated).
func (r Record) after() time.Duration {
	d, _ := time.ParseDuration(r.After)
	return d
}

// ErrInvalidJurisdiction is wrapped by every error of Jurisdiction.Validate.
var ErrInvalidJurisdiction = errors.New("invalid jurisdiction")

// Validate reports every problem of j: a missing id, an unknown shape, an
// invalid fault, impossible Paging, OAuth2 or Session settings, and records without an id, with a duplicate id, a date
// not in Record.Date's layout, an amount or units that are not a decimal
// (only RealShapes take an empty amount), or a CUIT whose check digit is
// wrong.
func (j Jurisdiction) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w %q: %s", ErrInvalidJurisdiction, j.ID, fmt.Sprintf(format, args...)))
	}
	if j.ID == "" {
		bad("id is empty")
	}
	if _, err := dialectOf(j.Shape); err != nil {
		bad("%v", err)
	}
	if err := j.Fault.Validate(); err != nil {
		bad("%v", err)
	}
	for _, err := range []error{j.Paging.validate(), j.OAuth2.validate(), j.Session.validate()} {
		if err != nil {
			bad("%v", err)
		}
	}
	seen := make(map[string]bool, len(j.Records))
	for i, r := range j.Records {
		switch {
		case r.ID == "":
			bad("record %d: id is empty", i)
		case seen[r.ID]:
			bad("record %d: duplicate id %q", i, r.ID)
		}
		seen[r.ID] = true
		if _, err := time.ParseInLocation(recordDateLayout, r.Date, argentina()); err != nil {
			bad("record %d: date %q is not %s", i, r.Date, recordDateLayout)
		}
		if !isDecimal(r.Amount) && (r.Amount != "" || !j.Shape.real()) {
			bad("record %d: amount %q is not a decimal", i, r.Amount)
		}
		if r.Units != "" && !isDecimal(r.Units) {
			bad("record %d: units %q is not a decimal", i, r.Units)
		}
		if r.CUIT != "" && !validCUIT(digits(r.CUIT)) {
			bad("record %d: CUIT has a wrong check digit or length", i)
		}
		if d, err := time.ParseDuration(r.After); r.After != "" && (err != nil || d < 0) {
			bad("record %d: after %q is not a Go duration of at least 0", i, r.After)
		}
	}
	return errors.Join(errs...)
}

// isDecimal reports whether s is digits with an optional fraction.
func isDecimal(s string) bool {
	whole, frac, hasFrac := strings.Cut(s, ".")
	return whole != "" && allDigits(whole) && (!hasFrac || frac != "" && allDigits(frac))
}

func allDigits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// digits keeps only the ASCII digits of s: "20-12345678-6" → "20123456786".
func digits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

// normalDomain writes a plate upper case without separators.
func normalDomain(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return -1
	}, s)
}

// validCUIT reports whether d, eleven digits, ends with the right check
// digit: weights 5,4,3,2,7,6,5,4,3,2 over the first ten digits, check =
// 11 - sum%11, where 11 means 0 and 10 has no valid check digit.
func validCUIT(d string) bool {
	if len(d) != 11 || !allDigits(d) {
		return false
	}
	weights := [10]int{5, 4, 3, 2, 7, 6, 5, 4, 3, 2}
	sum := 0
	for i, w := range weights {
		sum += int(d[i]-'0') * w
	}
	check := 11 - sum%11
	switch check {
	case 11:
		check = 0
	case 10:
		return false
	}
	return int(d[10]-'0') == check
}
