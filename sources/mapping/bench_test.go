package mapping

import "testing"

// BenchmarkFormats reads the three dialects' answers of three items,
// parsed and mapped (no HTTP): the general path of XML and HTML, whose
// shapes are named item by item, and the JSON fast path.
func BenchmarkFormats(b *testing.B) {
	for _, name := range []string{"json", "xml", "html"} {
		b.Run(name, func(b *testing.B) {
			m := compile(b, threeResponses()[name])
			body, ct := threeBodies[name][1], threeBodies[name][0]
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if _, err := read(b, m, body, ct); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
