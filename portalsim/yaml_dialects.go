package portalsim

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// dialectYAML writes the operations, response, pagination and auth of a
// source of a SPEC 8 dialect, in SPEC 8's keys: everything after base_url.
func dialectYAML(b *strings.Builder, j Jurisdiction, d *dialect, base string) {
	j = j.withDefaults()
	b.WriteString("    operations:\n")
	switch j.Shape {
	case ShapeSOAP:
		soapOperationYAML(b, "by_domain", soapByDomain, [][2]string{{"dominio", "{domain}"}})
		soapOperationYAML(b, "by_id", soapByID, [][2]string{{"numero", "{id}"}, {"tipo", "{id_kind}"}})
	default:
		var extra [][2]string
		switch j.Shape {
		case ShapePaged:
			extra = pagingQuery(j.Paging.Style)
		case ShapeSession:
			extra = [][2]string{{sessionTokenField, "{session.token}"}}
		}
		operationYAML(b, "by_domain", d.byDomain, d.post, extra, "")
		accepts := ""
		if d.cuitOnly {
			accepts = "[cuit]"
		}
		operationYAML(b, "by_id", d.byID, d.post, extra, accepts)
	}
	operationYAML(b, "voucher", d.voucher, false, nil, "")

	b.WriteString("    response:\n")
	unavailable := "/mantenimiento"
	switch d.format {
	case formatXML:
		b.WriteString("      format: xml\n")
		fmt.Fprintf(b, "      namespaces: {s: %s, m: %s}\n", q(soapEnvNS), q(multasNS))
		unavailable = "/s:Envelope/s:Body/m:mantenimiento"
	case formatHTML:
		b.WriteString("      format: html\n")
		unavailable = htmlUnavailable
	default:
		b.WriteString("      format: json\n")
	}
	if d.decimal != "" {
		fmt.Fprintf(b, "      decimal: %s\n", q(d.decimal))
	}
	fmt.Fprintf(b, "      items: %s\n", q(d.items))
	fields := make([]string, 0, len(d.fields))
	for _, f := range d.fields {
		fields = append(fields, f.name+": "+q(f.sel))
	}
	fmt.Fprintf(b, "      fields: {%s}\n", strings.Join(fields, ", "))
	switch d.format {
	case formatHTML:
		fmt.Fprintf(b, "      not_found: %s\n", q(htmlNotFound))
	case formatXML:
		// No records is an empty actas (SPEC 12: an xml source says how
		// its no-results answer looks).
		fmt.Fprintf(b, "      not_found: %s\n", q("/s:Envelope/s:Body/*/m:resultado[m:cantidad = 0]"))
	}
	fmt.Fprintf(b, "      unavailable: %s\n", q(unavailable))
	fmt.Fprintf(b, "      status_map: {%s}\n", strings.Join(statusMapYAML(d), ", "))

	switch j.Shape {
	case ShapePaged:
		next := ""
		switch j.Paging.Style {
		case PagePages:
			next = ", start: 1"
		case PageOffset:
			next = ", start: 0"
		case PageCursor:
			next = ", next: " + q("/paginacion/siguiente")
		}
		fmt.Fprintf(b, "    pagination: {style: %s, size: %d%s, max_pages: 20}\n", j.Paging.Style, j.Paging.Size, next)
	case ShapeOAuth2:
		scopes := make([]string, 0, len(j.OAuth2.Scopes))
		for _, s := range j.OAuth2.Scopes {
			scopes = append(scopes, q(s))
		}
		b.WriteString("    auth:\n")
		fmt.Fprintf(b, "      oauth2: {token_url: %s, client_id: %s, client_secret: %s, scopes: [%s]}\n",
			q(strings.TrimSuffix(base, "/")+tokenPath), q(j.OAuth2.ClientID), q(j.OAuth2.ClientSecret), strings.Join(scopes, ", "))
	case ShapeSession:
		b.WriteString("    auth:\n")
		fmt.Fprintf(b, "      session: {method: GET, path: %s, ttl: %s, format: html, extract: {token: %s}}\n",
			q(sessionPath), sessionTTLYAML(j.Session.TTL), q("input[name="+sessionTokenField+"]@value"))
	}
}

// operationYAML writes one operation from a dialect template: its path,
// and its query parameters (form fields for a POST) followed by extra ones.
func operationYAML(b *strings.Builder, name, template string, post bool, extra [][2]string, accepts string) {
	path, rawQuery, _ := strings.Cut(template, "?")
	var params [][2]string
	for _, pair := range strings.Split(rawQuery, "&") {
		if k, v, ok := strings.Cut(pair, "="); ok {
			params = append(params, [2]string{k, v})
		}
	}
	params = append(params, extra...)
	method := "GET"
	if post {
		method = "POST"
	}
	fmt.Fprintf(b, "      %s:\n        method: %s\n        path: %s\n", name, method, q(path))
	switch {
	case post:
		fmt.Fprintf(b, "        body:\n          form: %s\n", flowMap(params))
	case len(params) > 0:
		fmt.Fprintf(b, "        query: %s\n", flowMap(params))
	}
	if accepts != "" {
		fmt.Fprintf(b, "        accepts: %s\n", accepts)
	}
}

// soapOperationYAML writes a SOAP operation: a POST of an envelope.
func soapOperationYAML(b *strings.Builder, name, op string, params [][2]string) {
	fmt.Fprintf(b, "      %s:\n        method: POST\n        path: %s\n", name, q(soapPath))
	fmt.Fprintf(b, "        headers: {SOAPAction: %s}\n", q(`"`+soapActionPrefix+op+`"`))
	b.WriteString("        body:\n")
	// The placeholders are plain text, which the envelope's escaping keeps.
	fmt.Fprintf(b, "          text: %s\n", q(soapRequestBody(op, params)))
	fmt.Fprintf(b, "          content_type: %s\n", q(soapContentType))
}

// pagingQuery is the query parameters of a paging style, in the
// aggregator's placeholders. The link style asks for its page size only:
// the next pages are the portal's links.
func pagingQuery(s PagingStyle) [][2]string {
	switch s {
	case PageOffset:
		return [][2]string{{"offset", "{offset}"}, {"limit", "{size}"}}
	case PageCursor:
		return [][2]string{{"cursor", "{cursor}"}, {"limit", "{size}"}}
	case PageLink:
		return [][2]string{{"per_page", "{size}"}}
	}
	return [][2]string{{"page", "{page}"}, {"size", "{size}"}}
}

func statusMapYAML(d *dialect) []string {
	var m []string
	for _, s := range []string{StatusUnpaid, StatusPaid, StatusInProcess} {
		if text, ok := d.statusText[s]; ok {
			if d.upperStatusMap {
				text = strings.ToUpper(text)
			}
			m = append(m, q(text)+": "+s)
		}
	}
	return m
}

var plainKey = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// flowMap writes pairs as a YAML flow mapping, values quoted.
func flowMap(pairs [][2]string) string {
	items := make([]string, 0, len(pairs))
	for _, kv := range pairs {
		k := kv[0]
		if !plainKey.MatchString(k) {
			k = q(k)
		}
		items = append(items, k+": "+q(kv[1]))
	}
	return "{" + strings.Join(items, ", ") + "}"
}

// sessionTTLYAML is how long the aggregator keeps a session: half the
// portal's idle lifetime, so that it renews before the portal forgets,
// written as a Go duration without trailing zero units ("5m", not "5m0s").
func sessionTTLYAML(portalTTL time.Duration) string {
	ttl := max(portalTTL/2, time.Second)
	s := ttl.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
