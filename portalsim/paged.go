package portalsim

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// pagedDialect is ShapePaged, a JSON API that answers in pages, in the
// style of Jurisdiction.Paging (see PagingStyle for each style's
// parameters and members):
//
//	GET /api/v1/actas?dominio={domain}&page=1&size=3
//	GET /api/v1/actas?documento={id}&page=1&size=3
//	GET /api/v1/actas/{infraction_id}/comprobante
//	{"actas": [{"numero": "CHU-1", "fecha": "2026-03-14 09:12:00",
//	  "infraccion": "…", "lugar": "…", "importe": 185000.00, "moneda": "ARS",
//	  "estado": "pendiente_de_pago"}],
//	 "paginacion": {"pagina": 1, "tamanio": 3, "total": 7}}
//
// Dates are zone-less with a space; amounts are JSON numbers written as
// the record's decimal (185000.00, 12345.675). A page past the last is 200
// with no actas; a page parameter that is not a number in range, or a
// cursor the portal did not write, is a 400.
func pagedDialect() *dialect {
	return &dialect{
		byDomain: "/api/v1/actas?dominio={domain}",
		byID:     "/api/v1/actas?documento={id}",
		voucher:  "/api/v1/actas/{infraction_id}/comprobante",
		items:    "/actas",
		fields: []field{{"id", "/numero"}, {"date", "/fecha"}, {"description", "/infraccion"},
			{"place", "/lugar"}, {"amount", "/importe"}, {"currency", "/moneda"}, {"status", "/estado"}},
		statusText: map[string]string{StatusUnpaid: "pendiente_de_pago", StatusPaid: "cancelada", StatusInProcess: "en_gestion"},
		answer:     pagedAnswer,
	}
}

// pageParams are the query parameters of each style: where the page
// starts, and its size.
func pageParams(s PagingStyle) (start, size string) {
	switch s {
	case PageOffset:
		return "offset", "limit"
	case PageCursor:
		return "cursor", "limit"
	case PageLink:
		return "page", "per_page"
	}
	return "page", "size"
}

type pagedActa struct {
	Numero     string      `json:"numero,omitempty"`
	Fecha      string      `json:"fecha"`
	Infraccion string      `json:"infraccion"`
	Lugar      string      `json:"lugar"`
	Importe    json.Number `json:"importe"`
	Moneda     string      `json:"moneda,omitempty"`
	Estado     string      `json:"estado"`
}

type pagedBody struct {
	Actas      []pagedActa    `json:"actas"`
	Paginacion map[string]any `json:"paginacion"`
}

func pagedAnswer(p *Portal, w http.ResponseWriter, r *http.Request, _ kind, recs []Record) {
	g := p.j.Paging
	startName, sizeName := pageParams(g.Style)
	q := r.URL.Query()
	size := g.Size
	if v := q.Get(sizeName); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			p.fail(w, http.StatusBadRequest, "parámetro "+sizeName+" inválido")
			return
		}
		size = n
	}
	from := 0
	switch v := q.Get(startName); {
	case g.Style == PageCursor:
		if v != "" {
			n, ok := readCursor(v)
			if !ok {
				p.fail(w, http.StatusBadRequest, "cursor inválido")
				return
			}
			from = n
		}
	case v == "":
	default:
		n, err := strconv.Atoi(v)
		low := 1
		if g.Style == PageOffset {
			low = 0
		}
		if err != nil || n < low || n > 1_000_000 {
			p.fail(w, http.StatusBadRequest, "parámetro "+startName+" inválido")
			return
		}
		from = n
		if g.Style != PageOffset {
			from = (n - 1) * size
		}
	}
	page := recs[min(from, len(recs)):min(from+size, len(recs))]
	body := pagedBody{Actas: make([]pagedActa, 0, len(page)), Paginacion: map[string]any{}}
	for _, rec := range page {
		body.Actas = append(body.Actas, pagedActa{
			Numero: rec.ID, Fecha: recordTime(rec.Date).Format("2006-01-02 15:04:05"),
			Infraccion: rec.Description, Lugar: rec.Place, Importe: json.Number(rec.Amount),
			Moneda: rec.Currency, Estado: p.d.status(rec.Status),
		})
	}
	more := from+size < len(recs)
	switch g.Style {
	case PagePages:
		body.Paginacion["pagina"] = from/size + 1
		body.Paginacion["tamanio"] = size
		body.Paginacion["total"] = len(recs)
	case PageOffset:
		body.Paginacion["desde"] = from
		body.Paginacion["limite"] = size
		body.Paginacion["total"] = len(recs)
	case PageCursor:
		body.Paginacion["limite"] = size
		if more {
			body.Paginacion["siguiente"] = writeCursor(from + size)
		}
	case PageLink:
		first := pageURL(r, startName, 1)
		links := []string{"<" + absolute(r, first) + `>; rel="first"`}
		if more {
			next := pageURL(r, startName, from/size+2)
			links = append(links, "<"+absolute(r, next)+`>; rel="next"`)
			body.Paginacion["siguiente"] = next
		}
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	writeJSON(w, http.StatusOK, body)
}

// pageURL is r's path and query with the page parameter set to n.
func pageURL(r *http.Request, param string, n int) string {
	q := r.URL.Query()
	q.Set(param, strconv.Itoa(n))
	return r.URL.Path + "?" + q.Encode()
}

// absolute makes a path of the portal an absolute URL, as the client
// reached it.
func absolute(r *http.Request, path string) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: r.Host}).String() + path
}

// cursorPrefix starts every cursor's text: the cursor is opaque to
// clients, but the portal checks it wrote it.
const cursorPrefix = "desde="

func writeCursor(from int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + strconv.Itoa(from)))
}

func readCursor(c string) (int, bool) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimPrefix(string(b), cursorPrefix))
	if err != nil || !strings.HasPrefix(string(b), cursorPrefix) || n < 0 || n > 1_000_000 {
		return 0, false
	}
	return n, true
}
