package sources

import (
	"context"
	"strings"
	"testing"
)

// fuzzSelector checks that any selector text compiles or fails cleanly,
// and that one that compiles reads any answer without panicking and with
// results bounded by the answer's size.
func fuzzSelector(t *testing.T, f format, namespaces map[string]string, body []byte, text string) {
	sel, err := compileSelector(f, namespaces, text)
	if err != nil {
		return
	}
	doc, err := parseDocument(context.Background(), f, nil, body, "")
	if err != nil {
		return
	}
	if v, ok := doc.first(sel); !ok && v != "" {
		t.Errorf("first = %q without a match", v)
	} else if len(v) > (3*len(body)+64)*(len(text)+1) {
		// Decoding grows an answer at most threefold; an XPath such as
		// concat(/r, /r) repeats it at most once per byte of its text.
		t.Errorf("first = %d bytes from a %d-byte answer", len(v), len(body))
	}
	_, _ = doc.present(sel)
	if n, err := doc.count(sel); err == nil && n > len(body)+1 {
		t.Errorf("count = %d from a %d-byte answer", n, len(body))
	}
}

// fuzzMapping maps body with spec's mapping, checking the invariants of
// every infraction.
func fuzzMapping(t *testing.T, m *mapping, body []byte, contentType string) {
	infractions, err := m.read(context.Background(), body, contentType)
	if err != nil {
		return
	}
	if len(infractions) > len(body) {
		t.Fatalf("%d infractions from %d bytes", len(infractions), len(body))
	}
	for _, inf := range infractions {
		checkInfraction(t, inf)
	}
}

func FuzzXMLMapping(f *testing.F) {
	for _, seed := range []struct{ body, sel string }{
		{threeSOAP, "/s:Envelope/s:Body/m:consultarActasResponse/m:acta"},
		{threeSOAP, "count(//m:acta)"},
		{threeSOAP, "//m:acta[position() > 1]/@nro"},
		{`<?xml version="1.0" encoding="ISO-8859-1"?><r><acta><nro>1</nro><lugar>C` + "\xf3" + `rdoba</lugar></acta></r>`, "//acta"},
		{`<r><acta nro="1"><importe>$ 1.234,56</importe></acta></r>`, "concat(//acta/@nro, '-', string(//importe))"},
		{strings.Repeat("<a>", 600), "//a"},
		{`<!DOCTYPE r [<!ENTITY x "xx">]><r>&x;</r>`, "string(/r)"},
		{`<r xmlns="urn:multas"><acta/></r>`, "//acta | //m:acta"},
		{`<r>&nbsp;<![CDATA[x]]></r>`, "substring(/r, 2, 1)"},
		{``, ``},
	} {
		f.Add([]byte(seed.body), seed.sel)
	}
	spec := threeSpecs("http://portal")["xml"]
	s, err := New(spec, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, sel string) {
		fuzzMapping(t, &s.mapping, body, "text/xml")
		fuzzSelector(t, formatXML, spec.Namespaces, body, sel)
	})
}

func FuzzHTMLMapping(f *testing.F) {
	for _, seed := range []struct{ body, sel string }{
		{threeHTML, "table#actas tbody tr"},
		{threeHTML, "td:nth-child(4)@data-moneda"},
		{threeHTML, "tr:has(span.estado):not(:first-child)"},
		{`<meta charset="windows-1252"><table><tr data-acta="1"><td>C` + "\xf3" + `rdoba</td></tr></table>`, "tr@data-acta"},
		{`<form><input name="__RequestVerificationToken" value="t"></form>`, "input[name=__RequestVerificationToken]@value"},
		{`<a href="mailto:x@y">x</a>`, `a[href="mailto:x@y"]`},
		{strings.Repeat("<div>", 600), "div div"},
		{`<p>a<br>b</p>`, "@"},
		{`<p>a</p>`, ".@id"},
		{``, ``},
	} {
		f.Add([]byte(seed.body), seed.sel)
	}
	spec := threeSpecs("http://portal")["html"]
	s, err := New(spec, nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte, sel string) {
		fuzzMapping(t, &s.mapping, body, "text/html")
		fuzzSelector(t, formatHTML, nil, body, sel)
	})
}
