package normalize

import "testing"

// The benchmarks compare with today's sources benchmarks: these functions
// run for every field of every item of every portal answer.

func BenchmarkAmount(b *testing.B) {
	for _, bb := range []struct {
		name, in string
		dec      Decimal
	}{
		{"plain", "185000.50", Unset},
		{"grouped", "$ 1.234.567,89", Unset},
		{"decimal", "R$ 1.234,56", Comma},
		{"ambiguous", "$ 185.000", Unset},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = Amount(bb.in, bb.dec)
			}
		})
	}
}

func BenchmarkNumber(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_, _ = Number("185000.5")
	}
}

func BenchmarkDate(b *testing.B) {
	now, ba := testNow(b)
	one := mustCompile(b, "dd/MM/yyyy 'às' HH:mm:ss")
	second := mustCompile(b, "yyyy-MM-dd'T'HH:mm:ssXXX", "d 'de' MMMM 'de' yyyy")
	offset := mustCompile(b, "yyyy-MM-dd'T'HH:mm:ssXX")
	for _, bb := range []struct {
		name   string
		l      Layouts
		in     string
		number bool
	}{
		{"default/iso", Layouts{}, "2026-03-14T09:12:00-03:00", false},
		{"default/day-first", Layouts{}, "14/03/2026 09:12", false},
		{"default/epoch", Layouts{}, "1773490320000", true},
		{"layout/one", one, "10/06/2016 às 12:36:11", false},
		{"layout/offset", offset, "2026-03-14T09:12:00-0300", false},
		{"layout/second-wins", second, "14 de marzo de 2026", false},
	} {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bb.l.Date(bb.in, bb.number, ba, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkText(b *testing.B) {
	b.Run("Detail", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Detail("  Demasiadas consultas,\n  espere un minuto \u200b")
		}
	})
	b.Run("Suspect", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = Suspect("Exceso de velocidad en Av. Lugones, Córdoba")
		}
	})
}

func mustCompile(tb testing.TB, patterns ...string) Layouts {
	tb.Helper()
	l, err := CompileLayouts(patterns)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}
