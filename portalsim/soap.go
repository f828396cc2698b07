package portalsim

import (
	"encoding/xml"
	"errors"
	"mime"
	"net/http"
	"strings"
)

// ShapeSOAP, a SOAP 1.1 web service (JAX-WS style):
//
//	POST /ws/MultasService
//	Content-Type: text/xml; charset=utf-8
//	SOAPAction: "urn:multas#ConsultarPorDominio"
//	<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:m="urn:multas">
//	 <soapenv:Body><m:ConsultarPorDominio><m:dominio>AB123CD</m:dominio></m:ConsultarPorDominio></soapenv:Body>
//	</soapenv:Envelope>
//
// or <m:ConsultarPorDocumento><m:numero>{id}</m:numero><m:tipo>{id_kind}</m:tipo>
// (tipo optional) with SOAPAction "urn:multas#ConsultarPorDocumento". The
// SOAPAction header must be present; when not empty it must name the body's
// operation. The answer binds the namespaces to other prefixes than the
// request's (S, ns2), as JAX-WS does:
//
//	<S:Envelope xmlns:S="http://schemas.xmlsoap.org/soap/envelope/"><S:Body>
//	 <ns2:ConsultarPorDominioResponse xmlns:ns2="urn:multas"><ns2:resultado>
//	  <ns2:cantidad>1</ns2:cantidad>
//	  <ns2:actas><ns2:acta><ns2:numero>NQN-1</ns2:numero>
//	   <ns2:fecha>2026-03-05T08:20:00</ns2:fecha><ns2:descripcion>…</ns2:descripcion>
//	   <ns2:lugar>…</ns2:lugar><ns2:importe moneda="ARS">156000.00</ns2:importe>
//	   <ns2:estado>IMPAGO</ns2:estado></ns2:acta></ns2:actas>
//	 </ns2:resultado></ns2:ConsultarPorDominioResponse>
//	</S:Body></S:Envelope>
//
// Dates are zone-less xs:dateTime; the currency is an attribute, left out
// when the record has none; no records is an empty ns2:actas. A malformed
// request (not XML, not an envelope, an unknown operation, a missing
// parameter, a bad plate or document) is a SOAP Fault, faultcode S:Client,
// with HTTP 500 as SOAP 1.1 requires; a wrong Content-Type is 415, a GET
// 405, both with a Fault too. Vouchers are a plain download:
//
//	GET /ws/boletas/{infraction_id}
const (
	soapEnvNS        = "http://schemas.xmlsoap.org/soap/envelope/"
	multasNS         = "urn:multas"
	soapPath         = "/ws/MultasService"
	soapActionPrefix = "urn:multas#"
	soapByDomain     = "ConsultarPorDominio"
	soapByID         = "ConsultarPorDocumento"
)

func soapDialect() *dialect {
	return &dialect{
		voucher: "/ws/boletas/{infraction_id}",
		format:  formatXML,
		decimal: ".",
		items:   "/s:Envelope/s:Body/*/m:resultado/m:actas/m:acta",
		fields: []field{{"id", "m:numero"}, {"date", "m:fecha"}, {"description", "m:descripcion"},
			{"place", "m:lugar"}, {"amount", "m:importe"}, {"currency", "m:importe/@moneda"}, {"status", "m:estado"}},
		statusText: map[string]string{StatusUnpaid: "IMPAGO", StatusPaid: "PAGADO", StatusInProcess: "EN_RECURSO"},
		answer:     soapAnswer,
		extra: func(p *Portal) {
			p.mux.HandleFunc(soapPath, p.soapHandler(multasService))
		},
	}
}

// soapRequestEnvelope is what the portal reads of a request.
type soapRequestEnvelope struct {
	XMLName xml.Name `xml:"http://schemas.xmlsoap.org/soap/envelope/ Envelope"`
	Body    *struct {
		Ops []struct {
			XMLName xml.Name
			Params  []struct {
				XMLName xml.Name
				Value   string `xml:",chardata"`
			} `xml:",any"`
		} `xml:",any"`
	} `xml:"http://schemas.xmlsoap.org/soap/envelope/ Body"`
}

// maxSOAPBody bounds the body of a SOAP request.
const maxSOAPBody = 64 << 10

// errSOAP is a request the service cannot read; status is its HTTP status.
type errSOAP struct {
	status int
	msg    string
}

func (e *errSOAP) Error() string { return e.msg }

// soapService is what a SOAP 1.1 service reads of its requests: the
// namespace of its operations and parameters, the prefix of its
// SOAPActions, the names of its two lookups and of their parameters
// (idKind "" when by_id takes none).
type soapService struct {
	ns, actionPrefix   string
	byDomain, byID     string
	domain, id, idKind string
}

// multasService is ShapeSOAP's service.
var multasService = soapService{ns: multasNS, actionPrefix: soapActionPrefix,
	byDomain: soapByDomain, byID: soapByID, domain: "dominio", id: "numero", idKind: "tipo"}

// soapHandler serves the SOAP endpoint of svc.
func (p *Portal) soapHandler(svc soapService) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		k, vals, err := svc.read(w, r)
		if err != nil {
			var e *errSOAP
			errors.As(err, &e)
			p.call(w, r, kindOther, func() {
				if e.status == http.StatusMethodNotAllowed {
					w.Header().Set("Allow", http.MethodPost)
				}
				p.fail(w, e.status, e.msg)
			})
			return
		}
		p.serve(w, r, k, vals)
	}
}

