package mapping_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/sources/mapping"
)

// The mappings of these tests are written as operators write them, in
// YAML, and go through config's decoding and validation first: the keys
// and their shapes are SPEC 12's.

// response decodes the YAML of a response block (indented under
// "response:") through package config.
func response(t testing.TB, yaml string) mapping.Response {
	t.Helper()
	doc := `sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: http://portal.example
    time_zone: America/Argentina/Buenos_Aires
    operations:
      by_domain: {path: "/actas?d={domain}"}
      by_id: {path: "/actas?c={id}"}
      voucher: {path: "/boleta/{infraction_id}"}
    response:
` + indent(yaml, "      ")
	cfg, err := config.Parse([]byte(doc), "test.yaml", func(string) string { return "" })
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, doc)
	}
	return cfg.Sources[0].Response
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	// Drop the indentation the raw string literal gave every line.
	common := len(lines[0]) - len(strings.TrimLeft(lines[0], " \t"))
	for i, l := range lines {
		if len(l) >= common {
			l = l[common:]
		}
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}

var (
	buenosAires, _ = time.LoadLocation("America/Argentina/Buenos_Aires")
	testOpts       = mapping.Options{Source: "caba", Jurisdiction: "Ciudad de Buenos Aires", Currency: "ARS", Location: buenosAires,
		Now: func() time.Time { return time.Date(2026, 6, 1, 0, 0, 0, 0, buenosAires) }}
	byDomain = mapping.Subject{Op: aggregator.ByDomain, Value: "AB123CD"}
	byID     = mapping.Subject{Op: aggregator.ByID, Value: "20123456786"}
)

// row is an infraction as one line: id, date, amount currency, units,
// status (status_raw), description, place.
func row(inf aggregator.Infraction) string {
	units := "-"
	if inf.Units != nil {
		units = inf.Units.Value + " " + inf.Units.Code
	}
	return fmt.Sprintf("%s|%s|%s|%s|%s(%s)|%s|%s", inf.ID, inf.Date, strings.TrimSpace(inf.Amount+" "+inf.Currency), units,
		inf.Status, inf.StatusRaw, inf.Description, inf.Place)
}

func rows(infs []aggregator.Infraction) []string {
	out := make([]string, len(infs))
	for i, inf := range infs {
		out[i] = row(inf)
	}
	return out
}

// spec12Case is one answer read by one mapping.
type spec12Case struct {
	name    string
	yaml    string // the response block
	status  int    // 0: 200
	ctype   string
	body    string
	subject *mapping.Subject
	want    []string // rows; nil with err
	err     string   // a substring of the error
	outcome mapping.Outcome
}

func (c spec12Case) run(t *testing.T) {
	t.Helper()
	m, err := mapping.Compile(response(t, c.yaml), testOpts)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	status, subj := c.status, byDomain
	if status == 0 {
		status = 200
	}
	if c.subject != nil {
		subj = *c.subject
	}
	p, err := m.Read(context.Background(), mapping.Answer{Status: status, Body: []byte(c.body), ContentType: c.ctype}, subj)
	var re *mapping.RuleError
	switch {
	case c.outcome != "":
		if !errors.As(err, &re) || re.Outcome != c.outcome {
			t.Fatalf("Read: %v, want a rule with outcome %s", err, c.outcome)
		}
		if c.err != "" && re.Detail != c.err {
			t.Errorf("detail %q, want %q", re.Detail, c.err)
		}
		return
	case c.err != "":
		if err == nil || !strings.Contains(err.Error(), c.err) {
			t.Fatalf("Read: %v (%q), want an error mentioning %q", err, rows(p.Infractions), c.err)
		}
		return
	case err != nil:
		t.Fatalf("Read: %v", err)
	}
	got := rows(p.Infractions)
	if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
	}
}

