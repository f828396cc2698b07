package portalsim

import (
	"slices"
	"time"
)

// The people and vehicles of the demo data. They are fictitious; the plates
// follow the Argentine formats and the CUITs carry valid check digits.
const (
	// DemoPlate (Mercosur car) has records in every demo jurisdiction.
	DemoPlate = "AB123CD"
	// DemoPlateOld (1994–2016 format) is a fleet company's car.
	DemoPlateOld = "AAA123"
	// DemoPlateMoto (Mercosur motorcycle) belongs to DemoCUIT.
	DemoPlateMoto = "A123BCD"
	// DemoPlateClean has no records anywhere.
	DemoPlateClean = "AC456DE"
	// DemoCUIT owns DemoPlate and DemoPlateMoto.
	DemoCUIT = "20-12345678-6"
	// DemoDNI is DemoCUIT's DNI.
	DemoDNI = "12345678"
	// DemoCUITFleet is the company that owns DemoPlateOld.
	DemoCUITFleet = "30-71234567-1"
	// DemoCUITClean has no records anywhere.
	DemoCUITClean = "27-23456789-1"
)

// Demo is the demo set: seven portals, each of one shape and behaviour.
//
//	caba     Ciudad de Buenos Aires           actas         healthy
//	cordoba  Provincia de Córdoba             infracciones  slow, 800ms
//	mendoza  Provincia de Mendoza             multas        flaky, 50% 503, Retry-After 2s
//	pba      Provincia de Buenos Aires        infracciones  throttle, 429, Retry-After 20s
//	rosario  Municipalidad de Rosario         actas         down
//	salta    Provincia de Salta               multas        hang
//	santafe  Provincia de Santa Fe            multas        healthy
//
// The data exercise the aggregator's normalisation: amounts with three
// decimals that binary floating point rounds wrongly (98765.435 as a JSON
// number in cordoba, "12345.675" in santafe), a status no status_map
// knows ("prescripta" in santafe), zone-less, dd/mm/yyyy and offset dates.
func Demo() []Jurisdiction {
	person := func(r Record) Record { r.CUIT, r.DNI = DemoCUIT, DemoDNI; return r }
	fleet := func(r Record) Record { r.CUIT = DemoCUITFleet; return r }
	return []Jurisdiction{
		{
			ID: "caba", Name: "Ciudad de Buenos Aires", Shape: ShapeActas,
			Fault: Fault{Mode: Healthy},
			Records: []Record{
				person(Record{Domain: DemoPlate, ID: "Q-10442", Date: "2026-03-14T09:12:00",
					Description: "Exceso de velocidad", Place: "Av. Lugones km 4",
					Amount: "185000.00", Currency: "ARS", Status: StatusUnpaid}),
				person(Record{Domain: DemoPlate, ID: "Q-10587", Date: "2025-11-02T18:40:00",
					Description: "Estacionamiento en lugar prohibido", Place: "Av. Santa Fe 3200",
					Amount: "47500.00", Currency: "ARS", Status: StatusPaid}),
				fleet(Record{Domain: DemoPlateOld, ID: "Q-11021", Date: "2026-01-20T07:55:00",
					Description: "Circular por carril exclusivo de transporte público", Place: "Av. 9 de Julio y Av. Belgrano",
					Amount: "92450.50", Currency: "ARS", Status: StatusInProcess}),
				person(Record{Domain: DemoPlateMoto, ID: "Q-11230", Date: "2026-02-27T22:05:00",
					Description: "Conducir motocicleta sin casco", Place: "Av. Corrientes 4800",
					Amount: "61800.00", Currency: "ARS", Status: StatusUnpaid}),
			},
		},
		{
			ID: "cordoba", Name: "Provincia de Córdoba", Shape: ShapeInfracciones,
			Fault: Fault{Mode: Slow, Latency: 800 * time.Millisecond},
			Records: []Record{
				person(Record{Domain: DemoPlate, ID: "CBA-2026-004512", Date: "2026-02-10T11:30:00",
					Description: "Cruce de semáforo en rojo", Place: "Bv. San Juan y Av. Vélez Sarsfield, Córdoba",
					Amount: "98765.435", Status: StatusUnpaid}),
				person(Record{Domain: DemoPlateMoto, ID: "CBA-2025-019877", Date: "2025-12-22T16:15:00",
					Description: "Uso de teléfono celular al conducir", Place: "Av. Circunvalación km 12, Córdoba",
					Amount: "154300.00", Status: StatusInProcess}),
			},
		},
		{
			ID: "mendoza", Name: "Provincia de Mendoza", Shape: ShapeMultas,
			Fault: Fault{Mode: Flaky, FailRate: 0.5, RetryAfter: 2 * time.Second},
			Records: []Record{
				person(Record{Domain: DemoPlate, ID: "MZA-77812", Date: "2026-02-03T18:45:00",
					Description: "Exceso de velocidad en zona urbana", Place: "Acceso Este km 8, Guaymallén",
					Amount: "45000.00", Currency: "ARS", Status: StatusUnpaid}),
				person(Record{Domain: DemoPlateMoto, ID: "MZA-78090", Date: "2026-03-01T10:20:00",
					Description: "Circular sin seguro obligatorio", Place: "Av. San Martín 1250, Mendoza",
					Amount: "210000.00", Currency: "ARS", Status: StatusUnpaid}),
			},
		},
		{
			ID: "pba", Name: "Provincia de Buenos Aires", Shape: ShapeInfracciones,
			Fault: Fault{Mode: Throttle, RetryAfter: 20 * time.Second},
			Records: []Record{
				person(Record{Domain: DemoPlate, ID: "PBA-2026-558120", Date: "2026-01-08T14:02:00",
					Description: "Exceso de velocidad", Place: "Ruta 2 km 123, Chascomús",
					Amount: "312000.00", Status: StatusUnpaid}),
				fleet(Record{Domain: DemoPlateOld, ID: "PBA-2025-498811", Date: "2025-10-19T08:47:00",
					Description: "Circular sin VTV vigente", Place: "Autopista Buenos Aires-La Plata km 30, Quilmes",
					Amount: "88600.00", Status: StatusPaid}),
			},
		},
		{
			ID: "rosario", Name: "Municipalidad de Rosario", Shape: ShapeActas,
			Fault: Fault{Mode: Down},
			Records: []Record{
				person(Record{Domain: DemoPlate, ID: "ROS-2026-0042", Date: "2026-03-11T12:10:00",
					Description: "Estacionamiento en doble fila", Place: "Bv. Oroño 1100, Rosario",
					Amount: "38900.00", Currency: "ARS", Status: StatusUnpaid}),
				fleet(Record{Domain: DemoPlateOld, ID: "ROS-2026-0117", Date: "2026-02-14T19:25:00",
					Description: "Giro indebido", Place: "Av. Pellegrini y Bv. Oroño, Rosario",
					Amount: "42700.00", Currency: "ARS", Status: StatusUnpaid}),
			},
		},
		{
			ID: "salta", Name: "Provincia de Salta", Shape: ShapeMultas,
			Fault: Fault{Mode: Hang},
			Records: []Record{
				person(Record{Domain: DemoPlate, ID: "SAL-33019", Date: "2025-09-15T17:30:00",
					Description: "Adelantarse en doble línea amarilla", Place: "Ruta Nacional 68 km 160, Cafayate",
					Amount: "128000.00", Currency: "ARS", Status: StatusUnpaid}),
			},
		},
		{
			ID: "santafe", Name: "Provincia de Santa Fe", Shape: ShapeMultas,
			Fault: Fault{Mode: Healthy},
			Records: []Record{
				person(Record{Domain: DemoPlate, ID: "SF-2026-8812", Date: "2026-02-18T09:05:00",
					Description: "No respetar la prioridad del peatón", Place: "Bv. Gálvez 1500, Santa Fe",
					Amount: "12345.675", Currency: "ARS", Status: StatusUnpaid}),
				fleet(Record{Domain: DemoPlateOld, ID: "SF-2019-0311", Date: "2019-06-04T15:40:00",
					Description: "Exceso de velocidad", Place: "Ruta Nacional 168 km 3, Santa Fe",
					Amount: "5400.00", Currency: "ARS", Status: "prescripta"}),
			},
		},
	}
}

