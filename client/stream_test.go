package client_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/client"
	"github.com/multas/aggregator/internal/apptest"
	"github.com/multas/aggregator/portalsim"
	"github.com/multas/aggregator/problem"
)

// formats are both media types a stream can be read in.
var formats = []string{client.NDJSON, client.EventStream}

// TestStream reads streamed queries from a real aggregator over the
// simulator, in both formats: each part is handed over once, with its
// own infractions and its problem's slug, and the Result is the JSON
// answer's, but for the order of its sources.
func TestStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, baseYAML)
	if err := e.forceOpen("cordoba", "by_domain"); err != nil {
		t.Fatal(err)
	}
	// pba is left out: its first 429 pauses it, and the next query would
	// be skipped where the first failed.
	only := client.WithSources("caba", "santafe", "cordoba", "rosario")
	want, err := newClient(t, e.URL).ByDomain(t.Context(), portalsim.DemoPlate, only)
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range formats {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, e.URL, client.WithStreamFormat(format))
			var parts []aggregator.Part
			res, err := c.StreamByDomain(t.Context(), "ab 123 cd", func(p aggregator.Part) error {
				parts = append(parts, p)
				return nil
			}, only)
			if err != nil {
				t.Fatalf("StreamByDomain: %v", err)
			}
			if res.Summary != want.Summary || res.Complete != want.Complete || res.Query != want.Query {
				t.Errorf("result %+v %v %+v, want the JSON answer's %+v %v %+v", res.Query, res.Complete, res.Summary, want.Query, want.Complete, want.Summary)
			}
			if len(parts) != 4 || len(res.Sources) != 4 || len(res.Infractions) != len(want.Infractions) {
				t.Fatalf("%d parts, %d entries, %d infractions; want 4, 4, %d", len(parts), len(res.Sources), len(res.Infractions), len(want.Infractions))
			}
			for i, p := range parts {
				if res.Sources[i].Source != p.Source {
					t.Errorf("result's entry %d is %s, the part handed over %s", i, res.Sources[i].Source, p.Source)
				}
				for _, in := range p.Infractions {
					if in.Source != p.Source {
						t.Errorf("%s's part holds an infraction of %s", p.Source, in.Source)
					}
				}
			}
			errs := client.SourceErrors(res)
			if !errors.Is(errs["cordoba"], problem.CircuitOpen) || errs["cordoba"].Slug != problem.CircuitOpen ||
				!errors.Is(errs["rosario"], problem.SourceUnavailable) || len(errs) != 2 {
				t.Errorf("SourceErrors = %v, want cordoba circuit-open and rosario source-unavailable", errs)
			}
		})
	}
}

// TestStreamArrival: each part is handed over as it arrives. santafe's
// portal is held until caba's part has been handed over (each releases
// it), so the stream could not have been read whole first.
func TestStreamArrival(t *testing.T) {
	t.Parallel()
	for _, format := range formats {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			e, santafe := apptest.StartHeld(t, jurisdictions(), baseYAML, app.Options{}, "santafe")
			c := newClient(t, e.URL, client.WithStreamFormat(format))
			var order []string
			res, err := c.StreamByDomain(t.Context(), portalsim.DemoPlate, func(p aggregator.Part) error {
				order = append(order, p.Source)
				if p.Source == "caba" {
					santafe.Release()
				}
				return nil
			}, client.WithSources("santafe", "caba"))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(order) != "[caba santafe]" || !res.Complete {
				t.Errorf("parts in the order %v (complete %v), want [caba santafe]", order, res.Complete)
			}
		})
	}
}

// TestStreamErrors: the errors of a streamed query are ByDomain's: a
// problem before streaming, an *Unavailable holding the parts when no
// source answered; and the error of each ends the stream.
func TestStreamErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t, baseYAML)
	stop := errors.New("enough")
	for _, format := range formats {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			c := newClient(t, e.URL, client.WithStreamFormat(format))
			var n int
			count := func(aggregator.Part) error { n++; return nil }

			_, err := c.StreamByDomain(t.Context(), "nope", count)
			var p *problem.Problem
			if !errors.As(err, &p) || !errors.Is(err, problem.InvalidQuery) || len(p.InvalidParams) != 1 || n != 0 {
				t.Errorf("a bad plate: %v, %d parts; want invalid-query before any part", err, n)
			}

			_, err = c.StreamByDomain(t.Context(), portalsim.DemoPlate, count, client.WithSources("rosario"))
			var u *client.Unavailable
			if !errors.As(err, &u) || !errors.Is(err, problem.NoSourceAvailable) || len(u.Sources) != 1 || n != 1 {
				t.Fatalf("rosario down: %v, %d parts; want *Unavailable after its part", err, n)
			}
			if !errors.Is(u.Sources[0].Problem, problem.SourceUnavailable) {
				t.Errorf("rosario's problem %+v", u.Sources[0].Problem)
			}

			var got []string
			_, err = c.StreamByDomain(t.Context(), portalsim.DemoPlate, func(p aggregator.Part) error {
				got = append(got, p.Source)
				return stop
			}, client.WithSources("caba", "santafe"))
			if !errors.Is(err, stop) || len(got) != 1 {
				t.Errorf("each failing: %v after %v, want its error after one part", err, got)
			}
		})
	}
}

