package portalsim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Shape is the dialect a portal speaks: its paths, its method and request
// body, its format (JSON, SOAP/XML, HTML) and envelope, its key names, how
// it writes dates, amounts and statuses, how it says "no records", and what
// it needs first (an OAuth2 token, a session). AggregatorYAML renders the
// mapping of each shape.
type Shape string

// The shapes.
const (
	// ShapeActas is a city portal (shape A):
	//
	//	GET /api/v2/actas?dominio={domain}
	//	GET /api/v2/actas?cuit={id}                 (CUIT only; a DNI is a 400)
	//	GET /api/v2/actas/{infraction_id}/boleta
	//	{"resultado": {"cantidad": 1, "actas": [{"nro": "Q-10442",
	//	 "fecha": "2026-03-14T09:12:00", "detalle": "…", "lugar": "…",
	//	 "monto": "185000.00", "moneda": "ARS", "estado": "IMPAGA"}]}}
	//
	// Dates carry no offset (local time); amounts are decimal strings; no
	// records is 200 with an empty list.
	ShapeActas Shape = "actas"

	// ShapeInfracciones is a provincial portal (shape B):
	//
	//	GET /servicios/infracciones/consulta?patente={domain}
	//	GET /servicios/infracciones/consulta?documento={id}&tipo={id_kind}
	//	GET /servicios/infracciones/{infraction_id}/cupon
	//	{"estado": "OK", "datos": {"total": 1, "infracciones": [{
	//	 "acta": {"numero": "CBA-2026-004512", "fecha": "14/03/2026"},
	//	 "infraccion": {"descripcion": "…", "lugar": "…"},
	//	 "importe": 98765.435, "situacion": "Pendiente de pago"}]}}
	//
	// Dates are dd/mm/yyyy; amounts are JSON numbers; there is no currency;
	// no records is 404 {"estado": "SIN_RESULTADOS", …}.
	ShapeInfracciones Shape = "infracciones"

	// ShapeMultas is a newer REST portal (shape C):
	//
	//	GET /v1/vehiculos/{domain}/multas
	//	GET /v1/personas/{id}/multas
	//	GET /v1/multas/{infraction_id}/comprobante
	//	[{"id": "MZA-77812", "fecha_hora": "2026-02-03T18:45:00-03:00",
	//	  "motivo": "…", "ubicacion": {"direccion": "…"},
	//	  "importe": {"valor": "45000.00", "moneda": "ARS"}, "estado": "pendiente"}]
	//
	// The answer is a top-level array; dates are RFC 3339 with an offset;
	// no records is 200 [].
	ShapeMultas Shape = "multas"

	// The dialects of SPEC 8, whose mappings need its keys (format, body,
	// pagination, auth, …). Each is documented in its own file: soap.go,
	// htmltable.go, paged.go, oauth2.go, session.go. The shapes of SPEC 12
	// (RealShapes) are each documented at their constant, in their own
	// file: datajson.go, nested.go, arrays.go, detran.go, soapjson.go,
	// columns.go, envelope.go, errorflag.go, oauth2body.go.

	// ShapeSOAP is a SOAP 1.1 web service (XML, namespaced elements).
	ShapeSOAP Shape = "soap"
	// ShapeHTML is an old web page: an HTML table in windows-1252.
	ShapeHTML Shape = "html"
	// ShapePaged is a JSON API that answers in pages (Jurisdiction.Paging).
	ShapePaged Shape = "paged"
	// ShapeOAuth2 is a JSON API behind OAuth2 client credentials
	// (Jurisdiction.OAuth2).
	ShapeOAuth2 Shape = "oauth2"
	// ShapeSession is a web site that needs a session page first: a cookie
	// and an anti-forgery token (Jurisdiction.Session).
	ShapeSession Shape = "session"
)

// Shapes lists every shape in a stable order: SPEC 6's, SPEC 8's, then
// SPEC 12's (RealShapes).
func Shapes() []Shape {
	return append([]Shape{ShapeActas, ShapeInfracciones, ShapeMultas, ShapeSOAP, ShapeHTML, ShapePaged, ShapeOAuth2, ShapeSession}, RealShapes()...)
}

