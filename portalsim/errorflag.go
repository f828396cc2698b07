package portalsim

import (
	"net/http"
	"strings"
	"unicode"
)

// ShapeErrorFlag is a Uruguayan departmental government's JSON endpoint
// behind its reCAPTCHA page: every answer is 200 and says in its body
// whether it failed. Fines are stated in UR (Unidades Reajustables) and
// in pesos. UTF-8:
//
//	GET /api/consultas/infracciones?matricula={domain}
//	GET /api/consultas/infracciones?documento={id}    (CUIT or DNI)
//	GET /api/consultas/infracciones/{infraction_id}/factura
//
//	{"error": false, "mensaje": "", "infracciones": [{"matricula": "AB 123 CD",
//	  "numero": "RP-2026-0142", "fecha": "14/03/2026 09:12", "descripcion": "Exceso de velocidad",
//	  "lugar": "…", "valorUR": "100", "importe": "$ 185.000,00", "estado": "Pendiente"}]}
//
// A lookup by plate answers the infractions of every vehicle of the
// plate's owner (DemoPlate's brings DemoPlateMoto's): each names its plate,
// written with spaces, so a mapping keeps the queried one's. Dates are
// dd/mm/yyyy hh:mm in Montevideo time; amounts "$ 1.234,56"; UR "2,5"; a
// missing place, UR or amount is a missing member. No records is 200
// {"error": false, "mensaje": "No se encontraron infracciones",
// "infracciones": []}; in the Captcha mode every lookup is 200
// {"error": true, "mensaje": "Debe completar el captcha", "infracciones": []}.
const ShapeErrorFlag Shape = "errorflag"

func errorFlagDialect() *dialect {
	return &dialect{
		locale:     localeUY.withUnits("UR"),
		byDomain:   "/api/consultas/infracciones?matricula={domain}",
		byID:       "/api/consultas/infracciones?documento={id}",
		voucher:    "/api/consultas/infracciones/{infraction_id}/factura",
		statusText: map[string]string{StatusUnpaid: "Pendiente", StatusPaid: "Paga", StatusInProcess: "En trámite"},
		answer:     errorFlagAnswer,
		captcha: func(_ *Portal, w http.ResponseWriter) {
			writeJSON(w, http.StatusOK, errorFlagBody{Error: true, Mensaje: captchaText, Infracciones: []errorFlagItem{}})
		},
		mapping: errorFlagMapping,
	}
}

type errorFlagItem struct {
	Matricula   string `json:"matricula"`
	Numero      string `json:"numero,omitempty"`
	Fecha       string `json:"fecha"`
	Descripcion string `json:"descripcion"`
	Lugar       string `json:"lugar,omitempty"`
	ValorUR     string `json:"valorUR,omitempty"`
	Importe     string `json:"importe,omitempty"`
	Estado      string `json:"estado"`
}

type errorFlagBody struct {
	Error        bool            `json:"error"`
	Mensaje      string          `json:"mensaje"`
	Infracciones []errorFlagItem `json:"infracciones"`
}

func errorFlagAnswer(p *Portal, w http.ResponseWriter, _ *http.Request, k kind, recs []Record) {
	if k == kindByDomain {
		recs = p.ownersRecords(recs)
	}
	body := errorFlagBody{Infracciones: make([]errorFlagItem, 0, len(recs))}
	if len(recs) == 0 {
		body.Mensaje = "No se encontraron infracciones"
	}
	for _, r := range recs {
		item := errorFlagItem{Matricula: spacedPlate(r.Domain), Numero: r.ID, Fecha: civilTime(r.Date),
			Descripcion: r.Description, Lugar: r.Place, ValorUR: commaDecimal(r.Units), Estado: p.d.status(r.Status)}
		if r.Amount != "" {
			item.Importe = "$ " + argentineAmount(r.Amount)
		}
		body.Infracciones = append(body.Infracciones, item)
	}
	writeJSON(w, http.StatusOK, body)
}

// ownersRecords are the records of everyone who owns one of recs, in the
// portal's order: what a registry that links a plate to its owner answers.
func (p *Portal) ownersRecords(recs []Record) []Record {
	owners := make(map[string]bool)
	for _, r := range recs {
		owners[owner(r)] = true
	}
	var all []Record
	for _, r := range p.visible(p.j.Records) {
		if owners[owner(r)] {
			all = append(all, r)
		}
	}
	return all
}

// owner identifies who owns r: its CUIT, else its DNI, else r alone.
func owner(r Record) string {
	switch {
	case digits(r.CUIT) != "":
		return "cuit " + digits(r.CUIT)
	case dniKey(r.DNI) != "":
		return "dni " + dniKey(r.DNI)
	}
	return "acta " + r.ID
}

// spacedPlate writes a plate as Uruguayan registries print theirs, a space
// between letters and digits: "AB123CD" → "AB 123 CD".
func spacedPlate(plate string) string {
	var b strings.Builder
	prev := rune(0)
	for _, c := range normalDomain(plate) {
		if prev != 0 && unicode.IsDigit(prev) != unicode.IsDigit(c) {
			b.WriteByte(' ')
		}
		b.WriteRune(c)
		prev = c
	}
	return b.String()
}

func errorFlagMapping(d *dialect, j Jurisdiction, base string) realSource {
	src := newRealSource(d, j, base)
	src.Response = realResponse{
		Format:  "json",
		Decimal: ",",
		Items:   "/infracciones",
		Match:   &realMatch{Select: "/matricula", Equals: "{domain}"},
		Fields: realFields{
			ID:          "/numero",
			Date:        "/fecha",
			Description: "/descripcion",
			Place:       "/lugar",
			Amount:      "/importe",
			Status:      "/estado",
			Units:       unitsField(d, "/valorUR"),
		},
		Unavailable: "/mantenimiento",
		Errors:      []realRule{{When: realCond{Select: "/error", Equals: true}, Outcome: "rejected", Detail: "/mensaje"}},
		StatusMap:   statusMap(d),
	}
	return src
}
