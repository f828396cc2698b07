package portalsim

import (
	"net/http"
	"strings"
)

// ShapeOAuth2Body is a Mexican state's JSON API behind the OAuth2 client
// credentials grant whose token endpoint takes the client's credentials in
// the form only (RFC 6749 2.3.1's alternative): HTTP Basic is refused.
// UTF-8:
//
//	POST /oauth/token   grant_type=client_credentials&client_id=…&client_secret=…[&scope=actas.read]
//	                    with an Authorization: Basic header: 401 {"error": "invalid_client"}
//	{"access_token": "…", "token_type": "Bearer", "expires_in": 3600, "scope": "actas.read"}
//
//	GET /api/v2/infracciones?placa={domain}
//	GET /api/v2/infracciones?documento={id}            (CUIT or DNI)
//	GET /api/v2/infracciones/{infraction_id}/pase-de-caja
//	Authorization: Bearer …
//	{"resultados": [{"folio": "RP-2026-0142", "fechaHora": "2026-03-14 09:12:00",
//	  "concepto": "Exceso de velocidad", "lugar": "…", "importe": "$185,000.00",
//	  "estatus": "PENDIENTE"}], "total": 1}
//
// Dates are zone-less "yyyy-mm-dd hh:mm:ss" in Mexico City time; amounts
// "$1,234.56"; a missing place or amount is a missing member. No records
// is "resultados": []. Tokens, scopes and their refusals are as
// ShapeOAuth2's (Jurisdiction.OAuth2, RevokeTokens).
const ShapeOAuth2Body Shape = "oauth2body"

func oauth2BodyDialect() *dialect {
	return &dialect{
		locale:        localeMX,
		byDomain:      "/api/v2/infracciones?placa={domain}",
		byID:          "/api/v2/infracciones?documento={id}",
		voucher:       "/api/v2/infracciones/{infraction_id}/pase-de-caja",
		statusText:    map[string]string{StatusUnpaid: "PENDIENTE", StatusPaid: "PAGADA", StatusInProcess: "EN ACLARACION"},
		render:        renderOAuth2Body,
		gate:          bearerGate,
		tokenBodyOnly: true,
		extra: func(p *Portal) {
			p.mux.HandleFunc(tokenPath, p.handleToken)
		},
		mapping: oauth2BodyMapping,
	}
}

type oauth2BodyItem struct {
	Folio     string `json:"folio,omitempty"`
	FechaHora string `json:"fechaHora"`
	Concepto  string `json:"concepto"`
	Lugar     string `json:"lugar,omitempty"`
	Importe   string `json:"importe,omitempty"`
	Estatus   string `json:"estatus"`
}

type oauth2BodyAnswer struct {
	Resultados []oauth2BodyItem `json:"resultados"`
	Total      int              `json:"total"`
}

func renderOAuth2Body(d *dialect, recs []Record) any {
	a := oauth2BodyAnswer{Resultados: make([]oauth2BodyItem, 0, len(recs)), Total: len(recs)}
	for _, r := range recs {
		item := oauth2BodyItem{Folio: r.ID, FechaHora: recordTime(r.Date).Format("2006-01-02 15:04:05"),
			Concepto: r.Description, Lugar: r.Place, Estatus: d.status(r.Status)}
		if r.Amount != "" {
			item.Importe = "$" + mexicanAmount(r.Amount)
		}
		a.Resultados = append(a.Resultados, item)
	}
	return a
}

func oauth2BodyMapping(d *dialect, j Jurisdiction, base string) realSource {
	src := newRealSource(d, j, base)
	src.Response = realResponse{
		Format:  "json",
		Decimal: ".",
		Items:   "/resultados",
		Fields: realFields{
			ID:          "/folio",
			Date:        realField{Select: "/fechaHora", Layout: []string{"yyyy-MM-dd HH:mm:ss"}},
			Description: "/concepto",
			Place:       "/lugar",
			Amount:      "/importe",
			Status:      "/estatus",
		},
		Unavailable: "/mantenimiento",
		StatusMap:   statusMap(d),
	}
	src.Auth = &realAuth{OAuth2: realOAuth2{
		TokenURL: strings.TrimSuffix(base, "/") + tokenPath, ClientID: j.OAuth2.ClientID, ClientSecret: j.OAuth2.ClientSecret,
		Scopes: j.OAuth2.Scopes, ClientAuth: "body",
	}}
	return src
}

// refuseBasic answers a token request that authenticates by HTTP Basic at
// a portal that takes the form's credentials only.
func refuseBasic(p *Portal, w http.ResponseWriter) {
	p.calls.refused()
	writeJSON(w, http.StatusUnauthorized, oauthError{"invalid_client", "este servidor no admite la autenticación HTTP Basic del cliente: envíe client_id y client_secret en el formulario"})
}
