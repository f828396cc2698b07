package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/internal/apitest"
)

// The streamed answers of SPEC 14: real portals held as long as each test
// needs, the whole replica over a real listener, and a real HTTP client
// reading the events as they arrive, each checked against the contract
// (apitest.Stream: framing, ids, schemas).

// streamMedia are both streamed media types, for the tests that hold for
// each.
var streamMedia = []string{apitest.EventStream, apitest.NDJSON}

// sourceEvent and summaryEvent are the events' data, decoded
// independently of the server's own types.
type sourceEvent struct {
	Type string `json:"type"`
	sourceEntry
	Infractions []infraction `json:"infractions"`
}

type summaryEvent struct {
	Type     string      `json:"type"`
	Query    queryEcho   `json:"query"`
	Complete bool        `json:"complete"`
	Summary  summary     `json:"summary"`
	Problem  *problemDoc `json:"problem"`
}

// openStream sends GET /v1/infractions?params with Accept accept and the
// headers h, and returns the answer, headers read, its body not.
func (e *env) openStream(accept, params string, h http.Header) *http.Response {
	e.t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+"/v1/infractions?"+params, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", accept)
	resp, err := e.client.Do(req)
	if err != nil {
		e.t.Fatalf("GET /v1/infractions?%s: %v", params, err)
	}
	return resp
}

// stream opens a stream and checks its answer: 200, the media type
// asked for, the headers of SPEC 14.
func (e *env) stream(accept, params string, h http.Header) *apitest.Stream {
	e.t.Helper()
	resp := e.openStream(accept, params, h)
	checkStreamHeaders(e.t, resp, accept)
	s := e.api.Stream(e.t, resp)
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

func checkStreamHeaders(t *testing.T, resp *http.Response, media string) {
	t.Helper()
	for h, want := range map[string]string{
		"Content-Type":      media,
		"Cache-Control":     "no-store",
		"X-Accel-Buffering": "no",
	} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("stream answer %d: %s %q, want %q", resp.StatusCode, h, got, want)
		}
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream answer %d, want 200", resp.StatusCode)
	}
}

// read reads the next event, which must be of type typ, into v.
func read(t *testing.T, s *apitest.Stream, typ string, v any) {
	t.Helper()
	ev, ok := s.Next(t)
	if !ok {
		t.Fatalf("the stream ended before a %s event", typ)
	}
	if ev.Type != typ || json.Unmarshal(ev.Data, v) != nil {
		t.Fatalf("got event %s, want a %s event", ev.Data, typ)
	}
}

// next reads the next event, which must be a source event.
func next(t *testing.T, s *apitest.Stream) sourceEvent {
	t.Helper()
	var se sourceEvent
	read(t, s, "source", &se)
	return se
}

// last reads the summary, which must be the last event.
func last(t *testing.T, s *apitest.Stream) summaryEvent {
	t.Helper()
	var sum summaryEvent
	read(t, s, "summary", &sum)
	if rest := s.Rest(t); len(rest) > 0 {
		t.Errorf("%d events after the summary", len(rest))
	}
	return sum
}

