package portalsim

import (
	"encoding/json"
	"net/http"
)

// ShapeNested is an Argentine provincial revenue agency's JSON API: fines
// are obligations of a taxpayer's objects (one per issuing court), so they
// sit in arrays inside arrays. UTF-8:
//
//	GET /api/v1/contribuyentes/obligaciones?dominio={domain}
//	GET /api/v1/contribuyentes/obligaciones?cuit={id}        (CUIT only; a DNI is a 400)
//	GET /api/v1/obligaciones/{infraction_id}/boleta
//	X-Requested-With: XMLHttpRequest                         (required, as from its page)
//
//	{"data": {"contribuyentes": [{"cuit": "20123456786", "objetos": [
//	  {"tipo": "MULTAS", "descripcion": "Juzgado Administrativo de Faltas N° 1", "obligaciones": [
//	    {"numero": "RP-2026-0142", "fechaInfraccion": "2026-03-14T09:12:00",
//	     "concepto": "Exceso de velocidad", "lugar": "…", "importe": 185000, "uf": 100,
//	     "estado": "ADEUDADA"}]},
//	  {"tipo": "MULTAS", "descripcion": "Juzgado Administrativo de Faltas N° 2", "obligaciones": [ … ]}]}]}}
//
// The records of each taxpayer alternate between the two courts, so a
// pointer to the first object's obligations drops the second's; the
// JSONPath $.data.contribuyentes[*].objetos[*].obligaciones[*] reads them
// all. Dates are zone-less ISO 8601; amounts JSON numbers, with the fine in
// UF (unidades fijas) beside them; a missing place, amount or UF is a
// missing member. No records is 200 {"data": {"contribuyentes": []}}. A
// lookup without X-Requested-With is a 500 {"code": "998", "message":
// "missing header X-Requested-With"}, and in the Captcha mode every lookup
// is a 500 {"code": "999", "message": "missing captcha"}: refusals, not
// outages.
const ShapeNested Shape = "nested"

func nestedDialect() *dialect {
	return &dialect{
		locale:     localeAR.withUnits("UF"),
		byDomain:   "/api/v1/contribuyentes/obligaciones?dominio={domain}",
		byID:       "/api/v1/contribuyentes/obligaciones?cuit={id}",
		voucher:    "/api/v1/obligaciones/{infraction_id}/boleta",
		cuitOnly:   true,
		statusText: map[string]string{StatusUnpaid: "ADEUDADA", StatusPaid: "CANCELADA", StatusInProcess: "EN RECLAMO"},
		render:     renderNested,
		gate:       nestedGate,
		captcha: func(p *Portal, w http.ResponseWriter) {
			writeJSON(w, http.StatusInternalServerError, nestedError{"999", "missing captcha"})
		},
		mapping: nestedMapping,
	}
}

// nestedError is ShapeNested's error body.
type nestedError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// nestedGate refuses a lookup without the header its page sends.
func nestedGate(_ *Portal, w http.ResponseWriter, r *http.Request, k kind) bool {
	if k.lookup() && r.Header.Get("X-Requested-With") != "XMLHttpRequest" {
		writeJSON(w, http.StatusInternalServerError, nestedError{"998", "missing header X-Requested-With"})
		return false
	}
	return true
}

type nestedObligacion struct {
	Numero          string      `json:"numero,omitempty"`
	FechaInfraccion string      `json:"fechaInfraccion"`
	Concepto        string      `json:"concepto"`
	Lugar           string      `json:"lugar,omitempty"`
	Importe         json.Number `json:"importe,omitempty"`
	UF              json.Number `json:"uf,omitempty"`
	Estado          string      `json:"estado"`
}

type nestedObjeto struct {
	Tipo         string             `json:"tipo"`
	Descripcion  string             `json:"descripcion"`
	Obligaciones []nestedObligacion `json:"obligaciones"`
}

type nestedContribuyente struct {
	CUIT    string         `json:"cuit"`
	Objetos []nestedObjeto `json:"objetos"`
}

type nestedAnswer struct {
	Data struct {
		Contribuyentes []nestedContribuyente `json:"contribuyentes"`
	} `json:"data"`
}

// nestedCourts are the objects a taxpayer's fines are filed under.
var nestedCourts = []string{"Juzgado Administrativo de Faltas N° 1", "Juzgado Administrativo de Faltas N° 2"}

func renderNested(d *dialect, recs []Record) any {
	var a nestedAnswer
	a.Data.Contribuyentes = []nestedContribuyente{}
	taxpayer := make(map[string]int) // CUIT → index
	filed := make(map[string]int)    // CUIT → records filed so far
	for _, r := range recs {
		cuit := digits(r.CUIT)
		i, ok := taxpayer[cuit]
		if !ok {
			i = len(a.Data.Contribuyentes)
			taxpayer[cuit] = i
			a.Data.Contribuyentes = append(a.Data.Contribuyentes, nestedContribuyente{CUIT: cuit})
		}
		c := &a.Data.Contribuyentes[i]
		court := filed[cuit] % len(nestedCourts)
		filed[cuit]++
		for len(c.Objetos) <= court {
			c.Objetos = append(c.Objetos, nestedObjeto{Tipo: "MULTAS", Descripcion: nestedCourts[len(c.Objetos)]})
		}
		c.Objetos[court].Obligaciones = append(c.Objetos[court].Obligaciones, nestedObligacion{
			Numero:          r.ID,
			FechaInfraccion: recordTime(r.Date).Format(recordDateLayout),
			Concepto:        r.Description,
			Lugar:           r.Place,
			Importe:         json.Number(trimZeros(r.Amount)),
			UF:              json.Number(trimZeros(r.Units)),
			Estado:          d.status(r.Status),
		})
	}
	return a
}

func nestedMapping(d *dialect, j Jurisdiction, base string) realSource {
	src := newRealSource(d, j, base)
	src.Headers = map[string]string{"X-Requested-With": "XMLHttpRequest"}
	src.Operations = getOperations(d)
	src.Response = realResponse{
		Format: "json",
		Items:  "$.data.contribuyentes[*].objetos[*].obligaciones[*]",
		Fields: realFields{
			ID:          "/numero",
			Date:        "/fechaInfraccion",
			Description: "/concepto",
			Place:       "/lugar",
			Amount:      "/importe",
			Status:      "/estado",
			Units:       unitsField(d, "/uf"),
		},
		Unavailable: "/mantenimiento",
		Errors: []realRule{
			{Status: []int{http.StatusInternalServerError}, When: realCond{Select: "/code", Equals: "999"}, Outcome: "rejected", Detail: "/message"},
			{Status: []int{http.StatusInternalServerError}, When: realCond{Select: "/code", Equals: "998"}, Outcome: "rejected", Detail: "/message"},
		},
		StatusMap: statusMap(d),
	}
	return src
}
