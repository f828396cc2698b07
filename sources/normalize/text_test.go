package normalize

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestText(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", MaxText+1)
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"short", "Exceso de velocidad", "Exceso de velocidad"},
		{"exactly MaxText", strings.Repeat("a", MaxText), strings.Repeat("a", MaxText)},
		{"exactly MaxText runes, more bytes", strings.Repeat("é", MaxText), strings.Repeat("é", MaxText)},
		{"one rune more", strings.Repeat("a", MaxText+1), strings.Repeat("a", MaxText-1) + "…"},
		{"one multi-byte rune more", long, strings.Repeat("é", MaxText-1) + "…"},
		{"much more", strings.Repeat("ab", 10*MaxText), strings.Repeat("ab", (MaxText-1)/2) + "a…"},
		{"invalid bytes count as runes", strings.Repeat("\xff", MaxText+1), strings.Repeat("\xff", MaxText-1) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Text(tt.in)
			if got != tt.want {
				t.Errorf("Text(%d bytes) = %d bytes %q…, want %d bytes", len(tt.in), len(got), got[:min(len(got), 20)], len(tt.want))
			}
			if n := utf8.RuneCountInString(got); n > MaxText {
				t.Errorf("Text gave %d runes", n)
			}
		})
	}
}

func TestSuspect(t *testing.T) {
	t.Parallel()
	tests := []stringCase[bool]{
		{"", false},
		{"Exceso de velocidad", false},
		{"Provincia de Córdoba", false},
		{"SÃO PAULO", false},
		{"AMANHÃ", false},
		{"Nº 123, 25°C, ¿Qué?", false},
		{"câmara, naïf, façade", false},
		{"“comillas” – guión … fin", false},
		{"MUNICÍPIO DE SÃO JOSÉ", false},
		{"CÃ³rdoba", true},
		{"infracciÃ³n", true},
		{"Ã©", true},
		{"Ã¡", true},
		{"Ã±", true},
		{"ESPAÃ‘A", true},
		{"NÂº 123", true},
		{"25Â°C", true},
		{"Â\u00a0", true},
		{"Ã\u00a0", true},
		{"ï¿½", true},
		{"ï»¿texto", true},
		{"â€œcomillasâ€\u009d", true},
		{"â€“", true},
		{"â‚¬ 100", true},
		{"C\ufffdrdoba", true},
		{"C\xf3rdoba", true}, // latin-1 bytes never decoded
	}
	runCases(t, "Suspect", Suspect, tests)
}

func TestIsCurrency(t *testing.T) {
	t.Parallel()
	tests := []stringCase[bool]{
		{"ARS", true}, {"ars", true}, {"Brl", true}, {"USD", true}, {"UYU", true}, {"MXN", true}, {"EUR", true},
		{"CLF", true}, // the ISO code of the unidad de fomento is a code: refused as units.code
		{"UF", false}, {"UR", false}, {"UMA", false}, {"UI", false}, {"", false}, {"ARSX", false},
		{"AR", false}, {"ÁRS", false}, {"A R", false}, {"ZZZ", false},
	}
	runCases(t, "IsCurrency", IsCurrency, tests)
}