// TestStreamArrival: the answer's headers come before any source has
// finished, and each source's event as it finishes: the fast portal's
// arrives while the slow portal is still held (it is released only once
// the test has read that event), the slow one's once it answers, then the
// summary, with the counts of the JSON answer.
func TestStreamArrival(t *testing.T) {
	t.Parallel()
	for _, media := range streamMedia {
		t.Run(media, func(t *testing.T) {
			t.Parallel()
			fastGate, slowGate := make(chan struct{}), make(chan struct{})
			fast, slow := newPortal(t, nil), newPortal(t, nil)
			fast.set(fast.gated(fastGate, one("F-1")))
			slow.set(slow.gated(slowGate, actas(
				acta{"nro": "S-1", "fecha": "2026-03-14 09:12", "monto": 1000, "estado": "IMPAGA"},
				acta{"nro": "S-2", "fecha": "2026-03-15 10:00", "monto": 2000, "estado": "PAGADA"})))
			e := startWith(t, source{id: "fast", url: fast.URL}, source{id: "slow", url: slow.URL})

			// Headers first: neither portal has answered.
			s := e.stream(media, "domain="+plate+"&timeout=10s", nil)
			if fast.done() != 0 || slow.done() != 0 {
				t.Fatalf("the headers came after a portal answered (fast %d, slow %d)", fast.done(), slow.done())
			}
			close(fastGate)
			got := next(t, s)
			if got.Source != "fast" || got.Status != "succeeded" || len(got.Infractions) != 1 || got.Infractions[0].ID != "F-1" {
				t.Fatalf("first event %+v, want fast's succeeded entry with F-1", got)
			}
			if got.Count == nil || *got.Count != 1 {
				t.Errorf("fast's count %v, want 1", got.Count)
			}
			if slow.calls() != 1 || slow.done() != 0 {
				t.Fatalf("fast's event came after the slow portal answered (calls %d, done %d)", slow.calls(), slow.done())
			}
			close(slowGate)
			got = next(t, s)
			if got.Source != "slow" || got.Status != "succeeded" || len(got.Infractions) != 2 {
				t.Fatalf("second event %+v, want slow's succeeded entry with 2 infractions", got)
			}
			for _, in := range got.Infractions {
				if in.Source != "slow" || in.Stale {
					t.Errorf("slow's infraction %+v", in)
				}
			}
			sum := last(t, s)
			want := summary{Total: 2, Succeeded: 2}
			if sum.Summary != want || !sum.Complete || sum.Problem != nil || sum.Query.Domain != plate {
				t.Errorf("summary %+v, want complete %+v for %s", sum, want, plate)
			}
			if a := e.byDomain(plate); a.result.Summary != sum.Summary || a.result.Complete != sum.Complete {
				t.Errorf("the JSON answer: %+v complete %v, the stream's %+v", a.result.Summary, a.result.Complete, sum.Summary)
			}
		})
	}
}

// TestStreamDeadline: a source that has not finished when the query's
// budget runs out is sent as failed deadline-exceeded, before the summary;
// the others as they finished.
func TestStreamDeadline(t *testing.T) {
	t.Parallel()
	for _, media := range streamMedia {
		t.Run(media, func(t *testing.T) {
			t.Parallel()
			fast, hung := newPortal(t, one("F-1")), newPortal(t, nil)
			hung.set(hung.hang())
			e := startWith(t, source{id: "fast", url: fast.URL}, source{id: "hung", url: hung.URL, extra: []string{"timeout: 5s"}})
			s := e.stream(media, "domain="+plate+"&timeout=300ms", nil)
			if got := next(t, s); got.Source != "fast" || got.Status != "succeeded" {
				t.Fatalf("first event %+v, want fast's", got)
			}
			got := next(t, s)
			checkEntry(t, got.sourceEntry, "failed", "deadline-exceeded")
			if got.Source != "hung" || len(got.Infractions) != 0 {
				t.Errorf("second event %+v, want hung's, without infractions", got)
			}
			sum := last(t, s)
			if want := (summary{Total: 2, Succeeded: 1, Failed: 1}); sum.Summary != want || sum.Complete || sum.Problem != nil {
				t.Errorf("summary %+v, want %+v, partial", sum, want)
			}
			// A streamed query is counted as the JSON one would be.
			if v := e.metric(`aggregator_queries_total{operation="by_domain",outcome="partial"}`); v != 1 {
				t.Errorf("aggregator_queries_total partial: %v, want 1", v)
			}
		})
	}
}