// TestStreamWire reads streams as servers may write them: SSE lines ending
// in CR LF or CR, comments, data over several lines, fields the client
// does not need, unknown event types; and refuses what is no stream.
func TestStreamWire(t *testing.T) {
	t.Parallel()
	const (
		part    = `{"type":"source","source":"caba","jurisdiction":"CABA","operation":"by_domain","status":"succeeded","count":1,"infractions":[{"source":"caba","jurisdiction":"CABA","id":"Q-1","status":"unpaid"}]}`
		summary = `{"type":"summary","query":{"domain":"AB123CD"},"complete":true,"summary":{"total":1,"succeeded":1,"failed":0,"skipped":0,"stale":0}}`
	)
	tests := []struct {
		name, contentType, body string
		parts                   int
		ok                      bool
	}{
		{"ndjson", client.NDJSON, part + "\n" + summary + "\n", 1, true},
		{"ndjson with blank lines, no final newline", client.NDJSON, "\n" + part + "\n\n" + summary, 1, true},
		{"sse", client.EventStream, "retry: 1000\nid: 1\nevent: source\ndata: " + part + "\n\nid: 2\nevent: summary\ndata: " + summary + "\n\n", 1, true},
		{"sse with CR LF and comments", client.EventStream, ": hello\r\nid: 1\r\nevent: source\r\ndata: " + part + "\r\n\r\n:\r\ndata: " + summary + "\r\n\r\n", 1, true},
		{"sse with CR", client.EventStream, "data: " + part + "\r\rdata: " + summary + "\r\r", 1, true},
		{"sse data over lines", client.EventStream, "data: " + strings.Replace(part, `,"jurisdiction"`, ",\ndata:\"jurisdiction\"", 1) + "\n\ndata: " + summary + "\n\n", 1, true},
		{"sse without a final blank line", client.EventStream, "data: " + part + "\n\ndata: " + summary + "\n", 1, false},
		{"an unknown event", client.NDJSON, `{"type":"progress","done":1}` + "\n" + part + "\n" + summary + "\n", 1, true},
		{"ended before its summary", client.NDJSON, part + "\n", 1, false},
		{"not JSON", client.NDJSON, "{\n", 0, false},
		{"a JSON answer", "application/json", `{"query":{}}`, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			n := 0
			res, err := newClient(t, srv.URL).StreamByDomain(t.Context(), "AB123CD", func(p aggregator.Part) error {
				if p.Source != "caba" || len(p.Infractions) != 1 || p.Count == nil || *p.Count != 1 {
					t.Errorf("part %+v", p)
				}
				n++
				return nil
			})
			if tt.ok != (err == nil) || n != tt.parts {
				t.Fatalf("error %v after %d parts; want ok %v after %d", err, n, tt.ok, tt.parts)
			}
			if tt.ok && (!res.Complete || res.Summary.Total != 1 || len(res.Infractions) != 1 || res.Query.Domain != "AB123CD") {
				t.Errorf("result %+v", res)
			}
		})
	}
}

// TestStreamAccept: the client asks for its format, problems understood.
func TestStreamAccept(t *testing.T) {
	t.Parallel()
	var got atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Accept"))
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, `{"type":"https://x.example/invalid-query","title":"Invalid query","status":400}`)
	}))
	defer srv.Close()
	each := func(aggregator.Part) error { return nil }
	for _, tt := range []struct {
		opts []client.Option
		want string
	}{
		{nil, client.NDJSON},
		{[]client.Option{client.WithStreamFormat(client.EventStream)}, client.EventStream},
		{[]client.Option{client.WithStreamFormat("text/html")}, client.NDJSON},
	} {
		_, err := newClient(t, srv.URL, tt.opts...).StreamByID(t.Context(), "20123456786", each)
		if !errors.Is(err, problem.InvalidQuery) {
			t.Errorf("error %v, want the invalid-query problem", err)
		}
		if a, _ := got.Load().(string); !strings.HasPrefix(a, tt.want+",") || !strings.Contains(a, "application/problem+json") {
			t.Errorf("Accept %q, want %s first, then problems", a, tt.want)
		}
	}
}