// DemoGainID is the infraction that caba gains in the demo of `portalsim
// -demo` (WithGain).
const DemoGainID = "Q-12001"

// WithGain is js with caba's portal gaining one more infraction for
// DemoPlate after (0: never), an unpaid speeding ticket: what a watch of
// that vehicle (SPEC 15) reports as added. js without caba is returned as
// it is.
func WithGain(js []Jurisdiction, after time.Duration) []Jurisdiction {
	if after <= 0 {
		return js
	}
	out := slices.Clone(js)
	for i, j := range out {
		if j.ID != "caba" {
			continue
		}
		j.Records = append(slices.Clone(j.Records), Record{Domain: DemoPlate, CUIT: DemoCUIT, DNI: DemoDNI, ID: DemoGainID,
			Date: "2026-03-20T08:30:00", Description: "Cruce de semáforo en rojo", Place: "Av. Córdoba y Callao",
			Amount: "210000.00", Currency: "ARS", Status: StatusUnpaid, After: after.String()})
		out[i] = j
	}
	return out
}

// DialectDemo is one demo jurisdiction in each dialect of SPEC 8, every one
// healthy, with records for DemoPlate and DemoCUIT and the same kinds of
// normalisation cases as Demo (zone-less dates, amounts with three
// decimals that round half away from zero, a status no status_map knows):
//
//	neuquen   Provincia del Neuquén    soap     SOAP 1.1, namespaced XML
//	tucuman   Provincia de Tucumán     html     HTML table in windows-1252
//	chubut    Provincia del Chubut     paged    JSON in pages of 3 (7 records for DemoPlate: 3 pages)
//	entrerios Provincia de Entre Ríos  oauth2   JSON behind OAuth2 client credentials
//	misiones  Provincia de Misiones    session  HTML behind a session page (cookie + hidden token)
//
// `portalsim -demo` and the aggregator's demo serve them after Demo
// (DemoAll).
func DialectDemo() []Jurisdiction {
	person := func(r Record) Record { r.CUIT, r.DNI = DemoCUIT, DemoDNI; return r }
	fleet := func(r Record) Record { r.CUIT = DemoCUITFleet; return r }
	return []Jurisdiction{
		NewJurisdiction(ShapeSOAP, "neuquen", "Provincia del Neuquén", []Record{
			person(Record{Domain: DemoPlate, ID: "NQN-2026-001234", Date: "2026-03-05T08:20:00",
				Description: "Exceso de velocidad", Place: "Ruta Nacional 22 km 1220, Plottier",
				Amount: "156000.00", Currency: "ARS", Status: StatusUnpaid}),
			person(Record{Domain: DemoPlateMoto, ID: "NQN-2025-009876", Date: "2025-12-01T21:40:00",
				Description: "Conducir sin licencia habilitante", Place: "Av. Argentina 350, Neuquén",
				Amount: "98765.435", Currency: "ARS", Status: StatusInProcess}),
			fleet(Record{Domain: DemoPlateOld, ID: "NQN-2026-000321", Date: "2026-01-15T13:05:00",
				Description: "Estacionar en lugar reservado", Place: "Calle Alcorta 180, Neuquén",
				Amount: "22500.00", Currency: "ARS", Status: StatusPaid}),
		}),
		NewJurisdiction(ShapeHTML, "tucuman", "Provincia de Tucumán", []Record{
			person(Record{Domain: DemoPlate, ID: "TUC-26-004455", Date: "2026-02-21T10:45:00",
				Description: "Cruce de semáforo en rojo", Place: "Calle Córdoba 650, San Miguel de Tucumán",
				Amount: "87300.00", Currency: "ARS", Status: StatusUnpaid}),
			person(Record{Domain: DemoPlate, ID: "TUC-25-118820", Date: "2025-08-09T19:30:00",
				Description: "Estacionar sobre la vereda", Place: "Av. Aconquija 1200, Yerba Buena",
				Amount: "12345.675", Currency: "ARS", Status: StatusInProcess}),
			person(Record{Domain: DemoPlateMoto, ID: "TUC-19-000733", Date: "2019-04-02T07:10:00",
				Description: "Circular sin casco", Place: "Av. Mate de Luna 2400, San Miguel de Tucumán",
				Amount: "3500.00", Currency: "ARS", Status: "prescripta"}),
			fleet(Record{Domain: DemoPlateOld, ID: "TUC-26-000917", Date: "2026-01-30T09:00:00",
				Description: "Carga y descarga fuera de horario", Place: "Av. Sarmiento 300, San Miguel de Tucumán",
				Amount: "95000.00", Currency: "ARS", Status: StatusPaid}),
		}),
		chubut(person, fleet),
		NewJurisdiction(ShapeOAuth2, "entrerios", "Provincia de Entre Ríos", []Record{
			person(Record{Domain: DemoPlate, ID: "ER-2026-07781", Date: "2026-03-09T16:50:00",
				Description: "Exceso de velocidad", Place: "Ruta Nacional 14 km 205, Gualeguaychú",
				Amount: "198500.00", Currency: "ARS", Status: StatusUnpaid}),
			person(Record{Domain: DemoPlateMoto, ID: "ER-2026-07910", Date: "2026-02-11T23:10:00",
				Description: "Circular sin luces reglamentarias", Place: "Av. Ramírez 2100, Paraná",
				Amount: "34750.50", Currency: "ARS", Status: StatusUnpaid}),
			fleet(Record{Domain: DemoPlateOld, ID: "ER-2025-06120", Date: "2025-10-07T12:30:00",
				Description: "Exceso de peso por eje", Place: "Ruta Nacional 18 km 90, Villaguay",
				Amount: "254000.00", Currency: "ARS", Status: StatusInProcess}),
		}),
		NewJurisdiction(ShapeSession, "misiones", "Provincia de Misiones", []Record{
			person(Record{Domain: DemoPlate, ID: "MIS-2026-3321", Date: "2026-01-28T11:15:00",
				Description: "Adelantarse en zona prohibida", Place: "Ruta Nacional 12 km 1590, Puerto Iguazú",
				Amount: "143200.00", Currency: "ARS", Status: StatusUnpaid}),
			person(Record{Domain: DemoPlate, ID: "MIS-2025-2875", Date: "2025-07-19T15:45:00",
				Description: "Estacionar en zona de carga y descarga", Place: "Av. Mitre 1800, Posadas",
				Amount: "18900.00", Currency: "ARS", Status: StatusPaid}),
			fleet(Record{Domain: DemoPlateOld, ID: "MIS-2025-2890", Date: "2025-08-02T10:00:00",
				Description: "Exceso de velocidad", Place: "Ruta Nacional 14 km 880, Oberá",
				Amount: "99999.995", Currency: "ARS", Status: StatusUnpaid}),
		}),
	}
}