// TestStreamNoSource: when no source succeeds the stream is still a 200:
// every source's event says why, and the summary carries the
// no-source-available problem that the JSON answer is, with its
// retry_after when every source was skipped.
func TestStreamNoSource(t *testing.T) {
	t.Parallel()
	down := newPortal(t, status(http.StatusInternalServerError))
	open := newPortal(t, one("A-1"))
	// down's breaker never trips: its entry stays failed however often
	// the subtests ask.
	e := startWith(t, source{id: "down", url: down.URL, extra: []string{"breaker: {min_calls: 1000, consecutive_failures: 0}"}},
		source{id: "open", url: open.URL})
	e.forceOpen("open", "by_domain")
	tests := []struct {
		name, sources string
		retryAfter    int // -1: none
		want          summary
	}{
		{"one failed, one skipped", "down,open", -1, summary{Total: 2, Failed: 1, Skipped: 1}},
		// A forced open breaker's retry_after is its open_for, 300ms.
		{"every source skipped", "open", 1, summary{Total: 1, Skipped: 1}},
	}
	for _, tt := range tests {
		for _, media := range streamMedia {
			t.Run(tt.name+"/"+media, func(t *testing.T) {
				s := e.stream(media, "domain="+plate+"&sources="+tt.sources, nil)
				var events []sourceEvent
				for range tt.want.Total {
					events = append(events, next(t, s))
				}
				sum := last(t, s)
				if sum.Summary != tt.want || sum.Complete {
					t.Errorf("summary %+v, want %+v", sum.Summary, tt.want)
				}
				if sum.Problem == nil {
					t.Fatal("no problem in the summary")
				}
				checkType(t, *sum.Problem, "no-source-available")
				if got := retryAfter(sum.Problem); got != tt.retryAfter {
					t.Errorf("retry_after %d, want %d", got, tt.retryAfter)
				}
				for _, ev := range events {
					if ev.Problem == nil {
						t.Errorf("source %s without its problem", ev.Source)
					}
				}
				a := e.byDomain(plate, "sources="+tt.sources)
				if a.status != http.StatusServiceUnavailable || retryAfter(&a.problem) != tt.retryAfter {
					t.Errorf("the JSON answer: %d retry_after %d, want 503 with %d", a.status, retryAfter(&a.problem), tt.retryAfter)
				}
			})
		}
	}
}

// TestStreamEventIDs: with many sources finishing in whatever order, the
// SSE ids are 1, 2, 3, … in the order sent (apitest.Stream checks it), one
// event per source and the summary last.
func TestStreamEventIDs(t *testing.T) {
	t.Parallel()
	var srcs []source
	for i := range 8 {
		p := newPortal(t, one(fmt.Sprintf("X-%d", i)))
		srcs = append(srcs, source{id: fmt.Sprintf("s%d", i), url: p.URL})
	}
	e := startWith(t, srcs...)
	resp := e.openStream(apitest.EventStream, "domain="+plate, nil)
	s := e.api.Stream(t, resp)
	defer s.Close()
	events := s.Rest(t)
	if len(events) != 9 {
		t.Fatalf("%d events, want 8 sources and the summary", len(events))
	}
	var seen []string
	for i, ev := range events {
		if ev.ID != i+1 {
			t.Errorf("event %d has id %d", i+1, ev.ID)
		}
		var se sourceEvent
		if err := json.Unmarshal(ev.Data, &se); err != nil {
			t.Fatal(err)
		}
		if ev.Type == "source" {
			seen = append(seen, se.Source)
		}
	}
	slices.Sort(seen)
	if fmt.Sprint(seen) != "[s0 s1 s2 s3 s4 s5 s6 s7]" || events[8].Type != "summary" {
		t.Errorf("sources %v and last event %s, want each source once and the summary", seen, events[8].Type)
	}
}