// LosslessShapes lists the shapes whose answers carry all of a Record:
// the same records served in each of them map, through AggregatorYAML, to
// the same infractions (id, date, description, place, amount, currency,
// status; status_raw is each portal's own word). ShapeInfracciones is left
// out: it has no time of day and no currency.
func LosslessShapes() []Shape {
	return []Shape{ShapeActas, ShapeMultas, ShapeSOAP, ShapeHTML, ShapePaged, ShapeOAuth2, ShapeSession}
}

// Valid reports whether s is a known shape.
func (s Shape) Valid() bool {
	_, err := dialectOf(s)
	return err == nil
}

// The statuses a Record may carry that each shape translates into its own
// words. Any other Record.Status is sent as it is (and is then unmapped).
const (
	StatusUnpaid    = "unpaid"
	StatusPaid      = "paid"
	StatusInProcess = "in_process"
)

// recordDateLayout is the layout of Record.Date: a civil time in Argentina.
const recordDateLayout = "2006-01-02T15:04:05"

// argentina is the offset of Argentine civil time (no daylight saving).
func argentina() *time.Location { return time.FixedZone("-03", -3*60*60) }

// field is one entry of response.fields: the aggregator's name and its
// selector inside one item (a JSON pointer, an XPath or a CSS selector).
type field struct{ name, sel string }

// format is how a dialect writes its answers.
type format int

const (
	formatJSON format = iota
	formatXML
	formatHTML
)

// dialect is everything that differs between shapes.
type dialect struct {
	// byDomain, byID and voucher are the path templates, in the aggregator's
	// syntax, that the portal serves and AggregatorYAML writes; the query
	// part names parameters (form fields when post is set). An empty
	// template is an operation the dialect serves its own way (extra).
	byDomain, byID, voucher string
	// post says that by_domain and by_id are form POSTs.
	post bool
	// cuitOnly says that by_id takes CUITs only (accepts: [cuit]).
	cuitOnly bool
	// items selects the list of records (a JSON pointer, an XPath, a CSS
	// selector of the item elements), and fields each value in one item.
	items  string
	fields []field
	// decimal is the separator of decimals in amounts written as text, as
	// the mapping must say (SPEC 12): "185000.000" is otherwise ambiguous.
	decimal string
	// statusText translates StatusUnpaid, StatusPaid and StatusInProcess.
	statusText map[string]string
	// upperStatusMap writes the status_map keys upper case, unlike the
	// portal's own spelling: the aggregator must compare them ignoring case.
	upperStatusMap bool
	// emptyNotFound says that a lookup without records is a 404.
	emptyNotFound bool
	// render builds the body of the answer to a lookup, for the JSON shapes
	// of SPEC 6.
	render func(d *dialect, recs []Record) any

	format format
	// win1252 says that the HTML pages are windows-1252, declared by a meta
	// element only; otherwise they are UTF-8, declared in Content-Type too.
	win1252 bool
	// answer, when set, writes the answer to a lookup instead of render. An
	// HTML dialect's answer leaves out a record's id when it is empty (the
	// Error mode's unreadable page).
	answer func(p *Portal, w http.ResponseWriter, r *http.Request, k kind, recs []Record)
	// extra registers the dialect's own routes (a SOAP endpoint, a token
	// endpoint, a session page).
	extra func(p *Portal)
	// gate, when set, admits a data call (true) or answers it with a
	// refusal (false): a missing token, no session.
	gate func(p *Portal, w http.ResponseWriter, r *http.Request, k kind) bool

	// lang is the language of the HTML pages ("es" when empty);
	// misdeclared says that they are UTF-8 with a meta declaring
	// ISO-8859-1 (and a Content-Type without a charset).
	lang        string
	misdeclared bool
	// maintenance, captcha and busy, when set, answer a lookup in the
	// Maintenance, Captcha and Busy modes instead of the format's page.
	maintenance, captcha, busy func(p *Portal, w http.ResponseWriter)
	// tokenBodyOnly says that the OAuth2 token endpoint takes the client's
	// credentials in the form only (RFC 6749 2.3.1), refusing HTTP Basic.
	tokenBodyOnly bool
	// locale is where a portal of SPEC 12 is (Shape.Locale).
	locale Locale
	// mapping, for the shapes of SPEC 12, is the source's entry in SPEC
	// 12's keys (AggregatorYAML writes it instead of the SPEC 6 or 8 one).
	mapping func(d *dialect, j Jurisdiction, base string) realSource
}

