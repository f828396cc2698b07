package config

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/multas/aggregator/sources/mapping"
)

func TestResponseFormats(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/formats.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(data, "formats.yaml", nil)
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	again := mustParse(t, string(out), nil)
	for i := range cfg.Sources {
		// (Printed, since an absent map comes back empty.)
		if fmt.Sprintf("%+v", again.Sources[i].Response) != fmt.Sprintf("%+v", cfg.Sources[i].Response) {
			t.Errorf("round trip changed sources[%d].response:\n%+v\n%+v", i, again.Sources[i].Response, cfg.Sources[i].Response)
		}
	}
	json, soap, cordoba := cfg.Sources[0].Response, cfg.Sources[1].Response, cfg.Sources[2].Response
	tests := []struct {
		name      string
		got, want any
	}{
		{"default format", json.Format, "json"},
		{"json not_found", json.NotFound, "/resultado/sin_actas"},
		{"json charset", json.Charset, ""},
		{"xml format", soap.Format, "xml"},
		{"xml namespaces", soap.Namespaces, map[string]string{"s": "http://schemas.xmlsoap.org/soap/envelope/", "m": "urn:multas"}},
		{"xml items", soap.Items, mapping.Items{{Select: "/s:Envelope/s:Body/m:consultarActasResponse/m:acta"}}},
		{"xml field", soap.Fields["currency"], mapping.Field{Select: mapping.List{"m:importe/@moneda"}}},
		{"xml unavailable", soap.Unavailable, "//s:Fault"},
		{"html format", cordoba.Format, "html"},
		{"html charset", cordoba.Charset, "windows-1252"},
		{"html attr field", cordoba.Fields["id"], mapping.Field{Select: mapping.List{"@data-acta"}}},
		{"html self field", cordoba.Fields["description"], mapping.Field{Select: mapping.List{""}}},
		{"html unavailable", cordoba.Unavailable, "#mantenimiento"},
	}
	for _, tt := range tests {
		if !reflect.DeepEqual(tt.got, tt.want) {
			t.Errorf("%s = %#v, want %#v", tt.name, tt.got, tt.want)
		}
	}
}

func TestResponseFormatValidation(t *testing.T) {
	t.Parallel()
	const r = "sources[0].response"
	tests := []struct {
		name string
		data string
		want []want
	}{
		{"unknown format", doc("", src("response: {format: yaml, items: x, fields: {id: y}}")), []want{{r + ".format", `want json, xml or html, got "yaml"`}}},
		{"unknown charset", doc("", src("response: {charset: klingon, fields: {id: /nro}}")), []want{{r + ".charset", `unknown character encoding "klingon"`}}},
		{"namespaces with json", doc("", src(`response: {namespaces: {m: "urn:x"}, fields: {id: /nro}}`)), []want{{r + ".namespaces", "only with xml documents"}}},
		{"json markers are pointers", doc("", src("response: {fields: {id: /nro}, not_found: sin_actas, unavailable: /a~2}")), []want{
			{r + ".not_found", "RFC 6901"}, {r + ".unavailable", "~0"},
		}},
		{"xml, everything wrong at once", doc("", src(
			`response: {format: xml, namespaces: {"a:b": "urn:x", m: ""}, items: "//q:acta", fields: {id: "nro[", date: "m:fecha", colour: c}, not_found: "//(", unavailable: "//m:x"}`)),
			[]want{
				{r + `.namespaces["a:b"]`, "not a namespace prefix"},
				{r + ".namespaces.m", "empty namespace URI"},
				{r + ".items", "prefix q not defined"},
				{r + ".fields.id", "not an XPath 1.0 expression"},
				{r + ".fields.colour", "unknown field"},
				{r + ".not_found", "not an XPath 1.0 expression"},
			}},
		{"xml items required", doc("", src("response: {format: xml, fields: {id: nro}}")), []want{{r + ".items", "required with format xml"}}},
		{"html, everything wrong at once", doc("", src(
			`response: {format: html, items: "tr@id", not_found: p.vacio, fields: {id: "td:nth-child(", place: "td@", date: td}, unavailable: "div[["}`)),
			[]want{
				{r + ".items", `"@attr" is for fields`},
				{r + ".fields.id", "not a CSS selector"},
				{r + ".fields.place", `"@" must be followed by an attribute name`},
				{r + ".unavailable", "not a CSS selector"},
			}},
		{"html items required", doc("", src("response: {format: html, fields: {id: td}}")), []want{{r + ".items", "required with format html"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := parseErrors(t, tc.data, nil)
			if len(errs) != len(tc.want) {
				t.Errorf("got %d errors, want %d:\n%v\nin:\n%s", len(errs), len(tc.want), errs, tc.data)
			}
			for _, w := range tc.want {
				found := false
				for _, e := range errs {
					found = found || (e.Key == w.key && strings.Contains(e.Msg, w.msg))
				}
				if !found {
					t.Errorf("no error %s: …%s… in:\n%v", w.key, w.msg, errs)
				}
			}
		})
	}
}

func TestResponseFormatsValid(t *testing.T) {
	t.Parallel()
	for _, data := range []string{
		doc("", src(`response: {format: json, charset: ISO-8859-1, fields: {id: /nro}, not_found: /vacio, unavailable: /mantenimiento}`)),
		doc("", src(`response: {format: xml, items: //acta, fields: {id: "@nro", description: "", place: ".", amount: "string(monto)"}}`)),
		doc("", src(`response: {format: xml, namespaces: {m: "urn:multas"}, items: "//m:acta[position() > 1]", fields: {id: "m:nro"}}`)),
		doc("", src(`response: {format: html, charset: latin1, items: "table tr:nth-child(n+2), ul > li", not_found: p.vacio, fields: {id: "@id", description: "", place: ".", amount: 'a[href^="mailto:x@y"]', status: ".@title"}}`)),
	} {
		if _, err := Parse([]byte(data), "test.yaml", nil); err != nil {
			t.Errorf("Parse: %v\nin:\n%s", err, data)
		}
	}
}
