package sources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/mapping"
)

// Hostile portals (issue 18, SPEC 9: "what a portal sends is bounded in
// what it produces"): pages whose items nest inside each other, which
// used to copy a whole subtree into every item of every level.

// nestedHTML is a page in the shape of the README's tucuman mapping whose
// rows hold, in their description cell, another table#actas, 120 levels deep
// (x/net/html's bound is 512 open elements), chains times, each level
// carrying filler bytes of text: about chains·480·filler bytes.
func nestedHTML(chains, filler int) string {
	var b strings.Builder
	b.WriteString(`<html><body>`)
	text := strings.Repeat("x", filler)
	const depth = 120 // table, tbody, tr, td: four open elements a level
	for c := range chains {
		for l := range depth {
			fmt.Fprintf(&b, `<table id="actas"><tbody><tr><td>N-%d-%d</td><td>21/02/2026 10:45</td><td>Cruce %s`, c, l, text)
		}
		for range depth {
			b.WriteString(`</td><td>Calle</td><td>$ 87.300,00</td><td>Impaga</td></tr></tbody></table>`)
		}
	}
	b.WriteString(`</body></html>`)
	return b.String()
}

// nestedXML is the same attack in XML: acta elements nested 480 deep.
func nestedXML(chains, filler int) string {
	var b strings.Builder
	b.WriteString(`<actas>`)
	text := strings.Repeat("x", filler)
	const depth = 480
	for c := range chains {
		for l := range depth {
			fmt.Fprintf(&b, `<acta><nro>N-%d-%d</nro><detalle>%s</detalle>`, c, l, text)
		}
		b.WriteString(strings.Repeat(`</acta>`, depth))
	}
	b.WriteString(`</actas>`)
	return b.String()
}

func TestNestedItemsAreBounded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body, contentType string
		response                mapping.Response
	}{
		{"html, the README's tucuman mapping", nestedHTML(2, 7000), "text/html", mapping.Response{Format: "html",
			Items: items("table#actas tbody tr"), NotFound: "p.sin-resultados",
			Fields: fields(map[string]string{"id": "td:nth-child(1)", "date": "td:nth-child(2)", "description": "td:nth-child(3)",
				"place": "td:nth-child(4)", "amount": "td:nth-child(5)", "status": "td:nth-child(6)"})}},
		{"xml, the item itself and its descendants", nestedXML(2, 1800), "text/xml", mapping.Response{Format: "xml",
			Items: items("//acta"), Fields: fields(map[string]string{"id": "nro", "description": "."})}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := portal(t, serve(tt.contentType, []byte(tt.body)))
			spec := testSpec(srv.URL)
			spec.Response = tt.response
			spec.Response.Decimal = ","
			spec.MaxResponseBytes = 4 << 20
			s := newSource(t, spec, srv.Client())
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			ans, err := s.Lookup(context.Background(), domainQuery)
			took := time.Since(start)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatalf("Lookup: %v", err)
			}
			out, _ := json.Marshal(ans.Infractions)
			allocated := after.TotalAlloc - before.TotalAlloc
			t.Logf("%d-byte page: %d items, a %d-byte answer, %d MB allocated, %v", len(tt.body), len(ans.Infractions), len(out), allocated>>20, took)
			if len(ans.Infractions) != 240 && len(ans.Infractions) != 960 {
				t.Errorf("%d items, want every level of both chains", len(ans.Infractions))
			}
			// Each item's text is its own: the answer is about the size of
			// the page, never a copy of the subtree per level.
			if len(out) > 2*len(tt.body)+64<<10 {
				t.Errorf("a %d-byte page made a %d-byte answer", len(tt.body), len(out))
			}
			// Allocations are bounded by a small multiple of the page (parse
			// trees, the answer), where copying subtrees cost gigabytes.
			if limit := uint64(40 * len(tt.body)); allocated > limit {
				t.Errorf("%d bytes allocated for a %d-byte page, want at most %d", allocated, len(tt.body), limit)
			}
			for _, inf := range ans.Infractions {
				if len([]rune(inf.Description)) > 1000 || strings.Count(inf.ID, "N-") > 1 || strings.Count(inf.Description, "N-") > 1 {
					t.Fatalf("item %q carries another item's text", inf.ID[:min(40, len(inf.ID))])
				}
			}
		})
	}
}

