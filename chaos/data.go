package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/multas/aggregator/portalsim"
)

// people is the personal data of a run: random valid plates and CUITs,
// fictitious but in the real formats, and the records each portal holds
// for them. They are what must never leak (see pii.go).
type people struct {
	plates []string // normalised
	cuits  []string // eleven digits
	// vouchers lists every infraction held by some portal.
	vouchers []voucherRef
}

type voucherRef struct{ source, id string }

// The size of the pool the workers draw from.
const (
	platePool = 120
	cuitPool  = 60
)

func newPeople(rng *rand.Rand) *people {
	p := &people{}
	seen := map[string]bool{}
	for len(p.plates) < platePool {
		if pl := randomPlate(rng); !seen[pl] {
			seen[pl] = true
			p.plates = append(p.plates, pl)
		}
	}
	for len(p.cuits) < cuitPool {
		if c := randomCUIT(rng); !seen[c] {
			seen[c] = true
			p.cuits = append(p.cuits, c)
		}
	}
	return p
}

// randomPlate is a plate in one of the four Argentine formats.
func randomPlate(rng *rand.Rand) string {
	letter := func() byte { return byte('A' + rng.IntN(26)) }
	digit := func() byte { return byte('0' + rng.IntN(10)) }
	var shape string
	switch rng.IntN(4) {
	case 0:
		shape = "AAA999"
	case 1:
		shape = "AA999AA"
	case 2:
		shape = "999AAA"
	default:
		shape = "A999AAA"
	}
	b := make([]byte, len(shape))
	for i := range shape {
		if shape[i] == 'A' {
			b[i] = letter()
		} else {
			b[i] = digit()
		}
	}
	return string(b)
}

// randomCUIT is eleven digits with a valid check digit.
func randomCUIT(rng *rand.Rand) string {
	prefixes := []string{"20", "23", "27", "30"}
	weights := [10]int{5, 4, 3, 2, 7, 6, 5, 4, 3, 2}
	for {
		d := prefixes[rng.IntN(len(prefixes))] + fmt.Sprintf("%08d", rng.IntN(100_000_000))
		sum := 0
		for i, w := range weights {
			sum += int(d[i]-'0') * w
		}
		check := 11 - sum%11
		switch check {
		case 11:
			check = 0
		case 10:
			continue // no valid check digit for this number
		}
		return d + string(byte('0'+check))
	}
}

// dashedCUIT writes a CUIT the usual way: 20-12345678-6.
func dashedCUIT(c string) string { return c[:2] + "-" + c[2:10] + "-" + c[10:] }

// plateForms are the ways a client may write a plate: the aggregator reads
// every one of them as the same plate.
func plateForms(p string) []string {
	lower := strings.ToLower(p)
	split := len(p) / 2
	return []string{p, lower, lower[:split] + " " + lower[split:], p[:split] + "-" + p[split:]}
}

var (
	descriptions = []string{"Exceso de velocidad", "Estacionamiento en lugar prohibido",
		"Cruce de semáforo en rojo", "Uso de teléfono celular al conducir", "Falta de VTV"}
	places = []string{"Av. Lugones km 4", "Ruta 2 km 41", "Bv. San Juan 1200", "Acceso Este km 8", "Av. Pellegrini 900"}
	shapes = []portalsim.Shape{portalsim.ShapeActas, portalsim.ShapeInfracciones, portalsim.ShapeMultas}
)

// jurisdictions builds n portals, shapes in turn, each holding records for
// about a quarter of the vehicles (each owned by one of the CUITs).
func (p *people) jurisdictions(rng *rand.Rand, n int) []portalsim.Jurisdiction {
	owner := make([]string, len(p.plates))
	for i := range owner {
		owner[i] = p.cuits[rng.IntN(len(p.cuits))]
	}
	js := make([]portalsim.Jurisdiction, n)
	for i := range js {
		id := fmt.Sprintf("p%02d", i+1)
		j := portalsim.Jurisdiction{
			ID: id, Name: fmt.Sprintf("Jurisdicción simulada %02d", i+1),
			Shape: shapes[i%len(shapes)], Seed: rng.Uint64() | 1,
		}
		for k, plate := range p.plates {
			if rng.IntN(4) != 0 {
				continue
			}
			for range 1 + rng.IntN(2) {
				rec := portalsim.Record{
					Domain: plate, CUIT: owner[k],
					ID:          fmt.Sprintf("%s-%05d", strings.ToUpper(id), len(j.Records)+1),
					Date:        fmt.Sprintf("2025-%02d-%02dT%02d:%02d:00", 1+rng.IntN(12), 1+rng.IntN(28), rng.IntN(24), rng.IntN(60)),
					Description: descriptions[rng.IntN(len(descriptions))],
					Place:       places[rng.IntN(len(places))],
					Amount:      fmt.Sprintf("%d.%03d", 1000+rng.IntN(300_000), rng.IntN(1000)),
					Currency:    "ARS",
					Status:      []string{portalsim.StatusUnpaid, portalsim.StatusPaid, portalsim.StatusInProcess}[rng.IntN(3)],
				}
				j.Records = append(j.Records, rec)
				p.vouchers = append(p.vouchers, voucherRef{source: id, id: rec.ID})
			}
		}
		js[i] = j
	}
	return js
}
