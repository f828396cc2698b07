package portalsim

import "time"

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
