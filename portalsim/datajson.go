package portalsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"strings"
	"unicode/utf16"
)

// ShapeDataJSON is an Argentine municipal page (a PHP site) that hides
// each acta in the data-json attribute of a hidden input, as JSON escaped
// twice: by json_encode (non-ASCII as \uXXXX, "/" as "\/") and then for
// the attribute (&quot;). UTF-8, declared in Content-Type and meta:
//
//	GET /infracciones/consulta?dominio={domain}
//	GET /infracciones/consulta?documento={id}          (CUIT or DNI)
//	GET /infracciones/actas/{infraction_id}/cupon
//
//	<div id="resultado"><p class="cantidad">Actas encontradas: 1</p>
//	<form id="actas" method="post" action="/infracciones/pago">
//	<input type="hidden" name="actas[]" data-json="{&quot;numeroActa&quot;:&quot;RP-2026-0142&quot;,
//	 &quot;fechaActa&quot;:&quot;14\/03\/2026 AS 09:12&quot;,&quot;dominio&quot;:&quot;AB123CD&quot;,
//	 &quot;infraccion&quot;:&quot;Exceso de velocidad&quot;,&quot;lugar&quot;:&quot;Av. V\u00e9lez Sarsfield 1200, C\u00f3rdoba&quot;,
//	 &quot;montoActa&quot;:&quot;$ 185.000&quot;,&quot;estado&quot;:&quot;PENDIENTE DE PAGO&quot;}">
//	</form></div>
//
// Dates are "dd/mm/yyyy AS hh:mm" in Argentine time; amounts are
// "$ 185.000" (thousands grouped by '.', decimals after ',' only when
// there are some: "$ 1.234" is 1234); an absent place or amount is "-".
// No records is a page with <p class="sin-actas"> and no input. In the
// Captcha mode it answers the search form again, with its
// <div class="g-recaptcha">, and 200; in the Busy mode a 200 page whose h1
// says "Demasiadas consultas".
const ShapeDataJSON Shape = "datajson"

func dataJSONDialect() *dialect {
	return &dialect{
		locale:     localeAR,
		byDomain:   "/infracciones/consulta?dominio={domain}",
		byID:       "/infracciones/consulta?documento={id}",
		voucher:    "/infracciones/actas/{infraction_id}/cupon",
		format:     formatHTML,
		statusText: map[string]string{StatusUnpaid: "PENDIENTE DE PAGO", StatusPaid: "PAGADA", StatusInProcess: "EN TRAMITE"},
		answer:     dataJSONAnswer,
		captcha:    dataJSONCaptcha,
		mapping:    dataJSONMapping,
	}
}

// dataJSONActa is one acta of the data-json attribute, in the portal's
// order of members.
type dataJSONActa struct {
	NumeroActa string `json:"numeroActa,omitempty"`
	FechaActa  string `json:"fechaActa"`
	Dominio    string `json:"dominio"`
	Infraccion string `json:"infraccion"`
	Lugar      string `json:"lugar"`
	MontoActa  string `json:"montoActa"`
	Estado     string `json:"estado"`
}

const dataJSONHeading = "<div id=\"encabezado\"><h1>Juzgado de Faltas - Consulta de actas</h1></div>\n"

func dataJSONAnswer(p *Portal, w http.ResponseWriter, _ *http.Request, _ kind, recs []Record) {
	var b strings.Builder
	b.WriteString(dataJSONHeading)
	b.WriteString("<div id=\"resultado\">\n")
	if len(recs) == 0 {
		b.WriteString(`<p class="sin-actas">No se registran actas para los datos ingresados.</p>` + "\n</div>\n")
		p.writeHTML(w, http.StatusOK, "Consulta de actas", b.String())
		return
	}
	fmt.Fprintf(&b, "<p class=\"cantidad\">Actas encontradas: %d</p>\n", len(recs))
	b.WriteString(`<form id="actas" method="post" action="/infracciones/pago">` + "\n")
	for _, r := range recs {
		t := recordTime(r.Date)
		amount := "-"
		if r.Amount != "" {
			amount = "$ " + shortAmount(r.Amount)
		}
		a := dataJSONActa{
			NumeroActa: r.ID,
			FechaActa:  t.Format("02/01/2006") + " AS " + t.Format("15:04"),
			Dominio:    normalDomain(r.Domain),
			Infraccion: r.Description,
			Lugar:      or(r.Place, "-"),
			MontoActa:  amount,
			Estado:     p.d.status(r.Status),
		}
		b.WriteString(`<input type="hidden" name="actas[]" data-json="` + attrEscape(phpJSON(a)) + `">` + "\n")
	}
	b.WriteString("<button type=\"submit\">Pagar seleccionadas</button>\n</form>\n</div>\n")
	p.writeHTML(w, http.StatusOK, "Consulta de actas", b.String())
}

// dataJSONCaptcha is the search form again, with its reCAPTCHA widget.
func dataJSONCaptcha(p *Portal, w http.ResponseWriter) {
	p.writeHTML(w, http.StatusOK, "Consulta de actas", dataJSONHeading+`<form id="consulta" method="get" action="/infracciones/consulta">
<label>Dominio <input name="dominio" type="text" maxlength="10"></label>
<div class="g-recaptcha" data-sitekey="6LcSimuladorPortalSimNoEsUnaClaveReal0000"></div>
<p class="error">Por favor, verifique que no es un robot.</p>
<button type="submit">Consultar</button>
</form>
`)
}

func dataJSONMapping(d *dialect, j Jurisdiction, base string) realSource {
	src := newRealSource(d, j, base)
	src.Response = realResponse{
		Format:     "html",
		Decimal:    ",",
		NullValues: []string{"-"},
		Items:      []realItems{{Select: `input[name="actas[]"]@data-json`, Format: "json"}},
		Fields: realFields{
			ID:          "/numeroActa",
			Date:        realField{Select: "/fechaActa", Layout: []string{"dd/MM/yyyy 'AS' HH:mm"}},
			Description: "/infraccion",
			Place:       "/lugar",
			Amount:      "/montoActa",
			Status:      "/estado",
		},
		NotFound:    "p.sin-actas",
		Unavailable: htmlUnavailable,
		Errors:      []realRule{captchaRule(), busyRule("demasiadas consultas", "60s")},
		StatusMap:   statusMap(d),
	}
	return src
}

// phpJSON encodes v as PHP's json_encode does by default: "/" as "\/",
// every character beyond ASCII as \uXXXX (a surrogate pair beyond the
// BMP), and <, >, & as they are.
func phpJSON(v any) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Every value written here is one of this package's own types.
		panic("portalsim: " + err.Error())
	}
	var b strings.Builder
	for _, r := range strings.TrimSuffix(buf.String(), "\n") {
		switch {
		case r == '/':
			b.WriteString(`\/`)
		case r < 0x80:
			b.WriteRune(r)
		case r > 0xffff:
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
	}
	return b.String()
}

// attrEscape escapes s for a double-quoted attribute as PHP's
// htmlspecialchars(ENT_QUOTES) does: &quot; and &#039;, not Go's &#34;.
func attrEscape(s string) string {
	return strings.NewReplacer(`&`, "&amp;", `"`, "&quot;", `'`, "&#039;", `<`, "&lt;", `>`, "&gt;").Replace(s)
}

// esc escapes text for the shapes' markup.
func esc(s string) string { return html.EscapeString(s) }
