package mapping

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

// tenItems is a portal answer with ten infractions.
func tenItems() string {
	var b strings.Builder
	b.WriteString(`{"resultado": {"total": 10, "actas": [`)
	for i := range 10 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"nro": "Q-%05d", "fecha": "2026-03-%02dT09:12:00", "detalle": "Exceso de velocidad",
			"lugar": "Av. Lugones km 4", "monto": "185000.5", "moneda": "ARS", "estado": "IMPAGA"}`, i, i+1)
	}
	b.WriteString(`]}}`)
	return b.String()
}

// BenchmarkMapFormats measures the mapping of one 10-item lookup answer
// (decoding, parsing, selecting, normalising) in each format, without
// HTTP: the JSON fast path of pointers, the same answer through JSONPath,
// SOAP and an HTML table.
func BenchmarkMapFormats(b *testing.B) {
	fields := func(m map[string]string) map[string]Field { return plain(m) }
	jsonFields := map[string]string{"id": "/nro", "date": "/fecha", "description": "/detalle", "place": "/lugar",
		"amount": "/monto", "currency": "/moneda", "status": "/estado"}
	for _, bm := range []struct {
		name, contentType, doc string
		r                      Response
	}{
		{"json", "application/json", tenItems(), Response{Items: one("/resultado/actas"), Fields: fields(jsonFields), StatusMap: caba}},
		{"json-latin1", "application/json; charset=iso-8859-1", tenItems(), Response{Items: one("/resultado/actas"), Fields: fields(jsonFields), StatusMap: caba}},
		{"jsonpath", "application/json", tenItems(), Response{Items: one("$.resultado.actas[*]"), Fields: fields(jsonFields), StatusMap: caba}},
		{"xml", "text/xml; charset=utf-8", tenItemsXML(), Response{Format: "xml", Items: one("/s:Envelope/s:Body/m:consultarActasResponse/m:acta"),
			Namespaces: map[string]string{"s": "http://schemas.xmlsoap.org/soap/envelope/", "m": "urn:multas"}, StatusMap: caba,
			Fields: fields(map[string]string{"id": "m:nro", "date": "m:fecha", "description": "m:detalle", "place": "m:lugar",
				"amount": "m:monto", "currency": "m:moneda", "status": "m:estado"})}},
		{"html", "text/html; charset=utf-8", tenItemsHTML(), Response{Format: "html", Items: one("table#actas tbody tr"), NotFound: "p.vacio", StatusMap: caba,
			Fields: fields(map[string]string{"id": "td:nth-child(1)", "date": "td:nth-child(2)", "description": "td:nth-child(3)",
				"place": "td:nth-child(4)", "amount": "td:nth-child(5)", "currency": "td:nth-child(6)", "status": "td:nth-child(7)"})}},
		{"html-columns", "text/html; charset=utf-8", tenItemsHTML(), Response{Format: "html", Items: one("table#actas tbody tr"), NotFound: "p.vacio", StatusMap: caba,
			Fields: map[string]Field{"id": {Column: List{"Acta"}}, "date": {Column: List{"Fecha"}}, "description": {Column: List{"Detalle"}},
				"place": {Column: List{"Lugar"}}, "amount": {Column: List{"Monto"}}, "currency": {Column: List{"Moneda"}}, "status": {Column: List{"Estado"}}}}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			m := compile(b, bm.r)
			ctx := context.Background()
			a := Answer{Status: 200, Body: []byte(bm.doc), ContentType: bm.contentType}
			b.ReportAllocs()
			b.SetBytes(int64(len(bm.doc)))
			for b.Loop() {
				p, err := m.Read(ctx, a, domain)
				if err != nil || len(p.Infractions) != 10 {
					b.Fatalf("Read = %d infractions, %v", len(p.Infractions), err)
				}
			}
		})
	}
}
