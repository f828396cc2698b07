package portalsim

import (
	"net/http"
	"net/url"
	"strings"
)

// ShapeColumns is an Argentine province's unified page of the actas its
// municipalities issue: one table per issuer, each as that issuer's system
// writes it, its columns named only by a header row whose spelling varies
// (Acta / Nro. de Acta, Fecha y Hora / Fecha-Hola, Infracción /
// Descripción, Lugar / Intersección, Importe / Monto), one issuer with a
// column the other lacks (Puntos) and one with a header cell spanning two
// (Boleta, colspan 2): a column's position differs from table to table.
// The bytes are UTF-8 but the meta, copied from an older template,
// declares ISO-8859-1, and the Content-Type has no charset:
//
//	GET /actas/consulta.php?dominio={domain}
//	GET /actas/consulta.php?cuit={id}                 (CUIT only; a DNI is a 400)
//	GET /actas/cupon.php?acta={infraction_id}
//
//	<h2 class="emisor">Municipalidad de Villa Allende</h2>
//	<table class="actas"><thead><tr><th>Acta</th><th>Fecha y Hora</th><th>Estado</th>
//	 <th colspan="2">Boleta</th><th>Infracción</th><th>Lugar</th><th>Importe</th></tr></thead>
//	<tbody><tr><td>RP-2026-0142</td><td>14/03/2026 09:12</td><td>Impaga</td>
//	 <td><a href="cupon.php?acta=RP-2026-0142">Ver</a></td><td><a href="…">Pagar</a></td>
//	 <td>Exceso de velocidad</td><td>Av. Vélez Sarsfield 1200, Córdoba</td><td>$ 185.000,00</td></tr></tbody></table>
//	<h2 class="emisor">Municipalidad de Río Ceballos</h2>
//	<table class="actas"><thead><tr><th>Nro. de Acta</th><th>Fecha-Hola</th><th>Puntos</th>
//	 <th>Descripción</th><th>Intersección</th><th>Monto</th><th>Estado</th></tr></thead> …
//
// Records alternate between the two issuers. Dates are dd/mm/yyyy hh:mm;
// amounts "$ 185.000,00"; a missing place or amount is "-". No records is
// <div class="sin-resultados"> and no table; the Busy page's h1 says
// "Demasiadas consultas".
const ShapeColumns Shape = "columns"

func columnsDialect() *dialect {
	return &dialect{
		locale:      localeCordoba,
		byDomain:    "/actas/consulta.php?dominio={domain}",
		byID:        "/actas/consulta.php?cuit={id}",
		voucher:     "/actas/cupon.php?acta={infraction_id}",
		cuitOnly:    true,
		format:      formatHTML,
		misdeclared: true,
		statusText:  map[string]string{StatusUnpaid: "Impaga", StatusPaid: "Pagada", StatusInProcess: "En trámite"},
		answer:      columnsAnswer,
		mapping:     columnsMapping,
	}
}

// columnsIssuer is one municipality's table: its header row and how it
// writes a record's cells.
type columnsIssuer struct {
	name   string
	header string
	cells  func(id, date, status, desc, place, amount string) []string
}

var columnsIssuers = []columnsIssuer{
	{
		name:   "Municipalidad de Villa Allende",
		header: `<th>Acta</th><th>Fecha y Hora</th><th>Estado</th><th colspan="2">Boleta</th><th>Infracción</th><th>Lugar</th><th>Importe</th>`,
		cells: func(id, date, status, desc, place, amount string) []string {
			ver, pagar := "&nbsp;", "&nbsp;"
			if id != "" {
				q := esc(url.QueryEscape(id))
				ver, pagar = `<a href="cupon.php?acta=`+q+`">Ver</a>`, `<a href="pago.php?acta=`+q+`">Pagar</a>`
			}
			return []string{esc(id), date, esc(status), ver, pagar, esc(desc), esc(place), amount}
		},
	},
	{
		name:   "Municipalidad de Río Ceballos",
		header: `<th>Nro. de Acta</th><th>Fecha-Hola</th><th>Puntos</th><th>Descripción</th><th>Intersección</th><th>Monto</th><th>Estado</th>`,
		cells: func(id, date, status, desc, place, amount string) []string {
			return []string{esc(id), date, "2", esc(desc), esc(place), amount, esc(status)}
		},
	},
}

func columnsAnswer(p *Portal, w http.ResponseWriter, _ *http.Request, _ kind, recs []Record) {
	var b strings.Builder
	b.WriteString("<h1>Consulta unificada de actas de tránsito</h1>\n")
	if len(recs) == 0 {
		b.WriteString(`<div class="sin-resultados">No se registran actas para los datos consultados.</div>` + "\n")
		p.writeHTML(w, http.StatusOK, "Consulta de actas", b.String())
		return
	}
	for i, is := range columnsIssuers {
		var rows strings.Builder
		for k := i; k < len(recs); k += len(columnsIssuers) {
			r := recs[k]
			amount := "-"
			if r.Amount != "" {
				amount = "$ " + argentineAmount(r.Amount)
			}
			rows.WriteString("<tr>")
			for _, c := range is.cells(r.ID, civilTime(r.Date), p.d.status(r.Status), r.Description, or(r.Place, "-"), amount) {
				rows.WriteString("<td>" + c + "</td>")
			}
			rows.WriteString("</tr>\n")
		}
		if rows.Len() == 0 {
			continue
		}
		b.WriteString(`<h2 class="emisor">` + esc(is.name) + "</h2>\n")
		b.WriteString(`<table class="actas" border="1">` + "\n<thead><tr>" + is.header + "</tr></thead>\n<tbody>\n")
		b.WriteString(rows.String())
		b.WriteString("</tbody>\n</table>\n")
	}
	p.writeHTML(w, http.StatusOK, "Consulta de actas", b.String())
}

func columnsMapping(d *dialect, j Jurisdiction, base string) realSource {
	src := newRealSource(d, j, base)
	col := func(names ...string) realField {
		if len(names) == 1 {
			return realField{Column: names[0]}
		}
		return realField{Column: names}
	}
	src.Response = realResponse{
		Format:     "html",
		Charset:    "utf-8",
		Decimal:    ",",
		NullValues: []string{"-"},
		Items:      "table.actas tbody tr",
		Header:     "thead th",
		Fields: realFields{
			ID:          col("Acta", "Nro. de Acta"),
			Date:        col("Fecha y Hora", "Fecha-Hola"),
			Description: col("Infracción", "Descripción"),
			Place:       col("Lugar", "Intersección"),
			Amount:      col("Importe", "Monto"),
			Status:      col("Estado"),
		},
		NotFound:    "div.sin-resultados",
		Unavailable: htmlUnavailable,
		Errors:      []realRule{busyRule("demasiadas consultas", "60s")},
		StatusMap:   statusMap(d),
	}
	return src
}