func TestDetail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", ""},
		{"plain", "Captcha inválido", "Captcha inválido"},
		{"ascii clean", "Captcha invalido", "Captcha invalido"},
		{"trimmed", "  \t Captcha inválido \r\n", "Captcha inválido"},
		{"inner white space collapsed", "Demasiadas\n\n  consultas,\tespere", "Demasiadas consultas, espere"},
		{"non-breaking spaces", "a\u00a0\u00a0b\u202fc", "a b c"},
		{"only white space", " \n\t ", ""},
		{"control characters", "a\x00b\x07c\x1bd\x7fe", "abcde"},
		{"bidirectional override", "pagar \u202eahora\u202c", "pagar ahora"},
		{"bidirectional isolates and marks", "\u2066x\u2069\u200ey\u200f", "xy"},
		{"zero-width", "ca\u200bptcha\u200c\u200d\u2060", "captcha"},
		{"BOM", "\ufeffError", "Error"},
		{"soft hyphen is a format character", "er\u00adror", "error"},
		{"invalid UTF-8 dropped", "C\xf3rdoba\xff", "Crdoba"},
		{"removed characters between spaces", "a \u200b b", "a b"},
		{"markup is kept as text", "<b>Error</b> & más", "<b>Error</b> & más"},
		{"exactly 200", strings.Repeat("a", 200), strings.Repeat("a", 200)},
		{"exactly 200 runes", strings.Repeat("ñ", 200), strings.Repeat("ñ", 200)},
		{"201 cut", strings.Repeat("a", 201), strings.Repeat("a", 199) + "…"},
		{"long cut", strings.Repeat("ñ", 5000), strings.Repeat("ñ", 199) + "…"},
		{"cut after a space", strings.Repeat("a", 198) + " bcd", strings.Repeat("a", 198) + "…"},
		{"collapsing makes it fit", strings.Repeat("a ", 100) + "      ", strings.TrimSpace(strings.Repeat("a ", 100))},
		{"trailing removed characters do not cut", strings.Repeat("a", 200) + "\u200b\x00 ", strings.Repeat("a", 200)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Detail(tt.in)
			if got != tt.want {
				t.Errorf("Detail(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if n := utf8.RuneCountInString(got); n > 200 {
				t.Errorf("Detail gave %d runes", n)
			}
		})
	}
}

func TestPlate(t *testing.T) {
	t.Parallel()
	tests := []stringCase[string]{
		{"AB123CD", "AB123CD"},
		{"ab 123 cd", "AB123CD"},
		{"AB-123-CD", "AB123CD"},
		{" ab.123_cd\t", "AB123CD"},
		{"abc/123", "ABC123"},
		{"", ""},
		{"---", ""},
		{"ñu 12", "ÑU12"},
	}
	runCases(t, "Plate", Plate, tests)
}

func TestDigits(t *testing.T) {
	t.Parallel()
	tests := []stringCase[string]{
		{"20123456786", "20123456786"},
		{"20-12345678-6", "20123456786"},
		{"12.345.678", "12345678"},
		{" 12 345 678 ", "12345678"},
		{"CUIT: 20-12345678-6", "20123456786"},
		{"", ""},
		{"abc", ""},
		{"١٢٣", ""}, // only ASCII digits, as the query's id
	}
	runCases(t, "Digits", Digits, tests)
}

// stringCase is an example of a function of one string.
type stringCase[T comparable] struct {
	in   string
	want T
}

// runCases runs f on every case, in parallel subtests.
func runCases[T comparable](t *testing.T, name string, f func(string) T, tests []stringCase[T]) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			if got := f(tt.in); got != tt.want {
				t.Errorf("%s(%q) = %#v, want %#v", name, tt.in, got, tt.want)
			}
		})
	}
}

// TestNoAllocations checks that values already normal, and refusals, cost
// nothing. It is not parallel: AllocsPerRun counts every goroutine's.
func TestNoAllocations(t *testing.T) {
	for name, f := range map[string]func(){
		"Amount refused":   func() { _, _ = Amount("1e999999999", Unset) },
		"Amount ambiguous": func() { _, _ = Amount("$ 185.000", Unset) },
		"Number refused":   func() { _, _ = Number("1,5") },
		"Text":             func() { _ = Text("Exceso de velocidad") },
		"Detail":           func() { _ = Detail("Captcha invalido") },
		"Plate":            func() { _ = Plate("AB123CD") },
		"Digits":           func() { _ = Digits("20123456786") },
		"Suspect": func() {
			_ = Suspect("Provincia de Córdoba")
		},
		"IsCurrency": func() { _ = IsCurrency("ars") },
	} {
		if n := testing.AllocsPerRun(100, f); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
}
