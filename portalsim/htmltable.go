package portalsim

import (
	"html"
	"net/http"
	"net/url"
	"strings"
)

// htmlTableDialect is ShapeHTML, an old web page (ASP classic style), answering a GET with an
// HTML 4 page in windows-1252. The Content-Type header says text/html
// without a charset; only the page's meta http-equiv declares it:
//
//	GET /infracciones/consulta.asp?patente={domain}
//	GET /infracciones/consulta.asp?cuit={id}          (CUIT only; a DNI is a 400)
//	GET /infracciones/boleta.asp?acta={infraction_id}
//
//	<table id="actas" class="grilla">
//	<thead><tr><th>Acta N&ordm;</th>…</tr></thead>
//	<tbody>
//	<tr>
//	<td>TUC-26-004455</td>
//	<td>21/02/2026 10:45</td>                           dd/mm/yyyy hh:mm[:ss], zone-less
//	<td>Cruce de semáforo en rojo</td>
//	<td>Calle Córdoba 650,
//				San Miguel de Tucumán</td>               a line break inside the text
//	<td align="right" data-moneda="ARS">$ 87.300,00</td>
//	<td>En trámite</td>
//	<td><a class="boleta" href="boleta.asp?acta=TUC-26-004455" data-id="TUC-26-004455">Ver boleta</a></td>
//	</tr>
//	</tbody></table>
//
// The infraction number is read from the link's data-id; the currency is
// the amount cell's data-moneda, left out when the record has none. No
// records is a page with <p class="sin-resultados"> and no table; the
// Maintenance mode's page (200) has <div id="mantenimiento">. Characters
// windows-1252 lacks are written as numeric character references.
func htmlTableDialect() *dialect {
	return &dialect{
		byDomain: "/infracciones/consulta.asp?patente={domain}",
		byID:     "/infracciones/consulta.asp?cuit={id}",
		voucher:  "/infracciones/boleta.asp?acta={infraction_id}",
		cuitOnly: true,
		format:   formatHTML,
		win1252:  true,
		items:    "table#actas tbody tr",
		fields: []field{{"id", "a.boleta@data-id"}, {"date", "td:nth-child(2)"}, {"description", "td:nth-child(3)"},
			{"place", "td:nth-child(4)"}, {"amount", "td:nth-child(5)"}, {"currency", "td:nth-child(5)@data-moneda"},
			{"status", "td:nth-child(6)"}},
		statusText:     map[string]string{StatusUnpaid: "Impaga", StatusPaid: "Pagada", StatusInProcess: "En trámite"},
		upperStatusMap: true,
		answer:         htmlTableAnswer,
	}
}

// htmlNotFound and htmlUnavailable are the selectors of the "no records"
// and maintenance pages of the HTML dialects.
const (
	htmlNotFound    = "p.sin-resultados"
	htmlUnavailable = "div#mantenimiento"
)

func htmlTableAnswer(p *Portal, w http.ResponseWriter, _ *http.Request, _ kind, recs []Record) {
	var b strings.Builder
	b.WriteString("<div id=\"encabezado\"><h1>Dirección de Tránsito - Consulta de infracciones</h1></div>\n")
	if len(recs) == 0 {
		b.WriteString(`<p class="sin-resultados">No se registran infracciones para los datos consultados.</p>` + "\n")
		p.writeHTML(w, http.StatusOK, "Consulta de infracciones", b.String())
		return
	}
	e := html.EscapeString
	b.WriteString(`<table id="actas" class="grilla" border="1" cellspacing="0" cellpadding="2">` + "\n")
	b.WriteString("<thead>\n<tr><th>Acta N&ordm;</th><th>Fecha</th><th>Infracci&oacute;n</th><th>Lugar</th><th>Importe</th><th>Estado</th><th>Boleta</th></tr>\n</thead>\n<tbody>\n")
	for _, r := range recs {
		b.WriteString("<tr>\n")
		b.WriteString("<td>" + e(r.ID) + "</td>\n")
		b.WriteString("<td>" + civilTime(r.Date) + "</td>\n")
		b.WriteString("<td>" + e(r.Description) + "</td>\n")
		b.WriteString("<td>" + strings.ReplaceAll(e(r.Place), ", ", ",\n\t\t\t") + "</td>\n")
		b.WriteString(`<td align="right"`)
		if r.Currency != "" {
			b.WriteString(` data-moneda="` + e(r.Currency) + `"`)
		}
		b.WriteString(">$ " + argentineAmount(r.Amount) + "</td>\n")
		b.WriteString("<td>" + e(p.d.status(r.Status)) + "</td>\n")
		if r.ID != "" {
			b.WriteString(`<td><a class="boleta" href="` + e("boleta.asp?acta="+url.QueryEscape(r.ID)) + `" data-id="` + e(r.ID) + `">Ver boleta</a></td>` + "\n")
		} else {
			b.WriteString("<td>&nbsp;</td>\n")
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
	p.writeHTML(w, http.StatusOK, "Consulta de infracciones", b.String())
}