func TestSPEC12Selectors(t *testing.T) {
	t.Parallel()
	const nested = `{"data": {"contribuyentes": [{"objetos": [
		{"obligaciones": [{"id": "A", "monto": 10}, {"id": "B", "monto": 20}]},
		{"obligaciones": [{"id": "C", "monto": 30}]}]}]}}`
	for _, c := range []spec12Case{
		{name: "a JSONPath reads every nested array", body: nested, yaml: `
			items: "$.data.contribuyentes[*].objetos[*].obligaciones[*]"
			fields: {id: /id, amount: /monto}`,
			want: []string{"A||10.00 ARS|-|unknown()||", "B||20.00 ARS|-|unknown()||", "C||30.00 ARS|-|unknown()||"}},
		{name: "a pointer with an index reads one of them", body: nested, yaml: `
			items: /data/contribuyentes/0/objetos/0/obligaciones
			fields: {id: /id}`,
			want: []string{"A||ARS|-|unknown()||", "B||ARS|-|unknown()||"}},
		{name: "JSONPath fields, joined", body: `{"a": [{"id": "1", "inf": [{"d": "Exceso"}, {"d": "Luces"}]}]}`, yaml: `
			items: /a
			fields: {id: /id, description: {select: "$.inf[*].d", join: "; "}}`,
			want: []string{"1||ARS|-|unknown()|Exceso; Luces|"}},
		{name: "a JSONPath field without join gives the first", body: `{"a": [{"id": "1", "inf": [{"d": "Exceso"}, {"d": "Luces"}]}]}`, yaml: `
			items: /a
			fields: {id: /id, description: "$.inf[*].d"}`,
			want: []string{"1||ARS|-|unknown()|Exceso|"}},
		{name: "several arrays, in the order written, with set", body: `{"pendientes": [{"id": "P1"}], "pagadas": [{"id": "G1"}, {"id": "G2", "estado": "EN GESTION"}]}`, yaml: `
			items:
			  - {select: /pendientes, set: {status_raw: IMPAGA}}
			  - {select: /pagadas, set: {status_raw: PAGADA, description: Pagada}}
			fields: {id: /id, status: /estado}
			status_map: {IMPAGA: unpaid, PAGADA: paid, EN GESTION: in_process}`,
			want: []string{"P1||ARS|-|unpaid(IMPAGA)||", "G1||ARS|-|paid(PAGADA)|Pagada|", "G2||ARS|-|in_process(EN GESTION)|Pagada|"}},
		{name: "JSON inside an html attribute", ctype: "text/html", body: `<form>
			<input type="hidden" name="actas[]" data-json="{&quot;numeroActa&quot;:&quot;1001&quot;,&quot;monto&quot;:&quot;$ 185.000&quot;}">
			<input type="hidden" name="actas[]" data-json='{"numeroActa": "1002", "monto": 1234.5}'></form>`, yaml: `
			format: html
			decimal: ","
			not_found: p.sin-actas
			items: [{select: 'input[name="actas[]"]@data-json', format: json}]
			fields: {id: /numeroActa, amount: /monto}`,
			want: []string{"1001||185000.00 ARS|-|unknown()||", "1002||1234.50 ARS|-|unknown()||"}},
		{name: "html inside a JSON envelope", body: `[{"status": "ok"}, {"data": "<table><tr><td>X-1</td><td>Av. 9 de Julio</td></tr></table>"}]`, yaml: `
			unwrap: [{select: /1/data, format: html}]
			items: tr
			not_found: p.vacio
			fields: {id: "td:nth-child(1)", place: "td:nth-child(2)"}`,
			want: []string{"X-1||ARS|-|unknown()||Av. 9 de Julio"}},
		{name: "JSON inside a SOAP element", ctype: "text/xml", body: `<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Body>
			<R xmlns="urn:x"><Result>{"multas": [{"id": "S-1"}]}</Result></R></s:Body></s:Envelope>`, yaml: `
			format: xml
			unwrap: [{select: //Result, format: json}]
			items: /multas
			fields: {id: /id}`,
			want: []string{"S-1||ARS|-|unknown()||"}},
		{name: "unwrap finding nothing in a 2xx is unreadable", body: `[{"status": "ok"}]`, yaml: `
			unwrap: [{select: /1/data, format: html}]
			items: tr
			not_found: p.vacio
			fields: {id: td}`, err: "unwrap[0]"},
		{name: "match keeps the queried plate's items", body: `[{"id": "1", "dominio": "AB 123 CD"}, {"id": "2", "dominio": "ZZ999ZZ"}, {"id": "3", "dominio": "ab-123-cd"}]`, yaml: `
			match: {select: /dominio, equals: "{domain}"}
			fields: {id: /id}`,
			want: []string{"1||ARS|-|unknown()||", "3||ARS|-|unknown()||"}},
		{name: "match on {domain} does not apply to by_id", subject: &byID, body: `[{"id": "1", "dominio": "ZZ999ZZ"}]`, yaml: `
			match: {select: /dominio, equals: "{domain}"}
			fields: {id: /id}`,
			want: []string{"1||ARS|-|unknown()||"}},
		{name: "match on {id} compares digits", subject: &byID, body: `[{"id": "1", "cuit": "20-12345678-6"}, {"id": "2", "cuit": "27-1"}]`, yaml: `
			match: {select: /cuit, equals: "{id}"}
			fields: {id: /id}`,
			want: []string{"1||ARS|-|unknown()||"}},
	} {
		t.Run(c.name, c.run)
	}
}