// TestStreamReconnect: an EventSource coming back with Last-Event-ID gets
// a 204, which stops it, and the query does not run again; the header
// means nothing to the other media types.
func TestStreamReconnect(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("A-1"))
	e := startWith(t, source{id: "a", url: p.URL})
	tests := []struct {
		name, accept string
		want         int
		calls        int
	}{
		{"event stream", apitest.EventStream, http.StatusNoContent, 0},
		{"event stream among others", "application/json;q=0.5, text/event-stream", http.StatusNoContent, 0},
		{"ndjson", apitest.NDJSON, http.StatusOK, 1},
		{"json", "application/json", http.StatusOK, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := p.calls()
			resp, body := e.do(http.MethodGet, "/v1/infractions?domain="+plate, http.Header{"Accept": {tt.accept}, "Last-Event-ID": {"2"}}, "")
			if resp.StatusCode != tt.want {
				t.Errorf("got %d, want %d", resp.StatusCode, tt.want)
			}
			if tt.want == http.StatusNoContent && len(body) > 0 {
				t.Errorf("a 204 with a body: %q", body)
			}
			if got := p.calls() - before; got != tt.calls {
				t.Errorf("%d portal calls, want %d", got, tt.calls)
			}
		})
	}
}

// TestStreamNegotiation: the representation follows Accept (RFC 9110):
// the highest q wins, JSON on a tie with JSON, wildcards and case count,
// several header lines are one list, and JSON when nothing else fits.
func TestStreamNegotiation(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("A-1"))
	e := startWith(t, source{id: "a", url: p.URL})
	const (
		jsonMT = "application/json"
		sse    = apitest.EventStream
		ndjson = apitest.NDJSON
	)
	tests := []struct {
		name   string
		accept []string
		want   string
	}{
		{"no Accept", nil, jsonMT},
		{"event stream", []string{sse}, sse},
		{"ndjson", []string{ndjson}, ndjson},
		{"json", []string{jsonMT}, jsonMT},
		{"tie with json", []string{"text/event-stream, application/json"}, jsonMT},
		{"tie with json, json last", []string{"application/x-ndjson;q=0.7, application/json;q=0.7"}, jsonMT},
		{"higher q", []string{"application/json;q=0.8, text/event-stream;q=0.9"}, sse},
		{"higher q for ndjson", []string{"application/json;q=0.5, application/x-ndjson"}, ndjson},
		{"any", []string{"*/*"}, jsonMT},
		{"any text", []string{"text/*"}, sse},
		{"any application", []string{"application/*"}, jsonMT},
		{"any, ndjson preferred", []string{"*/*;q=0.1, application/x-ndjson"}, ndjson},
		{"refused json", []string{"application/json;q=0, */*"}, sse},
		{"refused stream", []string{"text/event-stream;q=0, */*"}, jsonMT},
		{"both streams, first listed", []string{"application/x-ndjson, text/event-stream"}, ndjson},
		{"upper case", []string{"TEXT/EVENT-STREAM"}, sse},
		{"with parameters", []string{`text/event-stream; charset="utf-8"; q=1`}, sse},
		{"two header lines", []string{"application/json;q=0.1", "text/event-stream"}, sse},
		{"nothing acceptable", []string{"text/html"}, jsonMT},
		{"malformed", []string{"text/event-stream;q=2"}, jsonMT},
		{"malformed beside well formed", []string{"text/event-stream;q=x, application/x-ndjson"}, ndjson},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			resp, body := e.do(http.MethodGet, "/v1/infractions?domain="+plate, http.Header{"Accept": tt.accept}, "")
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != tt.want {
				t.Errorf("Accept %q: %d %s, want 200 %s\n%s", tt.accept, resp.StatusCode, resp.Header.Get("Content-Type"), tt.want, body)
			}
		})
	}
}

// TestStreamRefusedBeforeStreaming: bad parameters are a 400 problem, not
// a stream.
func TestStreamRefusedBeforeStreaming(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("A-1"))
	e := startWith(t, source{id: "a", url: p.URL})
	for _, media := range streamMedia {
		for _, params := range []string{"domain=nope", "domain=" + plate + "&timeout=-1s", "domain=" + plate + "&sources=zz", ""} {
			resp, body := e.do(http.MethodGet, "/v1/infractions?"+params, http.Header{"Accept": {media}}, "")
			var pd problemDoc
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(body, &pd) != nil {
				t.Errorf("%s ?%s: %d %s, want a 400 problem", media, params, resp.StatusCode, resp.Header.Get("Content-Type"))
				continue
			}
			checkType(t, pd, "invalid-query")
		}
	}
	if p.calls() != 0 {
		t.Errorf("%d portal calls for refused queries", p.calls())
	}
}

