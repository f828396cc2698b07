package portalsim

import (
	"net/http"
	"net/url"
	"strings"
)

// ShapeDetran is a Brazilian state traffic department's page (DETRAN,
// ASP classic) in windows-1252, declared by a meta element only (the
// Content-Type says text/html), in Portuguese:
//
//	GET /multas/consulta.asp?placa={domain}
//	GET /multas/consulta.asp?documento={id}           (CUIT or DNI)
//	GET /multas/boleto.asp?ait={infraction_id}
//
//	<div class="infracao">
//	<h3>Auto de Infração: <span class="ait">RP-2026-0142</span></h3>
//	<table class="dados">
//	<tr><th>Data/Hora</th><td class="dataHora">14/03/2026 às 09:12:00</td></tr>
//	<tr><th>Infração</th><td class="descricao">Exceso de velocidad</td></tr>
//	<tr><th>Local</th><td class="local">Av. Vélez Sarsfield 1200</td></tr>
//	<tr><th>Município</th><td class="municipio">Córdoba</td></tr>
//	<tr><th>Valor</th><td class="valor">R$ 185.000,00</td></tr>
//	<tr><th>Situação</th><td class="situacao">Em aberto</td></tr>
//	</table></div>
//
// Dates are "dd/mm/yyyy às hh:mm:ss"; amounts "R$ 1.234,56"; the place is
// in two cells, street and city (a Record's place cut at its last ", ");
// a missing street or city is "----", a missing amount (a written
// warning) "ISENTO". No records is <p class="semMultas">; the Maintenance
// page has <div id="manutencao">, the Captcha page a div.g-recaptcha, the
// Busy page an h1 "Excesso de consultas" (all 200).
const ShapeDetran Shape = "detran"

func detranDialect() *dialect {
	return &dialect{
		locale:     localeBR,
		byDomain:   "/multas/consulta.asp?placa={domain}",
		byID:       "/multas/consulta.asp?documento={id}",
		voucher:    "/multas/boleto.asp?ait={infraction_id}",
		format:     formatHTML,
		win1252:    true,
		lang:       "pt-BR",
		statusText: map[string]string{StatusUnpaid: "Em aberto", StatusPaid: "Paga", StatusInProcess: "Em recurso"},
		answer:     detranAnswer,
		maintenance: func(p *Portal, w http.ResponseWriter) {
			p.writeHTML(w, http.StatusOK, "Sistema em manutenção", `<div id="manutencao"><h1>Sistema em manutenção</h1><p>Tente novamente mais tarde.</p></div>`+"\n")
		},
		captcha: func(p *Portal, w http.ResponseWriter) {
			p.writeHTML(w, http.StatusOK, "Consulta de multas", detranHeading+`<form id="consulta" method="get" action="consulta.asp">
<label>Placa <input name="placa" type="text" maxlength="8"></label>
<div class="g-recaptcha" data-sitekey="6LcSimuladorPortalSimNoEsUnaClaveReal0000"></div>
<p class="erro">Confirme que você não é um robô.</p>
<button type="submit">Consultar</button>
</form>
`)
		},
		busy: func(p *Portal, w http.ResponseWriter) {
			p.busyPage(w, "Excesso de consultas", "Você excedeu o limite de consultas. Aguarde alguns minutos e tente novamente.")
		},
		mapping: detranMapping,
	}
}

const detranHeading = "<div id=\"cabecalho\"><h1>DETRAN - Consulta de Multas</h1></div>\n"

func detranAnswer(p *Portal, w http.ResponseWriter, _ *http.Request, _ kind, recs []Record) {
	var b strings.Builder
	b.WriteString(detranHeading)
	b.WriteString("<div id=\"resultado\">\n")
	if len(recs) == 0 {
		b.WriteString(`<p class="semMultas">Não constam multas para os dados informados.</p>` + "\n</div>\n")
		p.writeHTML(w, http.StatusOK, "Consulta de multas", b.String())
		return
	}
	row := func(label, class, value string) {
		b.WriteString("<tr><th>" + label + "</th><td class=\"" + class + "\">" + esc(value) + "</td></tr>\n")
	}
	for _, r := range recs {
		t := recordTime(r.Date)
		street, city := splitPlace(r.Place)
		amount := "ISENTO"
		if r.Amount != "" {
			amount = "R$ " + argentineAmount(r.Amount)
		}
		b.WriteString("<div class=\"infracao\">\n<h3>Auto de Infração: ")
		if r.ID != "" {
			b.WriteString(`<span class="ait">` + esc(r.ID) + `</span>`)
		}
		b.WriteString("</h3>\n<table class=\"dados\">\n")
		row("Data/Hora", "dataHora", t.Format("02/01/2006")+" às "+t.Format("15:04:05"))
		row("Infração", "descricao", r.Description)
		row("Local", "local", or(street, "----"))
		row("Município", "municipio", or(city, "----"))
		row("Valor", "valor", amount)
		row("Situação", "situacao", p.d.status(r.Status))
		b.WriteString("</table>\n")
		if r.ID != "" {
			b.WriteString(`<p><a class="boleto" href="` + esc("boleto.asp?ait="+url.QueryEscape(r.ID)) + `">Emitir boleto</a></p>` + "\n")
		}
		b.WriteString("</div>\n")
	}
	b.WriteString("</div>\n")
	p.writeHTML(w, http.StatusOK, "Consulta de multas", b.String())
}

func detranMapping(d *dialect, j Jurisdiction, base string) realSource {
	src := newRealSource(d, j, base)
	src.Response = realResponse{
		Format:     "html",
		Decimal:    ",",
		NullValues: []string{"----", "ISENTO"},
		Items:      "div.infracao",
		Fields: realFields{
			ID:          "span.ait",
			Date:        realField{Select: "td.dataHora", Layout: []string{"dd/MM/yyyy 'às' HH:mm:ss"}},
			Description: "td.descricao",
			Place:       realField{Select: []string{"td.local", "td.municipio"}, Join: ", "},
			Amount:      "td.valor",
			Status:      "td.situacao",
		},
		NotFound:    "p.semMultas",
		Unavailable: "div#manutencao",
		Errors:      []realRule{captchaRule(), busyRule("excesso de consultas", "120s")},
		StatusMap:   statusMap(d),
	}
	return src
}