func TestSPEC12Fields(t *testing.T) {
	t.Parallel()
	for _, c := range []spec12Case{
		{name: "a date and a time in two fields", body: `[{"id": "1", "data": "10/06/2016", "hora": "12:36:11"}, {"id": "2", "data": "11/06/2016"}]`, yaml: `
			fields:
			  id: /id
			  date: {select: [/data, /hora], layout: ["dd/MM/yyyy HH:mm:ss", "dd/MM/yyyy"]}`,
			want: []string{"1|2016-06-10T12:36:11-03:00|ARS|-|unknown()||", "2|2016-06-11T00:00:00-03:00|ARS|-|unknown()||"}},
		{name: "layouts with literals", body: `[{"id": "1", "f": "20/05/2017 AS 16:08"}, {"id": "2", "f": "10/06/2016 às 12:36:11"}]`, yaml: `
			fields:
			  id: /id
			  date: {select: /f, layout: ["dd/MM/yyyy 'AS' HH:mm", "dd/MM/yyyy 'às' HH:mm:ss"]}`,
			want: []string{"1|2017-05-20T16:08:00-03:00|ARS|-|unknown()||", "2|2016-06-10T12:36:11-03:00|ARS|-|unknown()||"}},
		{name: "a date no layout reads is unreadable", body: `[{"id": "1", "f": "20/05/2017 16:08"}]`, yaml: `
			fields: {id: /id, date: {select: /f, layout: "dd/MM/yyyy 'AS' HH:mm"}}`, err: "field date"},
		{name: "a lone separator before three digits is refused", body: `[{"id": "1", "m": "$ 185.000"}]`, yaml: `
			fields: {id: /id, amount: /m}`, err: "ambiguous"},
		{name: "a thousands point with decimal comma", body: `[{"id": "1", "m": "$ 185.000"}, {"id": "2", "m": "R$ 1.234,56"}, {"id": "3", "m": 1.5}]`, yaml: `
			decimal: ","
			fields: {id: /id, amount: /m}`,
			want: []string{"1||185000.00 ARS|-|unknown()||", "2||1234.56 ARS|-|unknown()||", "3||1.50 ARS|-|unknown()||"}},
		{name: "a field's decimal over the response's", body: `[{"id": "1", "m": "1,234.50", "u": "1.234"}]`, yaml: `
			decimal: ","
			fields: {id: /id, amount: {select: /m, decimal: "."}, units: {select: /u, code: UF}}`,
			want: []string{"1||1234.50 ARS|1234.00 UF|unknown()||"}},
		{name: "JSON numbers are never ambiguous", body: `[{"id": "1", "m": 1.234}]`, yaml: `
			fields: {id: /id, amount: /m}`, want: []string{"1||1.23 ARS|-|unknown()||"}},
		{name: "units alone are not money", body: `[{"id": "1", "uf": 100, "moneda": "ARS"}]`, yaml: `
			fields: {id: /id, units: {select: /uf, code: UF}}`, want: []string{"1|||100.00 UF|unknown()||"}},
		{name: "units with money", body: `[{"id": "1", "ur": "2,5", "m": "1500"}]`, yaml: `
			decimal: ","
			fields: {id: /id, amount: /m, units: {select: /ur, code: UR}}`, want: []string{"1||1500.00 ARS|2.50 UR|unknown()||"}},
		{name: "units that are not a number are unreadable", body: `[{"id": "1", "uf": "cien"}]`, yaml: `
			fields: {id: /id, units: {select: /uf, code: UF}}`, err: "field units"},
		{name: "null values are absent", body: `[{"id": "1", "m": "ISENTO", "l": "----", "f": " - "}]`, yaml: `
			null_values: ["----", "-", "isento"]
			fields: {id: /id, amount: /m, place: /l, date: /f}`, want: []string{"1||ARS|-|unknown()||"}},
		{name: "an id longer than 200 characters does not normalise", body: `[{"id": "` + strings.Repeat("x", 201) + `"}]`, yaml: `
			fields: {id: /id}`, err: "longer than 200"},
		{name: "text is cut at 1,000 characters", body: `[{"id": "1", "d": "` + strings.Repeat("á", 1500) + `"}]`, yaml: `
			fields: {id: /id, description: /d}`,
			want: []string{"1||ARS|-|unknown()|" + strings.Repeat("á", 999) + "…|"}},
		{name: "set goes through status_map", body: `[{"id": "1"}]`, yaml: `
			items: [{select: "", set: {status_raw: VENCIDA}}]
			fields: {id: /id}
			status_map: {vencida: unpaid}`, want: []string{"1||ARS|-|unpaid(VENCIDA)||"}},
	} {
		t.Run(c.name, c.run)
	}
}