// read reads the operation of a SOAP request and its parameters.
func (svc soapService) read(w http.ResponseWriter, r *http.Request) (kind, map[string]string, error) {
	if r.Method != http.MethodPost {
		return kindOther, nil, &errSOAP{http.StatusMethodNotAllowed, "el servicio se consulta por POST"}
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "text/xml" {
		return kindOther, nil, &errSOAP{http.StatusUnsupportedMediaType, "se espera Content-Type text/xml (SOAP 1.1)"}
	}
	actions, ok := r.Header["Soapaction"]
	if !ok || len(actions) != 1 {
		return kindOther, nil, &errSOAP{http.StatusBadRequest, "falta el encabezado SOAPAction"}
	}
	dec := xml.NewDecoder(http.MaxBytesReader(w, r.Body, maxSOAPBody))
	var env soapRequestEnvelope
	if err := dec.Decode(&env); err != nil {
		return kindOther, nil, &errSOAP{http.StatusBadRequest, "sobre SOAP ilegible"}
	}
	if env.Body == nil || len(env.Body.Ops) != 1 {
		return kindOther, nil, &errSOAP{http.StatusBadRequest, "el cuerpo SOAP debe tener una operación"}
	}
	op := env.Body.Ops[0]
	if op.XMLName.Space != svc.ns || (op.XMLName.Local != svc.byDomain && op.XMLName.Local != svc.byID) {
		return kindOther, nil, &errSOAP{http.StatusBadRequest, "operación desconocida"}
	}
	if action := strings.Trim(actions[0], `"`); action != "" && action != svc.actionPrefix+op.XMLName.Local {
		return kindOther, nil, &errSOAP{http.StatusBadRequest, "SOAPAction no coincide con la operación"}
	}
	params := make(map[string]string)
	for _, prm := range op.Params {
		if prm.XMLName.Space == svc.ns || prm.XMLName.Space == "" {
			params[prm.XMLName.Local] = strings.TrimSpace(prm.Value)
		}
	}
	if op.XMLName.Local == svc.byDomain {
		if params[svc.domain] == "" {
			return kindOther, nil, &errSOAP{http.StatusBadRequest, "falta el parámetro " + svc.domain}
		}
		return kindByDomain, map[string]string{"domain": params[svc.domain]}, nil
	}
	if params[svc.id] == "" {
		return kindOther, nil, &errSOAP{http.StatusBadRequest, "falta el parámetro " + svc.id}
	}
	vals := map[string]string{"id": params[svc.id]}
	if svc.idKind != "" {
		vals["id_kind"] = params[svc.idKind]
	}
	return kindByID, vals, nil
}

// soapRequestBody is the envelope of a request for operation op with its
// parameters (name, value); values are escaped, so a template's
// placeholders ("{domain}") may stand in for them.
func soapRequestBody(op string, params [][2]string) string {
	var b strings.Builder
	b.WriteString(`<soapenv:Envelope xmlns:soapenv="` + soapEnvNS + `" xmlns:m="` + multasNS + `">`)
	b.WriteString(`<soapenv:Header/><soapenv:Body><m:` + op + `>`)
	for _, kv := range params {
		b.WriteString("<m:" + kv[0] + ">" + xmlText(kv[1]) + "</m:" + kv[0] + ">")
	}
	b.WriteString(`</m:` + op + `></soapenv:Body></soapenv:Envelope>`)
	return b.String()
}

func soapAnswer(p *Portal, w http.ResponseWriter, _ *http.Request, k kind, recs []Record) {
	op := soapByDomain + "Response"
	if k == kindByID {
		op = soapByID + "Response"
	}
	var b strings.Builder
	b.WriteString(xml.Header)
	b.WriteString(`<S:Envelope xmlns:S="` + soapEnvNS + `"><S:Body>`)
	b.WriteString(`<ns2:` + op + ` xmlns:ns2="` + multasNS + `"><ns2:resultado>`)
	b.WriteString("<ns2:cantidad>" + itoa(len(recs)) + "</ns2:cantidad><ns2:actas>")
	elem := func(name, value string) { b.WriteString("<ns2:" + name + ">" + xmlText(value) + "</ns2:" + name + ">") }
	for _, r := range recs {
		b.WriteString("<ns2:acta>")
		if r.ID != "" {
			elem("numero", r.ID)
		}
		elem("fecha", recordTime(r.Date).Format(recordDateLayout))
		elem("descripcion", r.Description)
		elem("lugar", r.Place)
		if r.Currency != "" {
			b.WriteString(`<ns2:importe moneda="` + xmlText(r.Currency) + `">` + xmlText(r.Amount) + "</ns2:importe>")
		} else {
			elem("importe", r.Amount)
		}
		elem("estado", p.d.status(r.Status))
		b.WriteString("</ns2:acta>")
	}
	b.WriteString("</ns2:actas></ns2:resultado></ns2:" + op + "></S:Body></S:Envelope>")
	writeBody(w, http.StatusOK, soapContentType, b.String())
}

// writeSOAPFault answers a SOAP 1.1 Fault: faultcode S:Client for a
// request the service refuses, S:Server otherwise. A 400 is sent as 500,
// the status SOAP 1.1 gives every Fault; other statuses (404, 405, 415,
// 429, 503, a forced status) are kept.
func writeSOAPFault(w http.ResponseWriter, status int, msg string) {
	code := "S:Server"
	if status < 500 {
		code = "S:Client"
	}
	if status == http.StatusBadRequest {
		status = http.StatusInternalServerError
	}
	writeBody(w, status, soapContentType, xml.Header+`<S:Envelope xmlns:S="`+soapEnvNS+`"><S:Body><S:Fault>`+
		"<faultcode>"+code+"</faultcode><faultstring>"+xmlText(msg)+"</faultstring>"+
		"</S:Fault></S:Body></S:Envelope>")
}
