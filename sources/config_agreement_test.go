package sources_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/sources"
)

// TestConfigAgreesOnSelectors: package config checks response selectors
// at start-up with its own code; it must accept exactly what New accepts.
func TestConfigAgreesOnSelectors(t *testing.T) {
	t.Parallel()
	selectors := map[string][]string{
		"json": {"", "/a", "/a~1b/0", "a", "/a~2", "/a~"},
		"xml": {"", ".", "//acta", "@nro", "m:nro", "q:nro", "count(//a)", "concat(a, 'x')", "//(", "nro[", "a/b/@c",
			"//m:acta[position() > 1]", "string(", "@", "*", "/", "unknown-fn(a)"},
		"html": {"", ".", "@id", ".@id", "td", "td@", "td@data-x", "tr:nth-child(n+2)", "td:nth-child(", "div[[",
			`a[href="mailto:x@y"]`, `a[href="x@y"]@href`, "a > b, c", "@@", "tr@id@x", "p:contains(x)", "#", "li:first-child@title"},
	}
	for format, list := range selectors {
		for _, sel := range list {
			for _, role := range []string{"items", "field", "not_found"} {
				t.Run(fmt.Sprintf("%s %s %q", format, role, sel), func(t *testing.T) {
					t.Parallel()
					items, field, notFound := "/actas", "/nro", ""
					if format != "json" {
						items, field = "//acta", "nro"
						if format == "html" {
							items, field = "tr", "td"
						}
					}
					switch role {
					case "items":
						items = sel
					case "field":
						field = sel
					default:
						notFound = sel
					}
					ns := map[string]string(nil)
					nsYAML := ""
					if format == "xml" {
						ns, nsYAML = map[string]string{"m": "urn:multas"}, `namespaces: {m: "urn:multas"}, `
					}
					yaml := fmt.Sprintf(`sources:
  - id: x
    jurisdiction: X
    base_url: http://127.0.0.1:1
    operations: {by_domain: {path: "/q?d={domain}"}}
    response: {format: %s, %sitems: %s, fields: {id: %s}, not_found: %s}
`, format, nsYAML, strconv.Quote(items), strconv.Quote(field), strconv.Quote(notFound))
					_, cfgErr := config.Parse([]byte(yaml), "agree.yaml", nil)
					_, newErr := sources.New(sources.Spec{
						ID: "x", Jurisdiction: "X", BaseURL: "http://127.0.0.1:1",
						Operations: map[aggregator.Operation]sources.OperationSpec{aggregator.ByDomain: {Path: "/q?d={domain}"}},
						Format:     format, Namespaces: ns, Items: items, Fields: map[string]string{"id": field}, NotFound: notFound,
					}, nil, nil)
					if (cfgErr == nil) != (newErr == nil) {
						t.Errorf("config says %v; sources.New says %v", cfgErr, newErr)
					}
				})
			}
		}
	}
}