func TestSPEC12Columns(t *testing.T) {
	t.Parallel()
	const yaml = `
		format: html
		not_found: p.sin-actas
		items: "table.actas tr"
		fields:
		  id: {column: Acta}
		  date: {column: ["Fecha y Hora", "Fecha-Hola"], layout: "dd/MM/yyyy HH:mm"}
		  place: {column: ["Lugar", "Intersección"]}`
	for _, c := range []spec12Case{
		{name: "columns by their header", ctype: "text/html", yaml: yaml, body: `<table class="actas">
			<tr><th>Acta</th><th>Fecha y Hora</th><th>Lugar</th></tr>
			<tr><td>A-1</td><td>14/03/2026 09:12</td><td>Av. Lugones</td></tr></table>`,
			want: []string{"A-1|2026-03-14T09:12:00-03:00|ARS|-|unknown()||Av. Lugones"}},
		{name: "another issuer's spelling, an added column, a colspan", ctype: "text/html", yaml: yaml, body: `<table class="actas">
			<thead><tr><th colspan="2">Boleta</th><th>Puntos</th><th>ACTA</th><th>intersección</th><th>Fecha-Hola</th></tr></thead>
			<tbody><tr><td>pdf</td><td>x</td><td>5</td><td>B-2</td><td>Corrientes y Callao</td><td>01/02/2026 10:00</td></tr></tbody></table>`,
			want: []string{"B-2|2026-02-01T10:00:00-03:00|ARS|-|unknown()||Corrientes y Callao"}},
		{name: "a column no header names is loud", ctype: "text/html", yaml: yaml, body: `<table class="actas">
			<tr><th>Acta</th><th>Fecha</th><th>Lugar</th></tr><tr><td>A-1</td><td>14/03/2026 09:12</td><td>x</td></tr></table>`,
			err: `"Fecha y Hora" / "Fecha-Hola"`},
	} {
		t.Run(c.name, c.run)
	}
}

