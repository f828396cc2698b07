package sources

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/multas/aggregator/sources/mapping"
)

// subject is domainQuery as the mapping sees it.
var subject = mapping.Subject{Op: domainQuery.Operation(), Value: domainQuery.Value()}

// tenItems is a portal answer with ten infractions.
func tenItems() string {
	var b strings.Builder
	b.WriteString(`{"resultado": {"total": 10, "actas": [`)
	for i := range 10 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"nro": "Q-%05d", "fecha": "2026-03-%02dT09:12:00", "detalle": "Exceso de velocidad",
			"lugar": "Av. Lugones km 4", "monto": "185000.5", "moneda": "ARS", "estado": "IMPAGA"}`, i, i+1)
	}
	b.WriteString(`]}}`)
	return b.String()
}

func BenchmarkLookup(b *testing.B) {
	doc := tenItems()
	srv := portal(b, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, doc)
	})
	s := newSource(b, testSpec(srv.URL), srv.Client())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ans, err := s.Lookup(ctx, domainQuery)
		if err != nil || len(ans.Infractions) != 10 {
			b.Fatalf("Lookup = %d infractions, %v", len(ans.Infractions), err)
		}
	}
}

// BenchmarkMap measures decoding and mapping alone, without HTTP.
func BenchmarkMap(b *testing.B) {
	doc := tenItems()
	s := newSource(b, testSpec("http://portal"), nil)
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, err := s.mapping.Read(context.Background(), mapping.Answer{Status: 200, Body: []byte(doc)}, subject); err != nil {
			b.Fatal(err)
		}
	}
}
