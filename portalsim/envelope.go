package portalsim

import (
	"net/http"
	"strings"
)

// ShapeEnvelope is a Mexican city's AJAX endpoint (a PHP site) that
// answers JSON whose second element holds the HTML table its page shows,
// escaped as json_encode does ("<\/td>", "\u00e9"). Fines are stated in UMA
// (Unidad de Medida y Actualización) beside their amount in pesos:
//
//	GET /consultas/infracciones?placa={domain}
//	GET /consultas/infracciones?documento={id}        (CUIT or DNI)
//	GET /consultas/infracciones/{infraction_id}/linea-de-captura
//
//	[{"status":"ok","total":1},{"data":"<table id=\"tablaDatos\"><thead>…<\/thead><tbody>
//	 <tr class=\"infraccion\"><td class=\"folio\">RP-2026-0142<\/td>
//	 <td class=\"fecha\">14\/03\/2026 09:12 hrs.<\/td><td class=\"motivo\">Exceso de velocidad<\/td>
//	 <td class=\"ubicacion\">Av. V\u00e9lez Sarsfield 1200, C\u00f3rdoba<\/td><td class=\"uma\">100<\/td>
//	 <td class=\"monto\">$185,000.00<\/td><td class=\"situacion\">No pagada<\/td><\/tr>…"}]
//
// Dates are "dd/mm/yyyy hh:mm hrs." in Mexico City time; amounts
// "$1,234.56" (thousands grouped by ',', decimals after '.'); a missing
// place, UMA or amount is "S/D" (sin dato). No records is a data of
// <p class="sin-infracciones">; the Maintenance mode answers 200
// [{"status":"mantenimiento","mensaje":"…"}], without the data element.
const ShapeEnvelope Shape = "envelope"

func envelopeDialect() *dialect {
	return &dialect{
		locale:     localeMX.withUnits("UMA"),
		byDomain:   "/consultas/infracciones?placa={domain}",
		byID:       "/consultas/infracciones?documento={id}",
		voucher:    "/consultas/infracciones/{infraction_id}/linea-de-captura",
		statusText: map[string]string{StatusUnpaid: "No pagada", StatusPaid: "Pagada", StatusInProcess: "Impugnada"},
		answer:     envelopeAnswer,
		maintenance: func(_ *Portal, w http.ResponseWriter) {
			writeBody(w, http.StatusOK, jsonContentType, phpJSON([]envelopeStatus{{Status: "mantenimiento", Mensaje: maintenanceText}}))
		},
		mapping: envelopeMapping,
	}
}

type envelopeStatus struct {
	Status  string `json:"status"`
	Total   *int   `json:"total,omitempty"`
	Mensaje string `json:"mensaje,omitempty"`
}

type envelopeData struct {
	Data string `json:"data"`
}

func envelopeAnswer(p *Portal, w http.ResponseWriter, _ *http.Request, _ kind, recs []Record) {
	var b strings.Builder
	if len(recs) == 0 {
		b.WriteString(`<p class="sin-infracciones">La placa consultada no tiene infracciones registradas.</p>`)
	} else {
		b.WriteString(`<table id="tablaDatos" class="table"><thead><tr><th>Folio</th><th>Fecha</th><th>Motivo</th><th>Ubicación</th><th>UMA</th><th>Monto</th><th>Situación</th></tr></thead><tbody>`)
		for _, r := range recs {
			t := recordTime(r.Date)
			amount := "S/D"
			if r.Amount != "" {
				amount = "$" + mexicanAmount(r.Amount)
			}
			b.WriteString(`<tr class="infraccion"><td class="folio">` + esc(r.ID) + `</td>`)
			b.WriteString(`<td class="fecha">` + t.Format("02/01/2006 15:04") + ` hrs.</td>`)
			b.WriteString(`<td class="motivo">` + esc(r.Description) + `</td>`)
			b.WriteString(`<td class="ubicacion">` + esc(or(r.Place, "S/D")) + `</td>`)
			b.WriteString(`<td class="uma">` + or(r.Units, "S/D") + `</td>`)
			b.WriteString(`<td class="monto">` + amount + `</td>`)
			b.WriteString(`<td class="situacion">` + esc(p.d.status(r.Status)) + `</td></tr>`)
		}
		b.WriteString(`</tbody></table>`)
	}
	total := len(recs)
	writeBody(w, http.StatusOK, jsonContentType, phpJSON([]any{envelopeStatus{Status: "ok", Total: &total}, envelopeData{Data: b.String()}}))
}

func envelopeMapping(d *dialect, j Jurisdiction, base string) realSource {
	src := newRealSource(d, j, base)
	src.Response = realResponse{
		Format:     "json",
		NullValues: []string{"S/D"},
		Unwrap:     []realUnwrap{{Select: "/1/data", Format: "html"}},
		Items:      "table#tablaDatos tbody tr.infraccion",
		Fields: realFields{
			ID:          "td.folio",
			Date:        realField{Select: "td.fecha", Layout: []string{"dd/MM/yyyy HH:mm 'hrs.'"}},
			Description: "td.motivo",
			Place:       "td.ubicacion",
			Amount:      realField{Select: "td.monto", Decimal: "."},
			Status:      "td.situacion",
			Units:       unitsField(d, "td.uma"),
		},
		NotFound: "p.sin-infracciones",
		Errors: []realRule{
			{When: realCond{Select: "/0/status", Equals: "mantenimiento"}, Outcome: "unavailable", Detail: "/0/mensaje"},
		},
		StatusMap: statusMap(d),
	}
	return src
}