func TestSPEC12Errors(t *testing.T) {
	t.Parallel()
	const rules = `
		items: /infracciones
		fields: {id: /id}
		errors:
		  - {when: {select: /error, equals: true}, outcome: rejected, detail: /mensaje}
		  - {status: [500], when: {select: /code, equals: "999"}, outcome: rejected}
		  - {status: [503], outcome: unavailable}
		  - {when: {select: /msg, contains: "DEMASIADAS consultas"}, outcome: rate_limited, retry_after: 2m}
		  - {when: {select: /msg, matches: "^sin (actas|multas)$"}, outcome: not_found}
		  - {status: [400], outcome: error}`
	for _, c := range []spec12Case{
		{name: "a 200 saying error is rejected, with the portal's detail", yaml: rules,
			body:    `{"error": true, "mensaje": " Debe\u202e completar\n el captcha ", "infracciones": []}`,
			outcome: mapping.Rejected, err: "Debe completar el captcha"},
		{name: "error false is no rule", yaml: rules, body: `{"error": false, "infracciones": [{"id": "1"}]}`,
			want: []string{"1||ARS|-|unknown()||"}},
		{name: "equals compares JSON as is", yaml: rules, status: 500, body: `{"code": 999}`, err: "no errors rule matched"},
		{name: "a 500 with its code is rejected", yaml: rules, status: 500, body: `{"code": "999", "message": "missing captcha"}`,
			outcome: mapping.Rejected},
		{name: "a status alone, on an answer that does not parse", yaml: rules, status: 503, body: `<html>busy</html>`,
			outcome: mapping.Unavailable},
		{name: "contains is case-insensitive", yaml: rules, body: `{"msg": "Demasiadas consultas, espere"}`,
			outcome: mapping.RateLimited},
		{name: "matches, not_found", yaml: rules, body: `{"msg": "sin actas"}`, want: []string{}},
		{name: "a 404 is no infractions unless a rule says otherwise", yaml: rules, status: 404, body: `{}`, err: "no errors rule matched"},
		{name: "first rule wins", yaml: rules, status: 400, body: `{"error": true}`, outcome: mapping.Rejected},
		{name: "captcha page in html", ctype: "text/html", body: `<html><div class="g-recaptcha"></div></html>`, yaml: `
			format: html
			not_found: p.sin-actas
			items: tr
			fields: {id: td}
			errors: [{when: div.g-recaptcha, outcome: rejected}]`, outcome: mapping.Rejected},
		{name: "html without items nor marker is unreadable", ctype: "text/html", body: `<html><p>Captcha</p></html>`, yaml: `
			format: html
			not_found: p.sin-actas
			items: tr
			fields: {id: td}`, err: "matched nothing"},
	} {
		t.Run(c.name, c.run)
	}
}

// TestSPEC12Refusals: what validation refuses, at the key it names.
func TestSPEC12Refusals(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ yaml, key, msg string }{
		{`{format: html, items: tr, fields: {id: td}}`, "not_found", "an html source must say how its no-results page looks"},
		{`{fields: {id: /id, units: {select: /u, code: ARS}}}`, "fields.units.code", "is a currency"},
		{`{fields: {id: /id, units: /u}}`, "fields.units.code", "required"},
		{`{fields: {id: /id, amount: {select: /m, decimal: ";"}}}`, "fields.amount.decimal", `want "," or "."`},
		{`{fields: {id: /id, date: {select: /d, layout: "YYYY"}}}`, "fields.date.layout", "layout[0]"},
		{`{fields: {id: {column: Acta}}}`, "fields.id.column", "only for html"},
		{`{fields: {id: {select: /a, column: A}}}`, "fields.id", "not both"},
		{`{match: {select: /d, equals: AB123CD}, fields: {id: /id}}`, "match.equals", `want "{domain}" or "{id}"`},
		{`{errors: [{when: /e, outcome: broken}], fields: {id: /id}}`, "errors[0].outcome", "want rejected"},
		{`{errors: [{when: {select: /e, matches: "("}, outcome: error}], fields: {id: /id}}`, "errors[0].when.matches", "RE2"},
		{`{errors: [{outcome: error}], fields: {id: /id}}`, "errors[0]", "give when"},
		{`{errors: [{status: [500], outcome: error, retry_after: 1m}], fields: {id: /id}}`, "errors[0].retry_after", "only with outcome: rate_limited"},
		{`{items: [{select: /a, set: {id: x}}], fields: {id: /id}}`, "items[0].set.id", "constant"},
		{`{items: "$.a[", fields: {id: /id}}`, "items", "JSONPath"},
		{`{decimal: ";", fields: {id: /id}}`, "decimal", `want "," or "."`},
		{`{max_items: -1, fields: {id: /id}}`, "max_items", "negative"},
		{`{format: html, not_found: p, items: [{select: 'i@data-json', format: json}], fields: {id: "td"}}`, "fields.id", "in the json items"},
	} {
		t.Run(c.key, func(t *testing.T) {
			t.Parallel()
			doc := "sources:\n  - id: caba\n    jurisdiction: CABA\n    base_url: http://portal.example\n" +
				"    operations: {by_domain: {path: \"/a?d={domain}\"}}\n    response: " + c.yaml + "\n"
			_, err := config.Parse([]byte(doc), "test.yaml", nil)
			want := "sources[0].response." + c.key + ": "
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), c.msg) {
				t.Errorf("Parse: %v\nwant an error at %s mentioning %q", err, want, c.msg)
			}
		})
	}
}
