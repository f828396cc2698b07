package sources

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// tenItemsXML is tenItems as a SOAP answer.
func tenItemsXML() string {
	var b strings.Builder
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/"><soapenv:Body>`)
	b.WriteString(`<ns2:consultarActasResponse xmlns:ns2="urn:multas"><ns2:total>10</ns2:total>`)
	for i := range 10 {
		fmt.Fprintf(&b, `<ns2:acta><ns2:nro>Q-%05d</ns2:nro><ns2:fecha>2026-03-%02dT09:12:00</ns2:fecha><ns2:detalle>Exceso de velocidad</ns2:detalle>
			<ns2:lugar>Av. Lugones km 4</ns2:lugar><ns2:monto>185000.5</ns2:monto><ns2:moneda>ARS</ns2:moneda><ns2:estado>IMPAGA</ns2:estado></ns2:acta>`, i, i+1)
	}
	b.WriteString(`</ns2:consultarActasResponse></soapenv:Body></soapenv:Envelope>`)
	return b.String()
}

// tenItemsHTML is tenItems as an HTML table.
func tenItemsHTML() string {
	var b strings.Builder
	b.WriteString(`<!DOCTYPE html><html><head><title>Actas</title></head><body><table id="actas"><thead><tr><th>Acta</th><th>Fecha</th>` +
		`<th>Detalle</th><th>Lugar</th><th>Monto</th><th>Moneda</th><th>Estado</th></tr></thead><tbody>`)
	for i := range 10 {
		fmt.Fprintf(&b, `<tr><td>Q-%05d</td><td>2026-03-%02dT09:12:00</td><td>Exceso de velocidad</td>
			<td>Av. Lugones km 4</td><td>185000.5</td><td>ARS</td><td>IMPAGA</td></tr>`, i, i+1)
	}
	b.WriteString(`</tbody></table></body></html>`)
	return b.String()
}

// BenchmarkMapFormats measures the mapping of one 10-item lookup answer
// (decoding, parsing, selecting, normalising) in each format, without HTTP.
func BenchmarkMapFormats(b *testing.B) {
	xml := testSpec("http://portal")
	xml.Format, xml.Items = "xml", "/s:Envelope/s:Body/m:consultarActasResponse/m:acta"
	xml.Namespaces = map[string]string{"s": "http://schemas.xmlsoap.org/soap/envelope/", "m": "urn:multas"}
	xml.Fields = map[string]string{"id": "m:nro", "date": "m:fecha", "description": "m:detalle", "place": "m:lugar",
		"amount": "m:monto", "currency": "m:moneda", "status": "m:estado"}
	html := testSpec("http://portal")
	html.Format, html.Items = "html", "table#actas tbody tr"
	html.Fields = map[string]string{"id": "td:nth-child(1)", "date": "td:nth-child(2)", "description": "td:nth-child(3)",
		"place": "td:nth-child(4)", "amount": "td:nth-child(5)", "currency": "td:nth-child(6)", "status": "td:nth-child(7)"}
	for _, bm := range []struct {
		name, contentType, doc string
		spec                   Spec
	}{
		{"json", "application/json", tenItems(), testSpec("http://portal")},
		{"json-latin1", "application/json; charset=iso-8859-1", tenItems(), testSpec("http://portal")},
		{"xml", "text/xml; charset=utf-8", tenItemsXML(), xml},
		{"html", "text/html; charset=utf-8", tenItemsHTML(), html},
	} {
		b.Run(bm.name, func(b *testing.B) {
			s := newSource(b, bm.spec, nil)
			ctx := context.Background()
			doc := []byte(bm.doc)
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				infractions, err := s.mapping.read(ctx, doc, bm.contentType)
				if err != nil || len(infractions) != 10 {
					b.Fatalf("read = %d infractions, %v", len(infractions), err)
				}
			}
		})
	}
}
