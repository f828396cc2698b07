package portalsim

import "encoding/json"

// ShapeArrays is an Argentine provincial road-safety portal (Córdoba
// style) that answers one array per situation, its items without a status
// of their own, and states fines in UF (unidades fijas, whose price in
// pesos changes with that of fuel) with no money amount at all. UTF-8:
//
//	GET /consultas/infracciones?dominio={domain}
//	GET /consultas/infracciones?documento={id}          (CUIT or DNI)
//	GET /consultas/infracciones/{infraction_id}/cedulon
//
//	{"pendientes": [{"nroActa": "RP-2026-0142", "fecha": "14/03/2026 09:12",
//	   "infraccion": "Exceso de velocidad", "lugar": "…", "uf": 100}],
//	 "pagadas": [ … ], "enTramite": [ … ],
//	 "otras": [{ …, "situacion": "prescripta"}]}
//
// Every array is always there; only "otras" (records of any other status)
// carries a situacion. Dates are dd/mm/yyyy hh:mm; UF are JSON numbers; a
// missing place or UF is a missing member. No records is 200 with every
// array empty.
const ShapeArrays Shape = "arrays"

func arraysDialect() *dialect {
	return &dialect{
		locale:     localeCordoba.withUnits("UF").unitsOnly(),
		byDomain:   "/consultas/infracciones?dominio={domain}",
		byID:       "/consultas/infracciones?documento={id}",
		voucher:    "/consultas/infracciones/{infraction_id}/cedulon",
		statusText: map[string]string{StatusUnpaid: "PENDIENTE", StatusPaid: "PAGADA", StatusInProcess: "EN TRAMITE"},
		render:     renderArrays,
		mapping:    arraysMapping,
	}
}

type arraysActa struct {
	NroActa    string      `json:"nroActa,omitempty"`
	Fecha      string      `json:"fecha"`
	Infraccion string      `json:"infraccion"`
	Lugar      string      `json:"lugar,omitempty"`
	UF         json.Number `json:"uf,omitempty"`
	Situacion  string      `json:"situacion,omitempty"`
}

type arraysAnswer struct {
	Pendientes []arraysActa `json:"pendientes"`
	Pagadas    []arraysActa `json:"pagadas"`
	EnTramite  []arraysActa `json:"enTramite"`
	Otras      []arraysActa `json:"otras"`
}

func renderArrays(_ *dialect, recs []Record) any {
	a := arraysAnswer{Pendientes: []arraysActa{}, Pagadas: []arraysActa{}, EnTramite: []arraysActa{}, Otras: []arraysActa{}}
	for _, r := range recs {
		item := arraysActa{NroActa: r.ID, Fecha: civilTime(r.Date), Infraccion: r.Description,
			Lugar: r.Place, UF: json.Number(trimZeros(r.Units))}
		switch r.Status {
		case StatusUnpaid:
			a.Pendientes = append(a.Pendientes, item)
		case StatusPaid:
			a.Pagadas = append(a.Pagadas, item)
		case StatusInProcess:
			a.EnTramite = append(a.EnTramite, item)
		default:
			item.Situacion = r.Status
			a.Otras = append(a.Otras, item)
		}
	}
	return a
}

func arraysMapping(d *dialect, j Jurisdiction, base string) realSource {
	src := newRealSource(d, j, base)
	set := func(status string) map[string]string { return map[string]string{"status_raw": d.statusText[status]} }
	src.Response = realResponse{
		Format: "json",
		Items: []realItems{
			{Select: "/pendientes", Set: set(StatusUnpaid)},
			{Select: "/pagadas", Set: set(StatusPaid)},
			{Select: "/enTramite", Set: set(StatusInProcess)},
			{Select: "/otras"},
		},
		Fields: realFields{
			ID:          "/nroActa",
			Date:        "/fecha",
			Description: "/infraccion",
			Place:       "/lugar",
			Status:      "/situacion",
			Units:       unitsField(d, "/uf"),
		},
		Unavailable: "/mantenimiento",
		StatusMap:   statusMap(d),
	}
	return src
}
