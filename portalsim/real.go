package portalsim

import (
	"slices"
	"strings"
)

// RealShapes lists the shapes of SPEC 12, in a stable order: real
// Argentine, Brazilian, Uruguayan and Mexican portals as third-party
// scrapers show them, each documented at its constant. Their mappings
// (AggregatorYAML) need SPEC 12's keys: decimal, null_values, unwrap, item
// lists with format and set, match, header and column, field objects with
// layout, join and units, errors rules, oauth2 client_auth.
//
// Each writes a Record its own way but loses nothing the aggregator
// reports: served the same records (RealRecords), every one of them maps
// to the same infractions (id, date, description, place, amount, status),
// with the time zone, currency and units of the shape's Locale.
// ShapeArrays states units only, no money.
func RealShapes() []Shape {
	return []Shape{ShapeDataJSON, ShapeNested, ShapeArrays, ShapeDetran, ShapeSOAPJSON,
		ShapeColumns, ShapeEnvelope, ShapeErrorFlag, ShapeOAuth2Body}
}

// real reports whether s is a shape of SPEC 12.
func (s Shape) real() bool { return slices.Contains(RealShapes(), s) }

// RealRecords are the actas every shape of SPEC 12 serves in the e2e
// tests, chosen for what real portals make hard: an amount of whole
// thousands that reads as 185.000 ("$ 185.000" is not 185), one with a
// lone separator and three digits ("$ 1.234"), cents, units with a
// fraction, a place in two parts ("…, Córdoba": ShapeDetran writes them
// in two cells), accents, and a written warning without money nor units
// nor place (each shape writes those absences its own way: "ISENTO",
// "----", "-", "S/D", no member). Four are DemoPlate's, one DemoPlateMoto's;
// all are DemoCUIT's (DemoDNI). Dates have no seconds: ShapeDataJSON
// writes none.
func RealRecords() []Record {
	person := func(r Record) Record { r.CUIT, r.DNI = DemoCUIT, DemoDNI; return r }
	return []Record{
		person(Record{Domain: DemoPlate, ID: "RP-2026-0142", Date: "2026-03-14T09:12:00",
			Description: "Exceso de velocidad", Place: "Av. Vélez Sarsfield 1200, Córdoba",
			Amount: "185000", Units: "100", Status: StatusUnpaid}),
		person(Record{Domain: DemoPlate, ID: "RP-2025-1187", Date: "2025-11-02T18:40:00",
			Description: "Estacionamiento en lugar prohibido", Place: "Bv. San Juan 450, Córdoba",
			Amount: "1234.56", Units: "2.5", Status: StatusPaid}),
		person(Record{Domain: DemoPlate, ID: "RP-2026-0033", Date: "2026-01-20T07:05:00",
			Description: "Cruce de semáforo en rojo", Place: "Av. Colón y Av. General Paz, Córdoba",
			Amount: "1234", Units: "10", Status: StatusInProcess}),
		person(Record{Domain: DemoPlate, ID: "RP-2025-0950", Date: "2025-08-09T23:30:00",
			Description: "Circular sin luces reglamentarias (apercibimiento)",
			Status:      StatusInProcess}),
		person(Record{Domain: DemoPlateMoto, ID: "RP-2026-0210", Date: "2026-02-27T22:05:00",
			Description: "Conducir motocicleta sin casco", Place: "Av. Corrientes 4800, Córdoba",
			Amount: "61800", Units: "50", Status: StatusUnpaid}),
	}
}

// Locale is where a portal of a SPEC 12 shape is and how it states a
// fine: what the aggregator's infractions from it carry besides a
// Record's own values. The zero Locale is that of the shapes of SPEC 6 and
// 8: Argentine time, pesos (the aggregator's defaults), no units.
type Locale struct {
	// TimeZone is the IANA zone of its zone-less times, and Currency its
	// money: the source's time_zone and currency in AggregatorYAML.
	TimeZone string `json:"time_zone,omitempty"`
	Currency string `json:"currency,omitempty"`
	// Units is the code of the legal units it states fines in (UF, UR,
	// UMA), empty when it states none; UnitsOnly says it never states an
	// amount of money.
	Units     string `json:"units,omitempty"`
	UnitsOnly bool   `json:"units_only,omitempty"`
}

// Locale is where a portal of shape s is; see Locale. An unknown shape
// has the zero Locale.
func (s Shape) Locale() Locale {
	d, err := dialectOf(s)
	if err != nil {
		return Locale{}
	}
	return d.locale
}

var (
	localeAR      = Locale{TimeZone: "America/Argentina/Buenos_Aires", Currency: "ARS"}
	localeCordoba = Locale{TimeZone: "America/Argentina/Cordoba", Currency: "ARS"}
	localeBR      = Locale{TimeZone: "America/Sao_Paulo", Currency: "BRL"}
	localeUY      = Locale{TimeZone: "America/Montevideo", Currency: "UYU"}
	localeMX      = Locale{TimeZone: "America/Mexico_City", Currency: "MXN"}
)

// withUnits is l stating fines in units of code as well.
func (l Locale) withUnits(code string) Locale { l.Units = code; return l }

// unitsOnly is l stating fines in its units and never in money.
func (l Locale) unitsOnly() Locale { l.UnitsOnly = true; return l }

// groupThousands writes the digits of whole in groups of three separated
// by sep: "1234567" → "1.234.567".
func groupThousands(whole string, sep byte) string {
	var g strings.Builder
	for i := 0; i < len(whole); i++ {
		if i > 0 && (len(whole)-i)%3 == 0 {
			g.WriteByte(sep)
		}
		g.WriteByte(whole[i])
	}
	return g.String()
}

// shortAmount writes an amount as Argentine web pages print numbers
// (toLocaleString("es-AR")): thousands grouped by '.', decimals after ','
// only when there are some, without trailing zeros. "185000" → "185.000",
// "1234.56" → "1.234,56", "92450.50" → "92.450,5".
func shortAmount(amount string) string {
	whole, frac, _ := strings.Cut(amount, ".")
	frac = strings.TrimRight(frac, "0")
	if frac == "" {
		return groupThousands(whole, '.')
	}
	return groupThousands(whole, '.') + "," + frac
}

// mexicanAmount writes an amount as Mexican portals do: thousands grouped
// by ',', two decimals after '.': "185000" → "185,000.00".
func mexicanAmount(amount string) string {
	whole, frac, _ := strings.Cut(amount, ".")
	for len(frac) < 2 {
		frac += "0"
	}
	return groupThousands(whole, ',') + "." + frac
}

// commaDecimal writes a decimal with ',' for '.', without grouping, as
// units are written where money has a decimal comma: "2.5" → "2,5".
func commaDecimal(d string) string { return strings.Replace(d, ".", ",", 1) }

// splitPlace cuts a place at its last ", ": the street and the city, as
// ShapeDetran writes them in two cells; a place without one is all street.
func splitPlace(place string) (street, city string) {
	if i := strings.LastIndex(place, ", "); i >= 0 {
		return place[:i], place[i+2:]
	}
	return place, ""
}

// or is s, or else absent (a portal's placeholder for a missing value).
func or(s, absent string) string {
	if s == "" {
		return absent
	}
	return s
}
