package portalsim_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/multas/aggregator/portalsim"
)

func TestShapeAnswers(t *testing.T) {
	t.Parallel()
	const (
		actas        = `{"resultado":{"cantidad":1,"actas":[{"nro":"T-1","fecha":"2026-03-14T09:12:00","detalle":"Exceso de velocidad","lugar":"Av. Lugones km 4","monto":"185000.50","moneda":"ARS","estado":"IMPAGA"}]}}`
		actasEmpty   = `{"resultado":{"cantidad":0,"actas":[]}}`
		infracciones = `{"estado":"OK","datos":{"total":1,"infracciones":[{"acta":{"numero":"T-1","fecha":"14/03/2026"},"infraccion":{"descripcion":"Exceso de velocidad","lugar":"Av. Lugones km 4"},"importe":185000.5,"situacion":"Pendiente de pago"}]}}`
		infrEmpty    = `{"estado":"SIN_RESULTADOS","mensaje":"No se registran infracciones para la consulta"}`
		multas       = `[{"id":"T-1","fecha_hora":"2026-03-14T09:12:00-03:00","motivo":"Exceso de velocidad","ubicacion":{"direccion":"Av. Lugones km 4"},"importe":{"valor":"185000.50","moneda":"ARS"},"estado":"pendiente"}]`
	)
	tests := []struct {
		shape  portalsim.Shape
		path   string
		status int
		body   string // exact, or a prefix for a PDF
	}{
		{portalsim.ShapeActas, "/api/v2/actas?dominio=AB123CD", 200, actas},
		{portalsim.ShapeActas, "/api/v2/actas?dominio=ab-123-cd", 200, actas},
		{portalsim.ShapeActas, "/api/v2/actas?dominio=AC456DE", 200, actasEmpty},
		{portalsim.ShapeActas, "/api/v2/actas?cuit=20-12345678-6", 200, actas},
		{portalsim.ShapeActas, "/api/v2/actas?cuit=27234567891", 200, actasEmpty},
		{portalsim.ShapeActas, "/api/v2/actas?cuit=12345678", 400, `{"error":"se requiere un CUIT"}`},
		{portalsim.ShapeActas, "/api/v2/actas?cuit=20123456780", 400, `{"error":"documento inválido"}`},
		{portalsim.ShapeActas, "/api/v2/actas?dominio=-", 400, `{"error":"dominio inválido"}`},
		{portalsim.ShapeActas, "/api/v2/actas", 400, `{"error":"faltan parámetros de consulta"}`},
		{portalsim.ShapeActas, "/api/v2/actas/T-1/boleta", 200, "%PDF-1.4"},
		{portalsim.ShapeActas, "/api/v2/actas/T-2/boleta", 404, `{"error":"acta inexistente"}`},

		{portalsim.ShapeInfracciones, "/servicios/infracciones/consulta?patente=AB123CD", 200, infracciones},
		{portalsim.ShapeInfracciones, "/servicios/infracciones/consulta?patente=AC456DE", 404, infrEmpty},
		{portalsim.ShapeInfracciones, "/servicios/infracciones/consulta?documento=12345678&tipo=dni", 200, infracciones},
		{portalsim.ShapeInfracciones, "/servicios/infracciones/consulta?documento=20123456786&tipo=cuit", 200, infracciones},
		{portalsim.ShapeInfracciones, "/servicios/infracciones/consulta?documento=12345678&tipo=cuit", 400, `{"error":"el tipo de documento no coincide con el número"}`},
		{portalsim.ShapeInfracciones, "/servicios/infracciones/consulta?documento=7654321&tipo=dni", 404, infrEmpty},
		{portalsim.ShapeInfracciones, "/servicios/infracciones/T-1/cupon", 200, "%PDF-1.4"},
		{portalsim.ShapeInfracciones, "/servicios/infracciones/T-2/cupon", 404, `{"error":"acta inexistente"}`},

		{portalsim.ShapeMultas, "/v1/vehiculos/AB123CD/multas", 200, multas},
		{portalsim.ShapeMultas, "/v1/vehiculos/ab%20123%20cd/multas", 200, multas},
		{portalsim.ShapeMultas, "/v1/vehiculos/AC456DE/multas", 200, `[]`},
		{portalsim.ShapeMultas, "/v1/personas/20123456786/multas", 200, multas},
		{portalsim.ShapeMultas, "/v1/personas/12345678/multas", 200, multas},
		{portalsim.ShapeMultas, "/v1/personas/123/multas", 400, `{"error":"documento inválido"}`},
		{portalsim.ShapeMultas, "/v1/multas/T-1/comprobante", 200, "%PDF-1.4"},
		{portalsim.ShapeMultas, "/v1/multas/T-2/comprobante", 404, `{"error":"acta inexistente"}`},
		{portalsim.ShapeMultas, "/api/v2/actas?dominio=AB123CD", 404, `{"error":"recurso inexistente"}`},
	}
	servers := make(map[portalsim.Shape]string)
	var client *http.Client
	for _, s := range portalsim.Shapes() {
		_, servers[s], client = startPortal(t, testJurisdiction(s, portalsim.Fault{}))
	}
	for _, tt := range tests {
		t.Run(string(tt.shape)+tt.path, func(t *testing.T) {
			t.Parallel()
			got, err := get(t.Context(), client, servers[tt.shape]+tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if got.status != tt.status {
				t.Errorf("status %d, want %d", got.status, tt.status)
			}
			if bytes.HasPrefix(got.body, []byte("%PDF-")) {
				if ct := got.header.Get("Content-Type"); ct != "application/pdf" {
					t.Errorf("Content-Type = %q, want application/pdf", ct)
				}
				if !bytes.HasPrefix(got.body, []byte(tt.body)) || !bytes.HasSuffix(got.body, []byte("%%EOF\n")) {
					t.Errorf("voucher = %q, want a PDF", got.body)
				}
				return
			}
			if string(got.body) != tt.body {
				t.Errorf("body\n%s\nwant\n%s", got.body, tt.body)
			}
		})
	}
}

func TestVoucherNamesNoPersonalData(t *testing.T) {
	t.Parallel()
	_, base, client := startPortal(t, testJurisdiction(portalsim.ShapeActas, portalsim.Fault{}))
	got, err := get(t.Context(), client, base+"/api/v2/actas/T-1/boleta")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{portalsim.DemoPlate, portalsim.DemoDNI, "20-12345678-6", "20123456786"} {
		if bytes.Contains(got.body, []byte(s)) {
			t.Errorf("the voucher contains %q", s)
		}
	}
	for _, s := range []string{"Acta T-1", "ARS 185000.50", "Jurisdicci\\363n de prueba"} {
		if !bytes.Contains(got.body, []byte(s)) {
			t.Errorf("the voucher lacks %q:\n%s", s, got.body)
		}
	}
}