func dialectOf(s Shape) (*dialect, error) {
	switch s {
	case ShapeActas:
		return &dialect{
			byDomain: "/api/v2/actas?dominio={domain}",
			byID:     "/api/v2/actas?cuit={id}",
			voucher:  "/api/v2/actas/{infraction_id}/boleta",
			cuitOnly: true,
			items:    "/resultado/actas",
			fields: []field{{"id", "/nro"}, {"date", "/fecha"}, {"description", "/detalle"},
				{"place", "/lugar"}, {"amount", "/monto"}, {"currency", "/moneda"}, {"status", "/estado"}},
			decimal:    ".",
			statusText: map[string]string{StatusUnpaid: "IMPAGA", StatusPaid: "PAGADA", StatusInProcess: "EN GESTION"},
			render:     renderActas,
		}, nil
	case ShapeInfracciones:
		return &dialect{
			byDomain: "/servicios/infracciones/consulta?patente={domain}",
			byID:     "/servicios/infracciones/consulta?documento={id}&tipo={id_kind}",
			voucher:  "/servicios/infracciones/{infraction_id}/cupon",
			items:    "/datos/infracciones",
			fields: []field{{"id", "/acta/numero"}, {"date", "/acta/fecha"},
				{"description", "/infraccion/descripcion"}, {"place", "/infraccion/lugar"},
				{"amount", "/importe"}, {"status", "/situacion"}},
			statusText:     map[string]string{StatusUnpaid: "Pendiente de pago", StatusPaid: "Cancelada", StatusInProcess: "En trámite"},
			upperStatusMap: true,
			emptyNotFound:  true,
			render:         renderInfracciones,
		}, nil
	case ShapeMultas:
		return &dialect{
			byDomain: "/v1/vehiculos/{domain}/multas",
			byID:     "/v1/personas/{id}/multas",
			voucher:  "/v1/multas/{infraction_id}/comprobante",
			items:    "",
			fields: []field{{"id", "/id"}, {"date", "/fecha_hora"}, {"description", "/motivo"},
				{"place", "/ubicacion/direccion"}, {"amount", "/importe/valor"},
				{"currency", "/importe/moneda"}, {"status", "/estado"}},
			decimal:    ".",
			statusText: map[string]string{StatusUnpaid: "pendiente", StatusPaid: "pagada", StatusInProcess: "en_revision"},
			render:     renderMultas,
		}, nil
	case ShapeSOAP:
		return soapDialect(), nil
	case ShapeHTML:
		return htmlTableDialect(), nil
	case ShapePaged:
		return pagedDialect(), nil
	case ShapeOAuth2:
		return oauth2Dialect(), nil
	case ShapeSession:
		return sessionDialect(), nil
	case ShapeDataJSON:
		return dataJSONDialect(), nil
	case ShapeNested:
		return nestedDialect(), nil
	case ShapeArrays:
		return arraysDialect(), nil
	case ShapeDetran:
		return detranDialect(), nil
	case ShapeSOAPJSON:
		return soapJSONDialect(), nil
	case ShapeColumns:
		return columnsDialect(), nil
	case ShapeEnvelope:
		return envelopeDialect(), nil
	case ShapeErrorFlag:
		return errorFlagDialect(), nil
	case ShapeOAuth2Body:
		return oauth2BodyDialect(), nil
	}
	names := make([]string, 0, len(Shapes()))
	for _, s := range Shapes() {
		names = append(names, string(s))
	}
	return nil, fmt.Errorf("unknown shape %q (want one of %s)", s, strings.Join(names, ", "))
}

// status is the portal's word for a record's status.
func (d *dialect) status(s string) string {
	if t, ok := d.statusText[s]; ok {
		return t
	}
	return s
}

