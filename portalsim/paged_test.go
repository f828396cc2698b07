package portalsim_test

import (
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/multas/aggregator/portalsim"
)

// pagedJurisdiction has seven records for DemoPlate, in pages of three.
func pagedJurisdiction(style portalsim.PagingStyle) portalsim.Jurisdiction {
	var recs []portalsim.Record
	for i := range 7 {
		recs = append(recs, portalsim.Record{Domain: portalsim.DemoPlate, CUIT: portalsim.DemoCUIT, ID: "P-" + itoa(i+1),
			Date: "2026-03-14T09:12:00", Amount: "12345.675", Currency: "ARS", Status: portalsim.StatusUnpaid})
	}
	j := portalsim.NewJurisdiction(portalsim.ShapePaged, "paged", "Paginada", recs)
	j.Paging = portalsim.Paging{Style: style, Size: 3}
	return j
}

type pagedPage struct {
	Actas []struct {
		Numero  string      `json:"numero"`
		Fecha   string      `json:"fecha"`
		Importe json.Number `json:"importe"`
		Estado  string      `json:"estado"`
	} `json:"actas"`
	Paginacion map[string]any `json:"paginacion"`
}

func (p pagedPage) ids() []string {
	var ids []string
	for _, a := range p.Actas {
		ids = append(ids, a.Numero)
	}
	return ids
}

func TestPagedStylesSpanThreePages(t *testing.T) {
	t.Parallel()
	wantPages := [][]string{{"P-1", "P-2", "P-3"}, {"P-4", "P-5", "P-6"}, {"P-7"}}
	for _, style := range portalsim.PagingStyles() {
		t.Run(string(style), func(t *testing.T) {
			t.Parallel()
			p, base, client := startPortal(t, pagedJurisdiction(style))
			first := map[portalsim.PagingStyle]string{
				portalsim.PagePages:  "page=1&size=3",
				portalsim.PageOffset: "offset=0&limit=3",
				portalsim.PageCursor: "cursor=&limit=3",
				portalsim.PageLink:   "per_page=3",
			}[style]
			next := base + "/api/v1/actas?dominio=AB123CD&" + first
			var pages []pagedPage
			for len(pages) < 5 && next != "" {
				got, err := get(t.Context(), client, next)
				if err != nil {
					t.Fatal(err)
				}
				var pg pagedPage
				if err := json.Unmarshal(got.body, &pg); got.status != 200 || err != nil {
					t.Fatalf("%s: %d %s", next, got.status, got.body)
				}
				pages = append(pages, pg)
				n := len(pages)
				next = ""
				switch style {
				case portalsim.PagePages:
					if pg.Paginacion["pagina"] != float64(n) || pg.Paginacion["tamanio"] != float64(3) || pg.Paginacion["total"] != float64(7) {
						t.Errorf("page %d: paginacion %v", n, pg.Paginacion)
					}
					if len(pg.Actas) == 3 {
						next = base + "/api/v1/actas?dominio=AB123CD&size=3&page=" + itoa(n+1)
					}
				case portalsim.PageOffset:
					if pg.Paginacion["desde"] != float64(3*(n-1)) || pg.Paginacion["limite"] != float64(3) || pg.Paginacion["total"] != float64(7) {
						t.Errorf("page %d: paginacion %v", n, pg.Paginacion)
					}
					if len(pg.Actas) == 3 {
						next = base + "/api/v1/actas?dominio=AB123CD&limit=3&offset=" + itoa(3*n)
					}
				case portalsim.PageCursor:
					if c, ok := pg.Paginacion["siguiente"].(string); ok {
						next = base + "/api/v1/actas?dominio=AB123CD&limit=3&cursor=" + url.QueryEscape(c)
					}
				case portalsim.PageLink:
					link := got.header.Get("Link")
					if !strings.Contains(link, `rel="first"`) || !strings.Contains(link, "<"+base+"/api/v1/actas?") {
						t.Errorf("page %d: Link %q lacks an absolute first", n, link)
					}
					next = nextLink(link)
					body, _ := pg.Paginacion["siguiente"].(string)
					if next != "" && (body == "" || base+body != next) || next == "" && body != "" {
						t.Errorf("page %d: body next %q, Link next %q", n, body, next)
					}
				}
			}
			if len(pages) != 3 {
				t.Fatalf("%d pages, want 3", len(pages))
			}
			for i, pg := range pages {
				if !slices.Equal(pg.ids(), wantPages[i]) {
					t.Errorf("page %d = %v, want %v", i+1, pg.ids(), wantPages[i])
				}
			}
			a := pages[0].Actas[0]
			if a.Fecha != "2026-03-14 09:12:00" || a.Importe != "12345.675" || a.Estado != "pendiente_de_pago" {
				t.Errorf("acta = %+v", a)
			}
			if got := p.Calls().ByDomain; got != 3 {
				t.Errorf("%d by_domain calls, want 3", got)
			}
		})
	}
}

func TestPagedParameters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		style  portalsim.PagingStyle
		query  string
		status int
		ids    int
	}{
		{portalsim.PagePages, "", 200, 3}, // the first page, of the default size
		{portalsim.PagePages, "page=2", 200, 3},
		{portalsim.PagePages, "page=1&size=5", 200, 5},
		{portalsim.PagePages, "page=4&size=3", 200, 0}, // past the last page
		{portalsim.PagePages, "page=0", 400, 0},
		{portalsim.PagePages, "page=x", 400, 0},
		{portalsim.PagePages, "size=0", 400, 0},
		{portalsim.PagePages, "size=101", 400, 0},
		{portalsim.PageOffset, "offset=6&limit=3", 200, 1},
		{portalsim.PageOffset, "offset=99", 200, 0},
		{portalsim.PageOffset, "offset=-1", 400, 0},
		{portalsim.PageCursor, "cursor=nonsense", 400, 0},
		{portalsim.PageCursor, "cursor=" + url.QueryEscape("ZGVzZGU9Ng"), 200, 1}, // "desde=6"
		{portalsim.PageLink, "page=3&per_page=3", 200, 1},
	}
	ports := make(map[portalsim.PagingStyle]string)
	var client = newClient(t)
	for _, s := range portalsim.PagingStyles() {
		_, ports[s], _ = startPortal(t, pagedJurisdiction(s))
	}
	for _, tt := range tests {
		got, err := get(t.Context(), client, ports[tt.style]+"/api/v1/actas?dominio=AB123CD&"+tt.query)
		if err != nil {
			t.Fatal(err)
		}
		var pg pagedPage
		json.Unmarshal(got.body, &pg)
		if got.status != tt.status || len(pg.Actas) != tt.ids {
			t.Errorf("%s %s: %d with %d actas, want %d with %d (%s)", tt.style, tt.query, got.status, len(pg.Actas), tt.status, tt.ids, got.body)
		}
	}
}
