package sources

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/multas/aggregator"
)

// Inspect maps what Lookup maps, and goes on past the problems that make
// Lookup refuse an answer, reporting each field by item.
func TestInspect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, format, items string
		fields              map[string]string
		notFound            string
		body, contentType   string
		wantIDs             []string
		wantProblems        []string // FieldProblem.String(), item by item
		wantRefused         []bool
		wantNotFound        bool
	}{
		{name: "json", items: "/actas", fields: map[string]string{"id": "/nro", "amount": "/monto", "date": "/fecha", "place": "/lugar"},
			body:    `{"actas":[{"nro":"A","monto":"doce","fecha":"ayer"},{"nro":7,"monto":10,"lugar":{"x":1}},{"monto":"1"}]}`,
			wantIDs: []string{"A", "7", ""},
			wantProblems: []string{`date: "ayer" is not a date`, `place: selector "/lugar" matched nothing`, `amount: "doce" is not an amount`,
				`date: selector "/fecha" matched nothing`, `place: "{\"x\":1}" is not text`,
				`id: selector "/nro" matched nothing`, `date: selector "/fecha" matched nothing`, `place: selector "/lugar" matched nothing`},
			wantRefused: []bool{true, true, true}},
		{name: "html", format: "html", items: "table tr", fields: map[string]string{"id": "td:nth-child(1)", "place": "td:nth-child(4)", "status": "td:nth-child(2)"},
			body: `<table><tr><td>A-1</td><td>IMPAGA</td></tr><tr><td>A-2</td><td>RARA</td></tr></table>`, contentType: "text/html",
			wantIDs: []string{"A-1", "A-2"},
			wantProblems: []string{`place: selector "td:nth-child(4)" matched nothing`,
				`place: selector "td:nth-child(4)" matched nothing`, `status: "RARA" is not in response.status_map (status unknown)`},
			wantRefused: []bool{false, false}},
		{name: "xml", format: "xml", items: "//acta", fields: map[string]string{"id": "@nro", "amount": "importe"},
			body: `<r><acta nro="1"><importe>$ 1.234,56</importe></acta></r>`, contentType: "text/xml",
			wantIDs: []string{"1"}, wantRefused: []bool{false}},
		{name: "not found", format: "html", items: "li", notFound: "p.vacio", fields: map[string]string{"id": "b"},
			body: `<p class="vacio">Sin actas</p>`, wantNotFound: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := New(Spec{ID: "x", BaseURL: "http://portal.example", Format: tt.format, Items: tt.items, Fields: tt.fields,
				NotFound: tt.notFound, StatusMap: map[string]string{"IMPAGA": "unpaid"},
				Operations: map[aggregator.Operation]OperationSpec{aggregator.ByDomain: {Path: "/{domain}"}}}, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			ins, err := s.Inspect(context.Background(), []byte(tt.body), tt.contentType)
			if err != nil {
				t.Fatal(err)
			}
			if ins.NotFound != tt.wantNotFound {
				t.Errorf("NotFound = %v, want %v", ins.NotFound, tt.wantNotFound)
			}
			var ids, problems []string
			var refused []bool
			for _, it := range ins.Items {
				ids = append(ids, it.Infraction.ID)
				refused = append(refused, it.Refused)
				for _, p := range it.Problems {
					problems = append(problems, p.String())
				}
			}
			if !slices.Equal(ids, tt.wantIDs) || !slices.Equal(refused, tt.wantRefused) {
				t.Errorf("ids %q refused %v, want %q %v", ids, refused, tt.wantIDs, tt.wantRefused)
			}
			if !slices.Equal(problems, tt.wantProblems) {
				t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(tt.wantProblems, "\n"))
			}
		})
	}
}

// Inspect reads any answer without panicking, and reports no more items
// than the answer has bytes.
func FuzzInspect(f *testing.F) {
	f.Add(uint8(0), `{"a":[{"id":"1","m":"x"}]}`)
	f.Add(uint8(1), `<r><a><id>1</id><m>1,2</m></a></r>`)
	f.Add(uint8(2), `<table><tr class="a"><td>1</td><td>$ 3</td></tr></table>`)
	specs := []Spec{
		{Items: "/a", Fields: map[string]string{"id": "/id", "amount": "/m", "date": "/d"}},
		{Format: "xml", Items: "//a", Fields: map[string]string{"id": "id", "amount": "m", "date": "d"}},
		{Format: "html", Items: "tr", Fields: map[string]string{"id": "td:nth-child(1)", "amount": "td:nth-child(2)", "date": "td:nth-child(3)@x"}},
	}
	var srcs []*Source
	for _, sp := range specs {
		sp.ID, sp.BaseURL = "x", "http://portal.example"
		sp.Operations = map[aggregator.Operation]OperationSpec{aggregator.ByDomain: {Path: "/{domain}"}}
		s, err := New(sp, nil, nil)
		if err != nil {
			f.Fatal(err)
		}
		srcs = append(srcs, s)
	}
	f.Fuzz(func(t *testing.T, which uint8, body string) {
		ins, err := srcs[int(which)%len(srcs)].Inspect(context.Background(), []byte(body), "")
		if err == nil && len(ins.Items) > len(body) {
			t.Errorf("%d items from %d bytes", len(ins.Items), len(body))
		}
	})
}