// TestMaxItems: more items than response.max_items is source-error.
func TestMaxItems(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString(`{"resultado": {"actas": [`)
	for i := range 1001 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"nro": "%d"}`, i)
	}
	b.WriteString(`]}}`)
	srv := portal(t, serve("application/json", []byte(b.String())))
	s := newSource(t, testSpec(srv.URL), srv.Client())
	_, err := s.Lookup(context.Background(), domainQuery)
	if e := checkError(t, err, aggregator.Unreadable, http.StatusOK, 0); e != nil && !strings.Contains(err.Error(), "max_items") {
		t.Errorf("err = %v, want one naming max_items", err)
	}
	spec := testSpec(srv.URL)
	spec.Response.MaxItems = 2000
	if ans, err := newSource(t, spec, srv.Client()).Lookup(context.Background(), domainQuery); err != nil || len(ans.Infractions) != 1001 {
		t.Errorf("with max_items 2000: %d infractions, %v", len(ans.Infractions), err)
	}
}

// TestMappingStopsAtTheDeadline: an XPath whose cost is quadratic in a
// hostile page (every node compared with every other) stops with the
// call, as CSS matching does.
func TestMappingStopsAtTheDeadline(t *testing.T) {
	t.Parallel()
	page := "<r>" + strings.Repeat("<a><b>1</b></a>", 20000) + "</r>"
	srv := portal(t, serve("text/xml", []byte(page)))
	spec := testSpec(srv.URL)
	spec.Response = mapping.Response{Format: "xml", Items: items("/r"), Fields: fields(map[string]string{"id": "count(//b[count(following::b) > 0])"})}
	s := newSource(t, spec, srv.Client())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := s.Lookup(ctx, domainQuery)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Lookup = %v, want the deadline", err)
	}
}

// TestCharsetLabels: labels are read as browsers read them, and a
// configured utf-8 wins over what the page declares.
func TestCharsetLabels(t *testing.T) {
	t.Parallel()
	const page = `<html><head><meta charset="%s"></head><body><table><tr><td>1</td><td>Córdoba</td></tr></table></body></html>`
	tests := []struct {
		name, meta, configured string
	}{
		// A page that declares UTF-16 in its meta is ASCII-compatible: browsers read it as UTF-8.
		{"utf-16le meta", "utf-16le", ""},
		{"utf-16 meta", "utf-16", ""},
		// A UTF-8 page whose meta lies: charset: utf-8 forces the truth.
		{"configured utf-8 over a latin1 meta", "iso-8859-1", "utf-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := portal(t, serve("text/html", fmt.Appendf(nil, page, tt.meta)))
			spec := testSpec(srv.URL)
			spec.Response = mapping.Response{Format: "html", Charset: tt.configured, NotFound: "p.vacio", Items: items("tr"),
				Fields: fields(map[string]string{"id": "td:nth-child(1)", "place": "td:nth-child(2)"})}
			ans, err := newSource(t, spec, srv.Client()).Lookup(context.Background(), domainQuery)
			if err != nil || len(ans.Infractions) != 1 || ans.Infractions[0].Place != "Córdoba" {
				t.Fatalf("Lookup = %+v, %v; want one infraction at Córdoba", ans.Infractions, err)
			}
		})
	}
}

// TestProblemDetailBounded: what the portal says never makes a large or
// raw detail (an XML element name of a megabyte, a rule's detail).
func TestProblemDetailBounded(t *testing.T) {
	t.Parallel()
	name := strings.Repeat("n", 1<<20)
	srv := portal(t, serve("text/xml", []byte("<actas><"+name+"></actas>")))
	spec := testSpec(srv.URL)
	spec.Response = mapping.Response{Format: "xml", Items: items("//acta"), Fields: fields(map[string]string{"id": "nro"})}
	_, err := newSource(t, spec, srv.Client()).Lookup(context.Background(), domainQuery)
	if err == nil || len(err.Error()) > 1000 {
		t.Errorf("err = %d bytes, want an error of at most 1000", len(fmt.Sprint(err)))
	}
	long := strings.Repeat("captcha \u202e\u200b ", 200)
	srv = portal(t, serve("application/json", []byte(`{"error": true, "mensaje": "`+long+`"}`)))
	spec = testSpec(srv.URL)
	spec.Response.Errors = []mapping.Rule{{When: &mapping.When{Select: "/error"}, Outcome: "rejected", Detail: "/mensaje"}}
	_, err = newSource(t, spec, srv.Client()).Lookup(context.Background(), domainQuery)
	var e *Error
	if !errors.As(err, &e) || e.Outcome != aggregator.Rejected {
		t.Fatalf("err = %v, want source-rejected", err)
	}
	if n := len([]rune(e.Detail)); n > 200 || strings.ContainsAny(e.Detail, "\u202e\u200b") || !strings.HasPrefix(e.Detail, "captcha captcha") {
		t.Errorf("detail %q (%d characters), want plain text of at most 200", e.Detail, n)
	}
	if strings.Contains(err.Error(), "captcha") {
		t.Errorf("the portal's detail is in the error's text (which is logged): %v", err)
	}
}
