package portalsim

import (
	"bytes"
	"encoding/xml"
	"html"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/text/encoding/charmap"
)

// fail answers status with msg in the dialect's format: a JSON error, a
// SOAP Fault, an HTML error page.
func (p *Portal) fail(w http.ResponseWriter, status int, msg string) {
	switch p.d.format {
	case formatXML:
		writeSOAPFault(w, status, msg)
	case formatHTML:
		p.writeHTML(w, status, http.StatusText(status),
			"<h1>"+strconv.Itoa(status)+" - "+html.EscapeString(http.StatusText(status))+"</h1>\n<p class=\"error\">"+html.EscapeString(msg)+"</p>\n")
	default:
		writeJSON(w, status, errorBody(msg))
	}
}

// garbage answers 200 with a body the aggregator cannot read: JSON or XML
// cut short, or an HTML page whose one item lacks its infraction number.
func (p *Portal) garbage(w http.ResponseWriter, r *http.Request) {
	switch p.d.format {
	case formatXML:
		writeBody(w, http.StatusOK, soapContentType,
			xml.Header+`<S:Envelope xmlns:S="`+soapEnvNS+`"><S:Body><ns2:ConsultarPorDominioResponse xmlns:ns2="`+multasNS+`"><ns2:resultado><ns2:act`)
	case formatHTML:
		p.d.answer(p, w, r, kindByDomain, []Record{{
			Date: "2026-01-02T03:04:00", Description: "Acta sin número", Amount: "1.00", Status: StatusUnpaid,
		}})
	default:
		writeBody(w, http.StatusOK, jsonContentType, `{"estado":"OK","datos":[{"id":"`)
	}
}

// maintenanceText is what every maintenance page says.
const maintenanceText = "Sistema en mantenimiento. Intente nuevamente más tarde."

// maintenance answers 200 with the dialect's maintenance page.
func (p *Portal) maintenance(w http.ResponseWriter) {
	switch p.d.format {
	case formatXML:
		writeBody(w, http.StatusOK, soapContentType,
			xml.Header+`<S:Envelope xmlns:S="`+soapEnvNS+`"><S:Body><ns2:mantenimiento xmlns:ns2="`+multasNS+`"><ns2:mensaje>`+
				xmlText(maintenanceText)+`</ns2:mensaje></ns2:mantenimiento></S:Body></S:Envelope>`)
	case formatHTML:
		p.writeHTML(w, http.StatusOK, "Sistema en mantenimiento",
			`<div id="mantenimiento"><h1>Sistema en mantenimiento</h1><p>`+html.EscapeString(maintenanceText)+"</p></div>\n")
	default:
		var m struct {
			Mantenimiento struct {
				Mensaje string `json:"mensaje"`
			} `json:"mantenimiento"`
		}
		m.Mantenimiento.Mensaje = maintenanceText
		writeJSON(w, http.StatusOK, m)
	}
}

// refusal answers a lookup in the Maintenance, Captcha or Busy mode with
// the dialect's own page, or else its format's.
func (p *Portal) refusal(w http.ResponseWriter, m Mode) {
	var own func(*Portal, http.ResponseWriter)
	switch m {
	case Maintenance:
		own = p.d.maintenance
	case Captcha:
		own = p.d.captcha
	case Busy:
		own = p.d.busy
	}
	switch {
	case own != nil:
		own(p, w)
	case m == Maintenance:
		p.maintenance(w)
	case m == Captcha:
		p.fail(w, http.StatusForbidden, captchaText)
	case p.d.format == formatHTML:
		p.busyPage(w, busyTitle, busyText)
	default:
		p.fail(w, http.StatusTooManyRequests, busyTitle)
	}
}

// What the Captcha and Busy pages say, unless a dialect says it its own way.
const (
	captchaText = "Debe completar el captcha"
	busyTitle   = "Demasiadas consultas"
	busyText    = "Realizó demasiadas consultas en poco tiempo. Espere unos minutos e intente nuevamente."
)

// busyPage answers 200 with an HTML page whose h1 is title: a rate limit
// said in the body only, without Retry-After.
func (p *Portal) busyPage(w http.ResponseWriter, title, text string) {
	p.writeHTML(w, http.StatusOK, title,
		"<h1>"+html.EscapeString(title)+"</h1>\n<p>"+html.EscapeString(text)+"</p>\n")
}

// padding is how the Oversized mode fills a valid body: head, then item
// over and over, then tail.
type padding struct{ contentType, head, item, tail string }