// chubut has seven records for DemoPlate (DemoCUIT): three pages of three.
func chubut(person, fleet func(Record) Record) Jurisdiction {
	j := NewJurisdiction(ShapePaged, "chubut", "Provincia del Chubut", []Record{
		person(Record{Domain: DemoPlate, ID: "CHU-2026-01021", Date: "2026-03-12T10:05:00",
			Description: "Exceso de velocidad", Place: "Ruta Nacional 3 km 1435, Trelew",
			Amount: "176400.00", Currency: "ARS", Status: StatusUnpaid}),
		person(Record{Domain: DemoPlate, ID: "CHU-2026-00988", Date: "2026-03-02T17:42:00",
			Description: "Exceso de velocidad", Place: "Ruta Nacional 3 km 1390, Puerto Madryn",
			Amount: "176400.00", Currency: "ARS", Status: StatusUnpaid}),
		person(Record{Domain: DemoPlate, ID: "CHU-2026-00874", Date: "2026-02-20T08:15:30",
			Description: "Circular sin luces bajas encendidas en ruta", Place: "Ruta Nacional 25 km 8, Trelew",
			Amount: "28500.00", Currency: "ARS", Status: StatusUnpaid}),
		person(Record{Domain: DemoPlate, ID: "CHU-2026-00702", Date: "2026-02-04T19:20:00",
			Description: "Estacionamiento en lugar prohibido", Place: "Av. San Martín 420, Comodoro Rivadavia",
			Amount: "54321.005", Currency: "ARS", Status: StatusUnpaid}),
		person(Record{Domain: DemoPlate, ID: "CHU-2025-04410", Date: "2025-12-28T13:00:00",
			Description: "No respetar la señal de PARE", Place: "Av. Fontana y 9 de Julio, Trelew",
			Amount: "41200.00", Currency: "ARS", Status: StatusPaid}),
		person(Record{Domain: DemoPlate, ID: "CHU-2025-03987", Date: "2025-11-15T22:10:00",
			Description: "Conducir con licencia vencida", Place: "Av. Alvear 850, Esquel",
			Amount: "67800.00", Currency: "ARS", Status: StatusInProcess}),
		person(Record{Domain: DemoPlate, ID: "CHU-2025-03122", Date: "2025-09-03T06:55:00",
			Description: "Exceso de velocidad", Place: "Ruta Nacional 40 km 1850, Esquel",
			Amount: "152000.00", Currency: "ARS", Status: "archivada"}),
		fleet(Record{Domain: DemoPlateOld, ID: "CHU-2026-01100", Date: "2026-03-14T11:30:00",
			Description: "Circular sin VTV vigente", Place: "Av. Roca 1100, Puerto Madryn",
			Amount: "61000.00", Currency: "ARS", Status: StatusUnpaid}),
	})
	j.Paging = Paging{Style: PagePages, Size: 3}
	return j
}

