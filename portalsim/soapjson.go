package portalsim

import (
	"encoding/json"
	"encoding/xml"
	"net/http"
	"strings"
)

// ShapeSOAPJSON is a Brazilian state's ASP.NET web service (ASMX, SOAP
// 1.1) whose result element holds JSON as text, in UTF-8:
//
//	POST /WebServices/ConsultaMultas.asmx
//	Content-Type: text/xml; charset=utf-8
//	SOAPAction: "http://tempuri.org/ConsultarMultasPorPlaca"
//	<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/"><soap:Body>
//	 <ConsultarMultasPorPlaca xmlns="http://tempuri.org/"><placa>AB123CD</placa></ConsultarMultasPorPlaca>
//	</soap:Body></soap:Envelope>
//
// or ConsultarMultasPorDocumento with <documento>{id}</documento> (CUIT
// or DNI). Vouchers are a plain download:
//
//	GET /WebServices/Boleto.ashx?ait={infraction_id}
//
// The answer:
//
//	<soap:Envelope …><soap:Body><ConsultarMultasPorPlacaResponse xmlns="http://tempuri.org/">
//	 <ConsultarMultasPorPlacaResult>{"sucesso":true,"mensagem":null,"multas":[
//	  {"numeroAuto":"RP-2026-0142","dataInfracao":"14/03/2026","horaInfracao":"09:12",
//	   "descricao":"Exceso de velocidad","local":"Av. Vélez Sarsfield 1200, Córdoba",
//	   "valor":"R$ 185.000,00","situacao":"EM ABERTO"}]}</ConsultarMultasPorPlacaResult>
//	</ConsultarMultasPorPlacaResponse></soap:Body></soap:Envelope>
//
// The date and the time of day are two members; amounts are "R$ 1.234,56";
// a missing place is "----", a missing amount (a written warning)
// "ISENTO". No records is "multas": []. The Maintenance mode answers 200
// with {"sucesso":false,"manutencao":true,…} in the result element. A
// request the service cannot read is a SOAP Fault, as ShapeSOAP's.
const ShapeSOAPJSON Shape = "soapjson"

const (
	tempuriNS      = "http://tempuri.org/"
	asmxPath       = "/WebServices/ConsultaMultas.asmx"
	asmxByDomain   = "ConsultarMultasPorPlaca"
	asmxByID       = "ConsultarMultasPorDocumento"
	asmxVoucher    = "/WebServices/Boleto.ashx?ait={infraction_id}"
	asmxMaintained = "Sistema em manutenção. Tente novamente mais tarde."
)

var asmxService = soapService{ns: tempuriNS, actionPrefix: tempuriNS,
	byDomain: asmxByDomain, byID: asmxByID, domain: "placa", id: "documento"}

func soapJSONDialect() *dialect {
	return &dialect{
		locale:     localeBR,
		voucher:    asmxVoucher,
		format:     formatXML,
		statusText: map[string]string{StatusUnpaid: "EM ABERTO", StatusPaid: "PAGA", StatusInProcess: "EM RECURSO"},
		answer: func(p *Portal, w http.ResponseWriter, _ *http.Request, k kind, recs []Record) {
			op := asmxByDomain
			if k == kindByID {
				op = asmxByID
			}
			res := soapJSONResult{Sucesso: true, Multas: make([]soapJSONMulta, 0, len(recs))}
			for _, r := range recs {
				t := recordTime(r.Date)
				amount := "ISENTO"
				if r.Amount != "" {
					amount = "R$ " + argentineAmount(r.Amount)
				}
				res.Multas = append(res.Multas, soapJSONMulta{
					NumeroAuto: r.ID, DataInfracao: t.Format("02/01/2006"), HoraInfracao: t.Format("15:04"),
					Descricao: r.Description, Local: or(r.Place, "----"), Valor: amount, Situacao: p.d.status(r.Status),
				})
			}
			writeASMX(w, op, res)
		},
		maintenance: func(_ *Portal, w http.ResponseWriter) {
			msg := asmxMaintained
			writeASMX(w, asmxByDomain, soapJSONResult{Manutencao: true, Mensagem: &msg, Multas: []soapJSONMulta{}})
		},
		extra: func(p *Portal) {
			p.mux.HandleFunc(asmxPath, p.soapHandler(asmxService))
		},
		mapping: soapJSONMapping,
	}
}

type soapJSONMulta struct {
	NumeroAuto   string `json:"numeroAuto,omitempty"`
	DataInfracao string `json:"dataInfracao"`
	HoraInfracao string `json:"horaInfracao"`
	Descricao    string `json:"descricao"`
	Local        string `json:"local"`
	Valor        string `json:"valor"`
	Situacao     string `json:"situacao"`
}

type soapJSONResult struct {
	Sucesso    bool            `json:"sucesso"`
	Manutencao bool            `json:"manutencao,omitempty"`
	Mensagem   *string         `json:"mensagem"`
	Multas     []soapJSONMulta `json:"multas"`
}

// writeASMX answers 200 with the envelope of op's response, res as the
// JSON text of its result element (only &, < and > escaped, as .NET
// writes element content).
func writeASMX(w http.ResponseWriter, op string, res soapJSONResult) {
	js, err := json.Marshal(res)
	if err != nil {
		panic("portalsim: " + err.Error())
	}
	text := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(string(js))
	writeBody(w, http.StatusOK, soapContentType, xml.Header+
		`<soap:Envelope xmlns:soap="`+soapEnvNS+`" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xmlns:xsd="http://www.w3.org/2001/XMLSchema">`+
		`<soap:Body><`+op+`Response xmlns="`+tempuriNS+`"><`+op+`Result>`+text+`</`+op+`Result></`+op+`Response></soap:Body></soap:Envelope>`)
}

// asmxRequestBody is the envelope of a request for op with one parameter
// (its value a template placeholder, escaped).
func asmxRequestBody(op, param, value string) string {
	return `<soap:Envelope xmlns:soap="` + soapEnvNS + `"><soap:Body><` + op + ` xmlns="` + tempuriNS + `">` +
		`<` + param + `>` + xmlText(value) + `</` + param + `></` + op + `></soap:Body></soap:Envelope>`
}

func soapJSONMapping(d *dialect, j Jurisdiction, base string) realSource {
	src := newRealSource(d, j, base)
	post := func(op, param, value string) realOperation {
		return realOperation{Method: "POST", Path: asmxPath,
			Headers: map[string]string{"SOAPAction": `"` + tempuriNS + op + `"`},
			Body:    &realBody{Text: asmxRequestBody(op, param, value), ContentType: soapContentType}}
	}
	src.Operations = realOperations{
		ByDomain: post(asmxByDomain, "placa", "{domain}"),
		ByID:     post(asmxByID, "documento", "{id}"),
		Voucher:  getOperation(asmxVoucher),
	}
	src.Response = realResponse{
		Format:     "xml",
		Namespaces: map[string]string{"s": soapEnvNS, "t": tempuriNS},
		Decimal:    ",",
		NullValues: []string{"----", "ISENTO"},
		Unwrap:     []realUnwrap{{Select: "/s:Envelope/s:Body/*/*", Format: "json"}},
		Items:      "/multas",
		Fields: realFields{
			ID:          "/numeroAuto",
			Date:        realField{Select: []string{"/dataInfracao", "/horaInfracao"}, Layout: []string{"dd/MM/yyyy HH:mm"}},
			Description: "/descricao",
			Place:       "/local",
			Amount:      "/valor",
			Status:      "/situacao",
		},
		Unavailable: "/manutencao",
		StatusMap:   statusMap(d),
	}
	return src
}