func (d *dialect) padding() padding {
	x := strings.Repeat("x", 1000)
	switch d.format {
	case formatXML:
		return padding{soapContentType,
			xml.Header + `<S:Envelope xmlns:S="` + soapEnvNS + `"><S:Body><ns2:relleno xmlns:ns2="` + multasNS + `">`,
			"<ns2:x>" + x + "</ns2:x>", "</ns2:relleno></S:Body></S:Envelope>"}
	case formatHTML:
		return padding{d.htmlContentType(), "<!DOCTYPE html>\n<html><head><title>relleno</title></head><body><table id=\"relleno\"><tbody>\n",
			"<tr><td>" + x + "</td></tr>\n", "</tbody></table></body></html>\n"}
	}
	return padding{jsonContentType, `{"estado":"OK","datos":[`, `{"relleno":"` + x + `"},`, `{}]}`}
}

const (
	jsonContentType = "application/json; charset=utf-8"
	soapContentType = "text/xml; charset=utf-8"
)

// writeBody answers status with body as it is.
func writeBody(w http.ResponseWriter, status int, contentType, body string) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", itoa(len(body)))
	w.WriteHeader(status)
	w.Write([]byte(body))
}

// htmlContentType is the Content-Type of the dialect's HTML pages: with
// a charset only when the pages are UTF-8 and say so.
func (d *dialect) htmlContentType() string {
	if d.win1252 || d.misdeclared {
		return "text/html"
	}
	return "text/html; charset=utf-8"
}

// writeHTML answers status with an HTML page of title and body (markup) in
// the dialect's charset. A windows-1252 page declares its charset in a meta
// element only, as old sites do: Content-Type says text/html alone. A
// misdeclared page is UTF-8 whose meta says ISO-8859-1, Content-Type again
// without a charset: a template copied from an older site.
func (p *Portal) writeHTML(w http.ResponseWriter, status int, title, body string) {
	var b strings.Builder
	contentType := p.d.htmlContentType()
	lang := p.d.lang
	if lang == "" && !p.d.win1252 { // the old pages of ShapeHTML name none
		lang = "es"
	}
	htmlTag := "<html>\n<head>\n"
	if lang != "" {
		htmlTag = `<html lang="` + lang + `">` + "\n<head>\n"
	}
	switch {
	case p.d.win1252:
		b.WriteString(`<!DOCTYPE HTML PUBLIC "-//W3C//DTD HTML 4.01 Transitional//EN" "http://www.w3.org/TR/html4/loose.dtd">` + "\n" + htmlTag)
		b.WriteString(`<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">` + "\n")
	case p.d.misdeclared:
		b.WriteString("<!DOCTYPE html>\n" + htmlTag)
		b.WriteString(`<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1">` + "\n")
	default:
		b.WriteString("<!DOCTYPE html>\n" + htmlTag + "<meta charset=\"utf-8\">\n")
	}
	b.WriteString("<title>" + html.EscapeString(title+" - "+p.j.Name) + "</title>\n</head>\n<body>\n")
	b.WriteString(body)
	b.WriteString("</body>\n</html>\n")
	page := []byte(b.String())
	if p.d.win1252 {
		page = encodeWindows1252(b.String())
	}
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", itoa(len(page)))
	w.WriteHeader(status)
	w.Write(page)
}

// encodeWindows1252 encodes an HTML document in windows-1252; a character
// the charset lacks becomes a numeric character reference, as a browser
// writes it.
func encodeWindows1252(s string) []byte {
	var b bytes.Buffer
	b.Grow(len(s))
	for _, r := range s {
		if c, ok := charmap.Windows1252.EncodeRune(r); ok {
			b.WriteByte(c)
			continue
		}
		b.WriteString("&#" + strconv.Itoa(int(r)) + ";")
	}
	return b.Bytes()
}

// xmlText escapes s for XML character data or an attribute value.
func xmlText(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// civilTime writes a record's date as dd/mm/yyyy hh:mm, with the seconds
// only when there are some.
func civilTime(date string) string {
	t := recordTime(date)
	if t.Second() != 0 {
		return t.Format("02/01/2006 15:04:05")
	}
	return t.Format("02/01/2006 15:04")
}

// argentineAmount writes a decimal amount as people write money in
// Argentina: "185.000,00" (thousands grouped by '.', ',' before at least
// two decimals).
func argentineAmount(amount string) string {
	whole, frac, _ := strings.Cut(amount, ".")
	for len(frac) < 2 {
		frac += "0"
	}
	var g strings.Builder
	for i, c := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			g.WriteByte('.')
		}
		g.WriteRune(c)
	}
	return g.String() + "," + frac
}