// TestStreamCoalesced: a stream and a JSON query of the same subject in
// flight together make one call to the portal, and both get its answer.
func TestStreamCoalesced(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	p := newPortal(t, nil)
	p.set(p.gated(gate, one("A-1")))
	e := startWith(t, source{id: "a", url: p.URL})
	var wg sync.WaitGroup
	var a answer
	wg.Go(func() { a = e.byDomain(plate, "timeout=5s") })
	eventually(t, 3*time.Second, "a call reaching the portal", func() bool { return p.calls() > 0 })
	s := e.stream(apitest.NDJSON, "domain="+plate+"&timeout=5s", nil)
	time.Sleep(100 * time.Millisecond) // the stream's lookup joins the call under way
	close(gate)
	got := next(t, s)
	last(t, s)
	wg.Wait()
	if p.calls() != 1 {
		t.Errorf("%d portal calls for a stream and a query in flight together, want 1", p.calls())
	}
	if got.Status != "succeeded" || len(got.Infractions) != 1 || a.status != http.StatusOK || len(a.result.Infractions) != 1 {
		t.Errorf("the stream's entry %+v, the JSON answer %d %+v", got, a.status, a.result.Infractions)
	}
}

// TestStreamOutlivesWriteTimeout: a server whose write timeout is shorter
// than the query's budget still streams the whole answer: the stream's
// own deadline is its query's.
func TestStreamOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	const writeTimeout = 200 * time.Millisecond
	gate := make(chan struct{})
	fast, slow := newPortal(t, one("F-1")), newPortal(t, nil)
	slow.set(slow.gated(gate, one("S-1")))
	e := startWith(t, source{id: "fast", url: fast.URL}, source{id: "slow", url: slow.URL})
	srv := httptest.NewUnstartedServer(e.app.Server)
	srv.Config.WriteTimeout = writeTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	e.srv, e.client = srv, srv.Client()

	s := e.stream(apitest.EventStream, "domain="+plate+"&timeout=5s", nil)
	if got := next(t, s); got.Source != "fast" {
		t.Fatalf("first event %+v, want fast's", got)
	}
	time.Sleep(2 * writeTimeout) // past the server's write timeout
	close(gate)
	if got := next(t, s); got.Source != "slow" || got.Status != "succeeded" {
		t.Fatalf("second event %+v, want slow's", got)
	}
	if sum := last(t, s); !sum.Complete {
		t.Errorf("summary %+v, want complete", sum)
	}
}

