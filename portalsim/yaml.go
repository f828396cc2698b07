package portalsim

import (
	"fmt"
	"strconv"
	"strings"
)

// AggregatorYAML renders the `sources:` list of the aggregator's config
// (SPEC 6) for js: each portal's base URL from baseURLs (by jurisdiction
// id), its three operations with its own path templates (by_id with
// `accepts: [cuit]` where the portal takes CUITs only), and the response
// mapping of its shape: items pointer (the empty pointer, the whole
// document, for a top-level array), field pointers and status_map. The
// caller prepends the other sections.
//
// A source of a SPEC 8 dialect (ShapeSOAP, ShapeHTML, ShapePaged,
// ShapeOAuth2, ShapeSession) is written in SPEC 8's keys: operations with
// method, path, query, headers and body; response with format,
// namespaces, items and fields as XPath or CSS selectors, not_found,
// unavailable and status_map; pagination; auth.oauth2 or auth.session. A jurisdiction without a base URL is
// left out; an unknown shape is written as a YAML comment, so a config
// built from it fails validation instead of silently missing a source.
//
// A source of a SPEC 12 shape (RealShapes) is written in SPEC 12's keys
// as well, with its locale (time_zone, currency): each shape's constant
// says what its mapping reads and how.
func AggregatorYAML(js []Jurisdiction, baseURLs map[string]string) string {
	var b strings.Builder
	var entries []string
	for _, j := range js {
		base, ok := baseURLs[j.ID]
		if !ok {
			continue
		}
		entries = append(entries, sourceYAML(j, base))
	}
	if len(entries) == 0 {
		return "sources: []\n"
	}
	b.WriteString("sources:\n")
	for _, e := range entries {
		b.WriteString(e)
	}
	return b.String()
}

func sourceYAML(j Jurisdiction, base string) string {
	d, err := dialectOf(j.Shape)
	if err == nil && d.mapping != nil {
		return realYAML(d.mapping(d, j.withDefaults(), base))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "  - id: %s\n", q(j.ID))
	fmt.Fprintf(&b, "    jurisdiction: %s\n", q(j.Name))
	fmt.Fprintf(&b, "    base_url: %s\n", q(base))
	if err != nil {
		fmt.Fprintf(&b, "    # %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		return b.String()
	}
	switch j.Shape {
	case ShapeSOAP, ShapeHTML, ShapePaged, ShapeOAuth2, ShapeSession:
		dialectYAML(&b, j, d, base)
		return b.String()
	}
	b.WriteString("    operations:\n")
	fmt.Fprintf(&b, "      by_domain: {method: GET, path: %s}\n", q(d.byDomain))
	accepts := ""
	if d.cuitOnly {
		accepts = ", accepts: [cuit]"
	}
	fmt.Fprintf(&b, "      by_id: {method: GET, path: %s%s}\n", q(d.byID), accepts)
	fmt.Fprintf(&b, "      voucher: {method: GET, path: %s}\n", q(d.voucher))
	b.WriteString("    response:\n")
	if d.decimal != "" {
		fmt.Fprintf(&b, "      decimal: %s\n", q(d.decimal))
	}
	fmt.Fprintf(&b, "      items: %s\n", q(d.items))
	fields := make([]string, 0, len(d.fields))
	for _, f := range d.fields {
		fields = append(fields, f.name+": "+q(f.sel))
	}
	fmt.Fprintf(&b, "      fields: {%s}\n", strings.Join(fields, ", "))
	fmt.Fprintf(&b, "      status_map: {%s}\n", strings.Join(statusMapYAML(d), ", "))
	return b.String()
}

// q writes s as a YAML double-quoted scalar. Go's quoting of printable
// UTF-8 text (\" \\ and \u escapes) is valid YAML.
func q(s string) string { return strconv.Quote(s) }
