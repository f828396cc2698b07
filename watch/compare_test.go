package watch

import (
	"slices"
	"testing"

	"github.com/multas/aggregator"
)

func inf(id string, status aggregator.Status, mods ...func(*aggregator.Infraction)) aggregator.Infraction {
	i := aggregator.Infraction{Source: "caba", Jurisdiction: "CABA", ID: id, Date: "2026-03-14T09:12:00-03:00",
		Amount: "1000.00", Currency: "ARS", Status: status, Description: "Exceso de velocidad"}
	for _, m := range mods {
		m(&i)
	}
	return i
}

func TestDiff(t *testing.T) {
	t.Parallel()
	a, b, c := inf("A", aggregator.Unpaid), inf("B", aggregator.Unpaid), inf("C", aggregator.Paid)
	tests := []struct {
		name                    string
		before, after           []aggregator.Infraction
		added, removed, changed []string
	}{
		{"nothing", nil, nil, nil, nil, nil},
		{"same", []aggregator.Infraction{a, b}, []aggregator.Infraction{a, b}, nil, nil, nil},
		{"order is no change", []aggregator.Infraction{a, b}, []aggregator.Infraction{b, a}, nil, nil, nil},
		{"added in the answer's order", []aggregator.Infraction{a}, []aggregator.Infraction{c, a, b}, []string{"C", "B"}, nil, nil},
		{"removed in the last's order", []aggregator.Infraction{c, a, b}, []aggregator.Infraction{a}, nil, []string{"C", "B"}, nil},
		{"paid", []aggregator.Infraction{a}, []aggregator.Infraction{inf("A", aggregator.Paid)}, nil, nil, []string{"A"}},
		{"amount", []aggregator.Infraction{a}, []aggregator.Infraction{inf("A", aggregator.Unpaid, func(i *aggregator.Infraction) { i.Amount = "1200.00" })}, nil, nil, []string{"A"}},
		{"currency", []aggregator.Infraction{a}, []aggregator.Infraction{inf("A", aggregator.Unpaid, func(i *aggregator.Infraction) { i.Currency = "USD" })}, nil, nil, []string{"A"}},
		{"units appear", []aggregator.Infraction{a}, []aggregator.Infraction{inf("A", aggregator.Unpaid, func(i *aggregator.Infraction) {
			i.Units = &aggregator.Units{Value: "100.00", Code: "UF"}
		})}, nil, nil, []string{"A"}},
		{"units change", []aggregator.Infraction{inf("A", aggregator.Unpaid, func(i *aggregator.Infraction) { i.Units = &aggregator.Units{Value: "100.00", Code: "UF"} })},
			[]aggregator.Infraction{inf("A", aggregator.Unpaid, func(i *aggregator.Infraction) { i.Units = &aggregator.Units{Value: "100.00", Code: "UR"} })}, nil, nil, []string{"A"}},
		{"date, another instant", []aggregator.Infraction{a}, []aggregator.Infraction{inf("A", aggregator.Unpaid, func(i *aggregator.Infraction) { i.Date = "2026-03-14T10:12:00-03:00" })}, nil, nil, []string{"A"}},
		{"date, the same instant", []aggregator.Infraction{a}, []aggregator.Infraction{inf("A", aggregator.Unpaid, func(i *aggregator.Infraction) { i.Date = "2026-03-14T12:12:00Z" })}, nil, nil, nil},
		{"date appears", []aggregator.Infraction{inf("A", aggregator.Unpaid, func(i *aggregator.Infraction) { i.Date = "" })}, []aggregator.Infraction{a}, nil, nil, []string{"A"}},
		{"description is no change", []aggregator.Infraction{a}, []aggregator.Infraction{inf("A", aggregator.Unpaid, func(i *aggregator.Infraction) { i.Description = "Otra"; i.Place = "Otro" })}, nil, nil, nil},
		{"all at once", []aggregator.Infraction{a, b}, []aggregator.Infraction{inf("B", aggregator.InProcess), c}, []string{"C"}, []string{"A"}, []string{"B"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Diff(unique(tt.before), unique(tt.after))
			if ids := ids(got.Added); !slices.Equal(ids, nonNil(tt.added)) {
				t.Errorf("added %v, want %v", ids, tt.added)
			}
			if ids := ids(got.Removed); !slices.Equal(ids, nonNil(tt.removed)) {
				t.Errorf("removed %v, want %v", ids, tt.removed)
			}
			var changed []string
			for _, c := range got.Changed {
				if c.Before.ID != c.After.ID {
					t.Errorf("a change from %s to %s", c.Before.ID, c.After.ID)
				}
				changed = append(changed, c.After.ID)
			}
			if !slices.Equal(changed, tt.changed) {
				t.Errorf("changed %v, want %v", changed, tt.changed)
			}
			if got.Len() != len(tt.added)+len(tt.removed)+len(tt.changed) {
				t.Errorf("Len %d", got.Len())
			}
		})
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// An infraction is its (source, id): in one answer the first wins, and a
// stale mark never survives.
func TestUnique(t *testing.T) {
	t.Parallel()
	first := inf("A", aggregator.Unpaid)
	first.Stale = true
	in := []aggregator.Infraction{first, inf("B", aggregator.Paid), inf("A", aggregator.Paid), inf("B", aggregator.Unpaid)}
	in[3].Source = "cordoba"
	got := unique(in)
	if len(got) != 3 || got[0].Status != aggregator.Unpaid || got[0].Stale || got[1].ID != "B" || got[2].Source != "cordoba" {
		t.Errorf("unique = %+v", got)
	}
}
