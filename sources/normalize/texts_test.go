package normalize

import (
	"fmt"
	"testing"
	"time"
)

// TestTextsKeepEveryValue: values cut from shared chunks stay what they
// were however many come after them, across chunk boundaries, and a nil
// Texts gives the same values.
func TestTextsKeepEveryValue(t *testing.T) {
	t.Parallel()
	ba, err := time.LoadLocation("America/Argentina/Buenos_Aires")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		texts *Texts
	}{
		{"shared", &Texts{}},
		{"reserved", func() *Texts { var tx Texts; tx.Reserve(10); return &tx }()},
		{"nil", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			type kept struct{ got, want string }
			var all []kept
			for i := range 500 {
				amount, err := tt.texts.Amount(fmt.Sprintf("%d,5", i), Comma)
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, kept{amount, fmt.Sprintf("%d.50", i)})
				date, err := tt.texts.Date(Layouts{}, fmt.Sprintf("2026-03-%02d 09:12", i%28+1), false, ba, time.Time{})
				if err != nil {
					t.Fatal(err)
				}
				all = append(all, kept{date, fmt.Sprintf("2026-03-%02dT09:12:00-03:00", i%28+1)})
				all = append(all, kept{tt.texts.Clone(fmt.Sprint("place ", i)), fmt.Sprint("place ", i)})
			}
			for i, k := range all {
				if k.got != k.want {
					t.Fatalf("value %d = %q, want %q", i, k.got, k.want)
				}
			}
		})
	}
}

// TestTextsShareAllocations: an answer's values cost a chunk between
// them, not an allocation each.
func TestTextsShareAllocations(t *testing.T) {
	ba, _ := time.LoadLocation("America/Argentina/Buenos_Aires")
	allocs := testing.AllocsPerRun(50, func() {
		var tx Texts
		tx.Reserve(30 * 48)
		for range 30 {
			_, _ = tx.Amount("185.000,50", Comma)
			_, _ = tx.Date(Layouts{}, "2026-03-14T09:12:00", false, ba, time.Time{})
			_ = tx.Clone("Av. Lugones km 4")
		}
	})
	if allocs > 2 {
		t.Errorf("90 values took %.0f allocations, want at most 2", allocs)
	}
}