// TestStreamMemory: a stream uses memory exactly as the JSON answer to
// the same request does (SPEC 14): fresh answers are succeeded entries
// with remembered and no portal call; with stale-if-error a remembered
// answer stands in for a source that fails, its entry keeping its problem
// and gaining remembered, its infractions streamed with stale: true; the
// summary's counts, stale included, equal the JSON answer's, and a stream
// whose every source was stood in for carries no problem.
func TestStreamMemory(t *testing.T) {
	t.Parallel()
	for _, st := range memStores(t) {
		for _, media := range streamMedia {
			t.Run(st.name+"/"+media, func(t *testing.T) {
				t.Parallel()
				a, b := newPortal(t, lookups("A-1", "A-1-P")), newPortal(t, lookups("B-1", "B-1-P"))
				// The breakers never trip: the entries stay failed, not
				// skipped, however often the steps call a portal that is down.
				steady := "breaker: {min_calls: 1000, consecutive_failures: 0}"
				e := startMem(t, st, memKey, nil, "",
					source{id: "a", url: a.URL, extra: []string{remembers, steady}},
					source{id: "b", url: b.URL, extra: []string{remembers, steady}})
				before := time.Now()
				if first := e.byDomain(plate); first.status != http.StatusOK || !first.result.Complete {
					t.Fatalf("first query: %d %+v", first.status, first.result.Summary)
				}
				after := time.Now()

				// streamed reads a whole stream and the JSON answer to the
				// same request, and checks that their counts agree.
				streamed := func(cacheControl string) (map[string]sourceEvent, summaryEvent, answer) {
					t.Helper()
					h := http.Header{}
					if cacheControl != "" {
						h.Set("Cache-Control", cacheControl)
					}
					s := e.stream(media, "domain="+plate, h)
					events := map[string]sourceEvent{}
					for range 2 {
						ev := next(t, s)
						events[ev.Source] = ev
					}
					sum := last(t, s)
					j := e.queryWith(cacheControl, "domain="+plate)
					if j.status == http.StatusOK && (j.result.Summary != sum.Summary || j.result.Complete != sum.Complete) {
						t.Errorf("Cache-Control %q: the stream's summary %+v, the JSON answer's %+v", cacheControl, sum.Summary, j.result.Summary)
					}
					return events, sum, j
				}

				// Fresh: from memory, no portal called.
				events, sum, _ := streamed("")
				if got := calls(a, b); !sameInts(got, []int{1, 1}) {
					t.Errorf("fresh answers: portal calls %v, want [1 1]", got)
				}
				for _, s := range []string{"a", "b"} {
					checkRemembered(t, events[s].sourceEntry, "succeeded", "", before, after)
				}
				if want := (summary{Total: 2, Succeeded: 2}); sum.Summary != want || !sum.Complete {
					t.Errorf("fresh answers: summary %+v, want %+v", sum.Summary, want)
				}

				// b down, stale allowed: b's remembered answer stands in.
				b.set(status(http.StatusServiceUnavailable))
				events, sum, _ = streamed("no-cache, stale-if-error=600")
				if events["a"].Remembered != nil || events["a"].Status != "succeeded" {
					t.Errorf("a with no-cache: %+v, want from the portal", events["a"])
				}
				checkRemembered(t, events["b"].sourceEntry, "failed", "source-unavailable", before, after)
				if ins := events["b"].Infractions; len(ins) != 1 || ins[0].ID != "B-1" || !ins[0].Stale {
					t.Errorf("b's stood-in infractions %+v, want B-1, stale", ins)
				}
				if ins := events["a"].Infractions; len(ins) != 1 || ins[0].Stale {
					t.Errorf("a's infractions %+v, want one, not stale", ins)
				}
				if want := (summary{Total: 2, Succeeded: 1, Failed: 1, Stale: 1}); sum.Summary != want || sum.Complete {
					t.Errorf("b stood in for: summary %+v, want %+v, partial", sum.Summary, want)
				}

				// Both down: stood in for, the answer is still an answer.
				a.set(status(http.StatusServiceUnavailable))
				events, sum, j := streamed("no-cache, stale-if-error=600")
				if want := (summary{Total: 2, Failed: 2, Stale: 2}); sum.Summary != want || sum.Problem != nil || j.status != http.StatusOK {
					t.Errorf("both stood in for: summary %+v problem %+v (JSON %d), want %+v without a problem", sum.Summary, sum.Problem, j.status, want)
				}
				for _, s := range []string{"a", "b"} {
					if ins := events[s].Infractions; len(ins) != 1 || !ins[0].Stale {
						t.Errorf("%s's stood-in infractions %+v", s, ins)
					}
				}

				// Both down, no stand-in asked for: the problem, as the JSON
				// answer's 503.
				_, sum, j = streamed("no-cache")
				if sum.Problem == nil || j.status != http.StatusServiceUnavailable || sum.Summary.Stale != 0 {
					t.Fatalf("no stand-in: summary %+v problem %+v (JSON %d), want no-source-available", sum.Summary, sum.Problem, j.status)
				}
				checkType(t, *sum.Problem, "no-source-available")
			})
		}
	}
}