// recordTime reads Record.Date; records are validated by New.
func recordTime(s string) time.Time {
	t, _ := time.ParseInLocation(recordDateLayout, s, argentina())
	return t
}

type acta struct {
	Nro     string `json:"nro"`
	Fecha   string `json:"fecha"`
	Detalle string `json:"detalle"`
	Lugar   string `json:"lugar"`
	Monto   string `json:"monto"`
	Moneda  string `json:"moneda,omitempty"`
	Estado  string `json:"estado"`
}

type actasAnswer struct {
	Resultado struct {
		Cantidad int    `json:"cantidad"`
		Actas    []acta `json:"actas"`
	} `json:"resultado"`
}

func renderActas(d *dialect, recs []Record) any {
	var a actasAnswer
	a.Resultado.Cantidad = len(recs)
	a.Resultado.Actas = make([]acta, 0, len(recs))
	for _, r := range recs {
		a.Resultado.Actas = append(a.Resultado.Actas, acta{
			Nro:     r.ID,
			Fecha:   recordTime(r.Date).Format(recordDateLayout),
			Detalle: r.Description,
			Lugar:   r.Place,
			Monto:   r.Amount,
			Moneda:  r.Currency,
			Estado:  d.status(r.Status),
		})
	}
	return a
}

type infraccion struct {
	Acta struct {
		Numero string `json:"numero"`
		Fecha  string `json:"fecha"`
	} `json:"acta"`
	Infraccion struct {
		Descripcion string `json:"descripcion"`
		Lugar       string `json:"lugar"`
	} `json:"infraccion"`
	Importe   json.Number `json:"importe"`
	Situacion string      `json:"situacion"`
}

type infraccionesAnswer struct {
	Estado string `json:"estado"`
	Datos  struct {
		Total        int          `json:"total"`
		Infracciones []infraccion `json:"infracciones"`
	} `json:"datos"`
}

// infraccionesEmpty is the 404 body of ShapeInfracciones for no records.
type infraccionesEmpty struct {
	Estado  string `json:"estado"`
	Mensaje string `json:"mensaje"`
}

func renderInfracciones(d *dialect, recs []Record) any {
	if len(recs) == 0 {
		return infraccionesEmpty{Estado: "SIN_RESULTADOS", Mensaje: "No se registran infracciones para la consulta"}
	}
	a := infraccionesAnswer{Estado: "OK"}
	a.Datos.Total = len(recs)
	a.Datos.Infracciones = make([]infraccion, 0, len(recs))
	for _, r := range recs {
		var i infraccion
		i.Acta.Numero = r.ID
		i.Acta.Fecha = recordTime(r.Date).Format("02/01/2006")
		i.Infraccion.Descripcion = r.Description
		i.Infraccion.Lugar = r.Place
		i.Importe = json.Number(trimZeros(r.Amount))
		i.Situacion = d.status(r.Status)
		a.Datos.Infracciones = append(a.Datos.Infracciones, i)
	}
	return a
}

// trimZeros writes a decimal the way a JSON number usually looks:
// "185000.00" → "185000", "92450.50" → "92450.5".
func trimZeros(amount string) string {
	if !strings.Contains(amount, ".") {
		return amount
	}
	return strings.TrimSuffix(strings.TrimRight(amount, "0"), ".")
}

type multa struct {
	ID        string `json:"id"`
	FechaHora string `json:"fecha_hora"`
	Motivo    string `json:"motivo"`
	Ubicacion struct {
		Direccion string `json:"direccion"`
	} `json:"ubicacion"`
	Importe struct {
		Valor  string `json:"valor"`
		Moneda string `json:"moneda,omitempty"`
	} `json:"importe"`
	Estado string `json:"estado"`
}

func renderMultas(d *dialect, recs []Record) any {
	ms := make([]multa, 0, len(recs))
	for _, r := range recs {
		m := multa{ID: r.ID, FechaHora: recordTime(r.Date).Format(time.RFC3339), Motivo: r.Description, Estado: d.status(r.Status)}
		m.Ubicacion.Direccion = r.Place
		m.Importe.Valor = r.Amount
		m.Importe.Moneda = r.Currency
		ms = append(ms, m)
	}
	return ms
}