// RealDemo is one demo jurisdiction in four of the shapes of SPEC 12 (see
// RealShapes), every one healthy, with records for DemoPlate and DemoCUIT:
//
//	sanjuan    Provincia de San Juan           datajson   JSON in an HTML attribute, "$ 185.000", "AS 16:08"
//	saopaulo   Estado de São Paulo (DETRAN)    detran     HTML in windows-1252, "R$ 1.234,56", "às 12:36:11"
//	montevideo Intendencia de Montevideo       errorflag  {"error": …} bodies, fines in UR, other plates' too
//	cdmx       Ciudad de México                envelope   HTML inside JSON, fines in UMA, "$1,234.56"
//
// Their sources carry their own time_zone and currency (BRL, UYU, MXN).
func RealDemo() []Jurisdiction {
	person := func(r Record) Record { r.CUIT, r.DNI = DemoCUIT, DemoDNI; return r }
	fleet := func(r Record) Record { r.CUIT = DemoCUITFleet; return r }
	return []Jurisdiction{
		NewJurisdiction(ShapeDataJSON, "sanjuan", "Provincia de San Juan", []Record{
			person(Record{Domain: DemoPlate, ID: "SJ-2026-018822", Date: "2026-03-06T16:08:00",
				Description: "Exceso de velocidad", Place: "Av. Libertador General San Martín 2450, Capital",
				Amount: "185000", Status: StatusUnpaid}),
			person(Record{Domain: DemoPlate, ID: "SJ-2025-104417", Date: "2025-12-19T10:40:00",
				Description: "Estacionar en lugar prohibido", Place: "Calle Mendoza 120, Capital",
				Amount: "1234", Status: StatusPaid}),
			fleet(Record{Domain: DemoPlateOld, ID: "SJ-2026-020103", Date: "2026-02-11T07:25:00",
				Description: "Circular sin RTO vigente", Place: "Ruta Nacional 40 km 3, Pocito",
				Amount: "96500.50", Status: StatusInProcess}),
		}),
		NewJurisdiction(ShapeDetran, "saopaulo", "Estado de São Paulo (DETRAN)", []Record{
			person(Record{Domain: DemoPlate, ID: "1C2345678", Date: "2026-01-10T12:36:11",
				Description: "Transitar em velocidade superior à máxima permitida em até 20%", Place: "Av. Paulista 1578, São Paulo",
				Amount: "130.16", Status: StatusUnpaid}),
			person(Record{Domain: DemoPlate, ID: "1C2398811", Date: "2025-10-03T08:05:42",
				Description: "Estacionar em desacordo com a regulamentação", Place: "Rua Augusta 900, São Paulo",
				Amount: "195.23", Status: StatusPaid}),
			person(Record{Domain: DemoPlateMoto, ID: "1C2401177", Date: "2026-02-21T19:14:03",
				Description: "Conduzir motocicleta sem capacete", Place: "Rod. dos Bandeirantes km 23, São Paulo",
				Status: StatusInProcess}),
		}),
		NewJurisdiction(ShapeErrorFlag, "montevideo", "Intendencia de Montevideo", []Record{
			person(Record{Domain: DemoPlate, ID: "IM-2026-0041877", Date: "2026-02-14T21:50:00",
				Description: "Estacionar en lugar reservado", Place: "Av. 18 de Julio y Ejido",
				Amount: "6133.50", Units: "3.5", Status: StatusUnpaid}),
			person(Record{Domain: DemoPlate, ID: "IM-2025-0398120", Date: "2025-11-28T09:15:00",
				Description: "Exceso de velocidad", Place: "Rambla República de Chile 4500",
				Amount: "17524.00", Units: "10", Status: StatusInProcess}),
			person(Record{Domain: DemoPlateMoto, ID: "IM-2026-0050211", Date: "2026-03-02T18:30:00",
				Description: "Circular sin casco", Place: "Bv. Artigas y Av. Rivera",
				Amount: "8762.00", Units: "5", Status: StatusUnpaid}),
		}),
		NewJurisdiction(ShapeEnvelope, "cdmx", "Ciudad de México", []Record{
			person(Record{Domain: DemoPlate, ID: "03013139729", Date: "2026-01-22T13:45:00",
				Description: "Por no respetar los límites de velocidad establecidos en vías primarias", Place: "Av. Insurgentes Sur 1602, Benito Juárez",
				Amount: "2262.80", Units: "20", Status: StatusUnpaid}),
			person(Record{Domain: DemoPlate, ID: "03013140115", Date: "2025-09-30T08:20:00",
				Description: "Estacionarse en lugar prohibido", Place: "Calle Durango 245, Cuauhtémoc",
				Amount: "1131.40", Units: "10", Status: StatusPaid}),
			fleet(Record{Domain: DemoPlateOld, ID: "03013141802", Date: "2026-02-05T17:10:00",
				Description: "Circular en carril confinado", Place: "Eje Central Lázaro Cárdenas y Av. Juárez",
				Amount: "2262.80", Units: "20", Status: StatusInProcess}),
		}),
	}
}

// DemoAll is what `portalsim -demo` and the aggregator's demo serve: Demo,
// DialectDemo, then RealDemo.
func DemoAll() []Jurisdiction {
	return append(append(Demo(), DialectDemo()...), RealDemo()...)
}

// NewJurisdiction is a healthy jurisdiction of shape s serving recs, with
// the defaults of its dialect's settings written out (Paging, OAuth2 with
// the Demo* credentials, Session). Serve the same records in several
// shapes (LosslessShapes) to check that the aggregator maps them alike,
// whatever dialect each portal speaks.
func NewJurisdiction(s Shape, id, name string, recs []Record) Jurisdiction {
	return Jurisdiction{ID: id, Name: name, Shape: s, Records: slices.Clone(recs)}.withDefaults()
}
