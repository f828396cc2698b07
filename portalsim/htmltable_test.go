package portalsim_test

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/html"
	"golang.org/x/text/encoding/charmap"

	"github.com/multas/aggregator/portalsim"
)

func htmlTableJurisdiction() portalsim.Jurisdiction {
	return portalsim.NewJurisdiction(portalsim.ShapeHTML, "tucuman", "Provincia de Tucumán", []portalsim.Record{
		{Domain: portalsim.DemoPlate, CUIT: portalsim.DemoCUIT, ID: "TUC-1", Date: "2026-02-21T10:45:00",
			Description: "Cruce de semáforo en rojo", Place: "Calle Córdoba 650, San Miguel de Tucumán",
			Amount: "1234567.5", Currency: "ARS", Status: portalsim.StatusInProcess},
		{Domain: portalsim.DemoPlate, ID: "TUC 2/ñ", Date: "2025-08-09T19:30:05",
			Description: "Giro ≠ permitido", Place: "Ruta 9", Amount: "950", Status: "prescripta"},
	})
}

// parse1252 decodes a page as windows-1252 and parses it.
func parse1252(t *testing.T, b []byte) (*html.Node, string) {
	t.Helper()
	text, err := charmap.Windows1252.NewDecoder().Bytes(b)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return doc, string(text)
}

func TestHTMLTableIsWindows1252(t *testing.T) {
	t.Parallel()
	_, base, client := startPortal(t, htmlTableJurisdiction())
	got, err := get(t.Context(), client, base+"/infracciones/consulta.asp?patente=AB123CD")
	if err != nil {
		t.Fatal(err)
	}
	if got.status != 200 || got.header.Get("Content-Type") != "text/html" {
		t.Fatalf("%d %q, want 200 text/html without a charset", got.status, got.header.Get("Content-Type"))
	}
	// The bytes are windows-1252: ó is 0xF3, not UTF-8's C3 B3.
	if !bytes.Contains(got.body, []byte("C\xf3rdoba")) || bytes.Contains(got.body, []byte("C\xc3\xb3rdoba")) {
		t.Errorf("the page is not windows-1252:\n%q", got.body)
	}
	if !bytes.Contains(got.body, []byte(`<meta http-equiv="Content-Type" content="text/html; charset=windows-1252">`)) {
		t.Errorf("the page does not declare its charset")
	}
	doc, text := parse1252(t, got.body)
	if !strings.Contains(text, "Calle Córdoba 650") || !strings.Contains(text, "<title>Consulta de infracciones - Provincia de Tucumán</title>") {
		t.Errorf("decoded with charmap, the page lacks Córdoba or its title:\n%s", text)
	}
	// A character windows-1252 lacks is a numeric character reference.
	if !strings.Contains(text, "Giro &#8800; permitido") {
		t.Errorf("≠ is not written &#8800;:\n%s", text)
	}
	rows, err := css(doc, "table#actas tbody tr")
	if err != nil || len(rows) != 2 {
		t.Fatalf("%d rows (%v), want 2", len(rows), err)
	}
	want := [][]string{
		{"TUC-1", "21/02/2026 10:45", "Cruce de semáforo en rojo", "Calle Córdoba 650, San Miguel de Tucumán", "$ 1.234.567,50", "En trámite", "Ver boleta"},
		{"TUC 2/ñ", "09/08/2025 19:30:05", "Giro ≠ permitido", "Ruta 9", "$ 950,00", "prescripta", "Ver boleta"},
	}
	for i, row := range rows {
		cells, _ := css(row, "td")
		var got []string
		for _, c := range cells {
			got = append(got, strings.Join(strings.Fields(textOf(c)), " "))
		}
		if strings.Join(got, "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d = %q, want %q", i, got, want[i])
		}
	}
	for i, wantAttrs := range []map[string]string{
		{"a.boleta@data-id": "TUC-1", "a.boleta@href": "boleta.asp?acta=TUC-1", "td:nth-child(5)@data-moneda": "ARS"},
		{"a.boleta@data-id": "TUC 2/ñ", "a.boleta@href": "boleta.asp?acta=TUC+2%2F%C3%B1"},
	} {
		for sel, w := range wantAttrs {
			if v, ok, _ := cssValue(rows[i], sel); !ok || v != w {
				t.Errorf("row %d %s = %q, want %q", i, sel, v, w)
			}
		}
	}
	if _, ok, _ := cssValue(rows[1], "td:nth-child(5)@data-moneda"); ok {
		t.Errorf("row 1 has a currency, its record none")
	}
	// The place cell breaks its line inside the text.
	if !strings.Contains(text, "Calle Córdoba 650,\n") {
		t.Errorf("the place is on one line")
	}
	if nf, _ := css(doc, "p.sin-resultados"); len(nf) != 0 {
		t.Errorf("a page with records says there are none")
	}
}

func TestHTMLTableVariants(t *testing.T) {
	t.Parallel()
	p, base, client := startPortal(t, htmlTableJurisdiction())
	tests := []struct {
		name, path string
		status     int
		has        string // a selector present in the page
		rows       int
	}{
		{"by CUIT", "/infracciones/consulta.asp?cuit=20-12345678-6", 200, "table#actas", 1},
		{"no records", "/infracciones/consulta.asp?patente=AC456DE", 200, "p.sin-resultados", 0},
		{"a DNI is refused", "/infracciones/consulta.asp?cuit=12345678", 400, "p.error", 0},
		{"no parameter", "/infracciones/consulta.asp", 400, "p.error", 0},
		{"unknown page", "/default.asp", 404, "p.error", 0},
	}
	for _, tt := range tests {
		got, err := get(t.Context(), client, base+tt.path)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := parse1252(t, got.body)
		has, _ := css(doc, tt.has)
		rows, _ := css(doc, "table#actas tbody tr")
		if got.status != tt.status || got.header.Get("Content-Type") != "text/html" || len(has) == 0 || len(rows) != tt.rows {
			t.Errorf("%s: %d %q, %d %s, %d rows; want %d, %s, %d rows", tt.name, got.status, got.header.Get("Content-Type"), len(has), tt.has, len(rows), tt.status, tt.has, tt.rows)
		}
	}
	if got, err := get(t.Context(), client, base+"/infracciones/boleta.asp?acta=TUC+2%2F%C3%B1"); err != nil || got.status != 200 || !bytes.HasPrefix(got.body, []byte("%PDF-")) {
		t.Errorf("voucher: %d, %v; want a PDF", got.status, err)
	}

	// Maintenance: 200 with div#mantenimiento for lookups; vouchers still served.
	if err := p.SetFault(portalsim.Fault{Mode: portalsim.Maintenance}); err != nil {
		t.Fatal(err)
	}
	got, err := get(t.Context(), client, base+"/infracciones/consulta.asp?patente=AB123CD")
	if err != nil {
		t.Fatal(err)
	}
	doc, text := parse1252(t, got.body)
	if m, _ := css(doc, "div#mantenimiento"); got.status != 200 || len(m) != 1 || !strings.Contains(text, "más tarde") {
		t.Errorf("maintenance: %d %s, want 200 with div#mantenimiento", got.status, text)
	}
	if got, err := get(t.Context(), client, base+"/infracciones/boleta.asp?acta=TUC-1"); err != nil || got.status != 200 || !bytes.HasPrefix(got.body, []byte("%PDF-")) {
		t.Errorf("voucher in maintenance: %d, %v; want a PDF", got.status, err)
	}
}
