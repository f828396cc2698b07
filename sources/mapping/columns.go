package mapping

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/net/html"
	"golang.org/x/text/unicode/norm"

	"github.com/multas/aggregator/sources/document"
)

// Columns (SPEC 12 `column`, `header`): a field can name the column of
// an html table by its header text instead of its position, so that an
// issuer that adds, drops or moves a column cannot shift the values. The
// header is the first row that has th cells (or the table's first row),
// or the row of the first cell that `header` selects in the item's table;
// colspan counts. Header texts are compared trimmed, without regard to
// case, accents or spacing. A column that no header names makes the
// answer unreadable: a layout change is loud.

// maxColspan bounds a cell's colspan, as browsers do.
const maxColspan = 1000

// headerRow is the header of one table.
type headerRow struct {
	row   *html.Node
	cells []headerCell
}

type headerCell struct {
	folded      string
	start, span int
}

// foldHeader is a header text as compared: without case, accents and
// white space.
func foldHeader(s string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(s) {
		switch {
		case unicode.Is(unicode.Mn, r), unicode.IsSpace(r):
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// rowOf is the table row an item element is, or is in; nil when none.
func rowOf(n *html.Node) *html.Node {
	for ; n != nil; n = n.Parent {
		if n.Type == html.ElementNode && n.Data == "tr" {
			return n
		}
	}
	return nil
}

// tableOf is the table a row belongs to.
func tableOf(row *html.Node) *html.Node {
	for n := row.Parent; n != nil; n = n.Parent {
		if n.Type == html.ElementNode && n.Data == "table" {
			return n
		}
	}
	return nil
}

// rows calls visit on every row of table t (not of tables inside it), in
// order, until visit returns true.
func rows(t *html.Node, visit func(*html.Node) bool) {
	for c := t.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode {
			continue
		}
		switch c.Data {
		case "tr":
			if visit(c) {
				return
			}
		case "thead", "tbody", "tfoot":
			for r := c.FirstChild; r != nil; r = r.NextSibling {
				if r.Type == html.ElementNode && r.Data == "tr" && visit(r) {
					return
				}
			}
		}
	}
}

// cells lists the td and th cells of a row.
func cells(row *html.Node) []*html.Node {
	var out []*html.Node
	for c := row.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
			out = append(out, c)
		}
	}
	return out
}

// colspan is a cell's colspan attribute, 1 when absent or wrong.
func colspan(c *html.Node) int {
	for _, a := range c.Attr {
		if a.Namespace == "" && a.Key == "colspan" {
			n, err := strconv.Atoi(strings.TrimSpace(a.Val))
			if err != nil || n < 1 {
				return 1
			}
			return min(n, maxColspan)
		}
	}
	return 1
}

// header finds (once per table) the header of table t.
func (r *run) header(d *document.Document, t *html.Node) *headerRow {
	if h, ok := r.tables[t]; ok {
		return h
	}
	var row *html.Node
	var list []*html.Node
	if r.m.header != nil {
		for _, c := range d.HTMLAll(*r.m.header, t) {
			if row == nil {
				row = c.Parent
			}
			if c.Parent == row {
				list = append(list, c)
			}
		}
	} else {
		var first *html.Node
		rows(t, func(tr *html.Node) bool {
			if first == nil {
				first = tr
			}
			for _, c := range cells(tr) {
				if c.Data == "th" {
					row = tr
					return true
				}
			}
			return false
		})
		if row == nil {
			row = first
		}
		if row != nil {
			list = cells(row)
		}
	}
	var h *headerRow
	if row != nil {
		h = &headerRow{row: row}
		pos := 0
		for _, c := range list {
			span := colspan(c)
			h.cells = append(h.cells, headerCell{folded: foldHeader(d.HTMLText(c, 512)), start: pos, span: span})
			pos += span
		}
	}
	if r.tables == nil {
		r.tables = map[*html.Node]*headerRow{}
	}
	r.tables[t] = h
	return h
}

// isHeaderRow reports whether the item at n is its table's header row,
// which columns name and which is no infraction.
func (r *run) isHeaderRow(d *document.Document, n document.Node) bool {
	row := rowOf(n.HTML())
	if row == nil {
		return false
	}
	t := tableOf(row)
	if t == nil {
		return false
	}
	h := r.header(d, t)
	return h != nil && h.row == row
}

// column reads the cell under the header named by one of the
// alternatives (folded), in the row of the item at n: the text of every
// cell that the header cell spans, joined by a space.
func (r *run) column(d *document.Document, n document.Node, alts, folded []string) (string, error) {
	row := rowOf(n.HTML())
	var t *html.Node
	if row != nil {
		t = tableOf(row)
	}
	if t == nil {
		return "", fmt.Errorf("column %q: the item is not in a table row", alts[0])
	}
	h := r.header(d, t)
	if h == nil {
		return "", fmt.Errorf("column %q: the item's table has no header row", alts[0])
	}
	for _, want := range folded {
		for _, hc := range h.cells {
			if hc.folded != want {
				continue
			}
			var texts []string
			pos := 0
			for _, c := range cells(row) {
				span := colspan(c)
				if pos < hc.start+hc.span && pos+span > hc.start {
					if t := d.HTMLText(c, fieldLimit); t != "" {
						texts = append(texts, t)
					}
				}
				pos += span
			}
			return strings.Join(texts, " "), nil
		}
	}
	return "", fmt.Errorf("column %s: no header cell of the item's table names it (the table's layout changed?)", quoteAll(alts))
}

// quoteAll writes alternatives as "a" / "b".
func quoteAll(alts []string) string {
	q := make([]string, len(alts))
	for i, a := range alts {
		q[i] = strconv.Quote(a)
	}
	return strings.Join(q, " / ")
}
