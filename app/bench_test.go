package app_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
)

const benchBody = `{"items":[
 {"id":"A-1","date":"2026-03-14T09:12:00","amount":"185000.5","status":"IMPAGA","place":"Av. Lugones km 4"},
 {"id":"A-2","date":"2026-01-02T10:00:00-03:00","amount":47500,"status":"PAGADA"},
 {"id":"A-3","date":"2025-12-24","amount":"1.234,56","status":"EN GESTION"}]}`

// benchApp starts n portals answering three items each and an App over
// them, closed when the benchmark ends.
func benchApp(b *testing.B, n int) *app.App {
	return benchAppDelayed(b, n, 0)
}

// benchAppDelayed is benchApp with portals that answer after delay.
func benchAppDelayed(b *testing.B, n int, delay time.Duration) *app.App {
	b.Helper()
	urls := make([]string, n)
	for i := range urls {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if delay > 0 {
				time.Sleep(delay)
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(benchBody))
		}))
		b.Cleanup(srv.Close)
		urls[i] = srv.URL
	}
	return benchAppOver(b, urls)
}

// benchAppOver is an App with one source for each portal of urls.
func benchAppOver(b *testing.B, urls []string) *app.App {
	b.Helper()
	var yaml strings.Builder
	yaml.WriteString("problems: {base_uri: \"https://problems.test/\"}\ndefaults: {retry: {max_retries: 0}}\nsources:\n")
	for i, u := range urls {
		fmt.Fprintf(&yaml, `  - id: s%d
    jurisdiction: Source %d
    base_url: %s
    operations: {by_domain: {path: "/q?d={domain}"}}
    response:
      items: /items
      fields: {id: /id, date: /date, amount: /amount, status: /status, place: /place}
      status_map: {IMPAGA: unpaid, PAGADA: paid, "EN GESTION": in_process}
`, i, i, u)
	}
	cfg, err := config.Parse([]byte(yaml.String()), "bench.yaml", nil)
	if err != nil {
		b.Fatal(err)
	}
	a, err := app.New(cfg, app.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() }) // before the portals: TestMain's goleak checks benchmarks too
	return a
}

// rawPortal is a portal that answers every request with benchBody, read
// and written without allocating: what a query allocates over it is the
// aggregator's alone.
func rawPortal(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	answer := []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(benchBody), benchBody))
	var wg sync.WaitGroup
	b.Cleanup(func() { _ = ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					// A request's head ends with an empty line; these
					// requests have no body.
					for {
						line, err := br.ReadSlice('\n')
						if err != nil {
							return
						}
						if len(line) <= 2 {
							break
						}
					}
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			})
		}
	})
	return "http://" + ln.Addr().String()
}

// BenchmarkQuery is one query fanned out to 10 in-process portals, through
// the engine (limiter, breaker, adapter, normalisation), distinct plates;
// over net/http portals, and over raw ones that allocate nothing.
func BenchmarkQuery(b *testing.B) {
	raw := func(b *testing.B, n int) *app.App {
		urls := make([]string, n)
		for i := range urls {
			urls[i] = rawPortal(b)
		}
		return benchAppOver(b, urls)
	}
	for _, tc := range []struct {
		name string
		n    int
		app  func(*testing.B, int) *app.App
	}{
		{"sources=1", 1, benchApp},
		{"sources=10", 10, benchApp},
		{"sources=10/raw-portals", 10, raw},
	} {
		b.Run(tc.name, func(b *testing.B) {
			a := tc.app(b, tc.n)
			q := aggregator.Query{Domain: "AB123CD"}
			set, _ := a.Engine.Select(q, nil)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				q.Domain = fmt.Sprintf("AB%03dCD", i%1000)
				r := a.Engine.Query(context.Background(), q, set, 3*time.Second)
				if !r.Complete {
					b.Fatalf("incomplete: %+v", r.Summary)
				}
			}
		})
	}
}

// BenchmarkHTTPQuery adds the HTTP layer: routing, validation, encoding.
func BenchmarkHTTPQuery(b *testing.B) {
	a := benchApp(b, 10)
	srv := httptest.NewServer(a.Server)
	defer srv.Close()
	client := srv.Client()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		resp, err := client.Get(fmt.Sprintf("%s/v1/infractions?domain=AB%03dCD", srv.URL, i%1000))
		if err != nil {
			b.Fatal(err)
		}
		// Read to its end, so that the client's connection is reused:
		// a dial a query is no part of what the aggregator costs.
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkHTTPStream is BenchmarkHTTPQuery answered as a stream (SPEC
// 14), in each media type: what a client pays for its parts as they
// come, read to the end.
func BenchmarkHTTPStream(b *testing.B) {
	for _, media := range []string{"text/event-stream", "application/x-ndjson"} {
		b.Run(media, func(b *testing.B) {
			a := benchApp(b, 10)
			srv := httptest.NewServer(a.Server)
			defer srv.Close()
			client := srv.Client()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/v1/infractions?domain=AB%03dCD", srv.URL, i%1000), nil)
				if err != nil {
					b.Fatal(err)
				}
				req.Header.Set("Accept", media)
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"complete":true`) {
					b.Fatalf("status %d, %v: %.200s", resp.StatusCode, err, body)
				}
			}
		})
	}
}

// BenchmarkOverhead measures what the aggregator adds over the slowest
// source: portals answer after 5 ms, queries go one at a time over HTTP,
// and the p50/p99 of (latency - 5 ms) are reported.
func BenchmarkOverhead(b *testing.B) {
	const delay = 5 * time.Millisecond
	for _, n := range []int{5, 20, 100} {
		b.Run(fmt.Sprintf("sources=%d", n), func(b *testing.B) {
			a := benchAppDelayed(b, n, delay)
			srv := httptest.NewServer(a.Server)
			defer srv.Close()
			client := srv.Client()
			var over []time.Duration
			for i := 0; b.Loop(); i++ {
				start := time.Now()
				resp, err := client.Get(fmt.Sprintf("%s/v1/infractions?domain=AB%03dCD", srv.URL, i%1000))
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
				over = append(over, time.Since(start)-delay)
			}
			reportOverhead(b, over)
		})
		// The same portals asked by the simplest fan-out (goroutines and
		// net/http, nothing read): what the machine itself costs.
		b.Run(fmt.Sprintf("naive/sources=%d", n), func(b *testing.B) {
			a := benchAppDelayed(b, n, delay)
			tr := &http.Transport{MaxIdleConnsPerHost: 128}
			b.Cleanup(tr.CloseIdleConnections)
			client := &http.Client{Transport: tr}
			urls := make([]string, 0, n)
			for _, sc := range a.Config.Sources {
				urls = append(urls, sc.BaseURL+"/q?d=AB123CD")
			}
			var over []time.Duration
			for b.Loop() {
				start := time.Now()
				var wg sync.WaitGroup
				for _, u := range urls {
					wg.Go(func() {
						resp, err := client.Get(u)
						if err == nil {
							_, _ = io.Copy(io.Discard, resp.Body)
							resp.Body.Close()
						}
					})
				}
				wg.Wait()
				over = append(over, time.Since(start)-delay)
			}
			reportOverhead(b, over)
		})
	}
}

func reportOverhead(b *testing.B, over []time.Duration) {
	slices.Sort(over)
	b.ReportMetric(float64(over[len(over)/2].Microseconds()), "p50-overhead-us")
	b.ReportMetric(float64(over[len(over)*99/100].Microseconds()), "p99-overhead-us")
}
