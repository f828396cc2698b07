package h1_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/multas/aggregator/internal/h1"
)

// BenchmarkTransport is one small GET over a pooled connection to an
// in-process server, by this transport and by net/http's; the server's
// own work is in both.
func BenchmarkTransport(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"items":[{"id":"A1","amount":"1000.00"}]}`)
	}))
	defer srv.Close()
	for _, tc := range []struct {
		name string
		rt   interface {
			http.RoundTripper
			CloseIdleConnections()
		}
	}{
		{"h1", &h1.Transport{}},
		{"net-http", &http.Transport{MaxIdleConnsPerHost: 128}},
	} {
		client := &http.Client{Transport: tc.rt}
		call := func(b *testing.B) {
			resp, err := client.Get(srv.URL + "/infractions?domain=AB123CD")
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				call(b)
			}
		})
		b.Run(tc.name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					call(b)
				}
			})
		})
		tc.rt.CloseIdleConnections()
	}
}
