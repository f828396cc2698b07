package async

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/problem"
	"github.com/multas/aggregator/sources"
	"github.com/multas/aggregator/sources/mapping"
	"github.com/multas/aggregator/tracing"
)

// Each webhook delivery attempt is a client span (SPEC 10) whose
// traceparent reaches the receiver; the span names no part of the
// callback URL (its path or query may hold a token).
func TestDeliverySpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	r := newRig(t, Options{MaxAttempts: 1, AllowPrivate: true, TracerProvider: tp})
	recv := newReceiver(t, r.clock, 0)
	r.submit(t, recv.srv.URL+"/hook/s3cr3t-token?k=AB123CD")
	eventually(t, "delivery", func() bool { return len(recv.hooks()) == 1 })
	var client []sdktrace.ReadOnlySpan
	eventually(t, "span ended", func() bool {
		client = client[:0]
		for _, s := range rec.Ended() {
			if s.SpanKind() == trace.SpanKindClient {
				client = append(client, s)
			}
		}
		return len(client) == 1
	})
	s := client[0]
	got := recv.hooks()[0].header.Get("traceparent")
	if want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; got != want {
		t.Errorf("receiver got traceparent %q, want %q", got, want)
	}
	if s.Name() != "POST" {
		t.Errorf("span named %q, want POST", s.Name())
	}
	u, _ := url.Parse(recv.srv.URL)
	for _, kv := range s.Attributes() {
		v := kv.Value.String()
		if strings.Contains(v, "s3cr3t") || strings.Contains(v, "AB123CD") || strings.Contains(v, "/hook") {
			t.Errorf("attribute %s = %s holds the callback URL", kv.Key, v)
		}
		if kv.Key == "server.address" && v != u.Hostname() {
			t.Errorf("server.address %s, want %s", v, u.Hostname())
		}
	}
}

// tracedEngine is a one-source fan-out over p traced with tp (nil: no
// spans): a lookup span per source, and a client span per portal request.
func tracedEngine(t *testing.T, p *portal, now func() time.Time, tp trace.TracerProvider, hook func(breaker.Event)) (*fanout.Engine, *breaker.Set) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	src, err := sources.New(sources.Spec{
		ID: "caba", Jurisdiction: "Ciudad de Buenos Aires", BaseURL: p.srv.URL,
		Operations: map[aggregator.Operation]sources.OperationSpec{aggregator.ByDomain: {Method: http.MethodGet, Path: "/actas?dominio={domain}"}},
		Response: mapping.Response{Items: mapping.Items{{Select: "/resultado/actas"}},
			Fields:    map[string]mapping.Field{"id": {Select: mapping.List{"/nro"}}, "status": {Select: mapping.List{"/estado"}}},
			StatusMap: map[string]string{"IMPAGA": "unpaid"}},
		Currency: "ARS",
	}, &http.Client{Transport: tracing.Transport(tr, tp, nil)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{Now: now, OnTransition: hook})
	set.Add(breaker.ID{Key: "caba", Operation: aggregator.ByDomain}, "caba", breaker.Settings{
		Window: time.Minute, MinCalls: 1, FailureRatio: 0.5, OpenFor: 200 * time.Millisecond,
		FailureStatuses: []int{500, 502, 503, 504}, ProbeLease: 2 * time.Second,
	})
	// The portal answers at once; a call bound of a second failed calls
	// on a loaded machine, and a failure opens the breaker (one call is
	// enough) until the fake clock moves, which most tests never do. The
	// query's budget bounds the call instead.
	eng := fanout.New([]fanout.Member{{Source: src, BreakerKey: "caba", Timeout: time.Minute}},
		fanout.Options{Breakers: set, Problems: problem.Catalog{Base: "https://errors.test/problems/"}, Tracer: tracing.Tracer(tp)})
	t.Cleanup(eng.Close)
	return eng, set
}

// The work an asynchronous query leaves for later is linked to the request
// that created it (SPEC 10, 3.4), whatever the store and across a restart:
// the query keeps the request's W3C trace context; the lookups of its
// retained sources, run after the portal recovered, and each attempt of
// its delivery (a failed one, then its redelivery from the DLQ) start
// traces of their own whose first span links to the request's span, its
// tracestate included. The spans under them are their children, without
// links; the query's first run, inside the request, is the request's child.
func TestAsyncWorkLinksToItsRequest(t *testing.T) {
	stores := map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemoryStore() },
		"redis": func(t *testing.T) Store {
			c, prefix := testRedis(t)
			return NewRedisStore(c, prefix)
		},
	}
	for name, newStore := range stores {
		t.Run(name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
			p := newPortal(t)
			clock := newFakeClock()
			var current atomic.Pointer[Manager]
			eng, set := tracedEngine(t, p, clock.Now, tp, func(e breaker.Event) {
				if m := current.Load(); m != nil {
					m.OnTransition(e)
				}
			})
			store := newStore(t)
			recv := newReceiver(t, clock, http.StatusInternalServerError)
			start := func() *Manager {
				m, err := New(Options{Engine: eng, Breakers: set, Store: store, Clock: clock, Resolver: resolver{},
					AllowPrivate: true, MaxAttempts: 1, ReleaseRPS: 50, TracerProvider: tp})
				if err != nil {
					t.Fatal(err)
				}
				current.Store(m)
				m.Start()
				t.Cleanup(func() { _ = m.Close() })
				return m
			}
			step := func() {
				clock.Advance(50 * time.Millisecond)
				time.Sleep(3 * time.Millisecond)
			}

			// The request, child of a caller's span that has a tracestate.
			caller := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0x4b, 0xf9}, SpanID: trace.SpanID{0xf0},
				TraceFlags: trace.FlagsSampled, Remote: true})
			ts, err := trace.ParseTraceState("vendor=v1")
			if err != nil {
				t.Fatal(err)
			}
			caller = caller.WithTraceState(ts)
			ctx, request := tp.Tracer("test").Start(trace.ContextWithRemoteSpanContext(context.Background(), caller),
				"POST /v1/queries", trace.WithSpanKind(trace.SpanKindServer))
			p.setDown(http.StatusServiceUnavailable)
			m := start()
			q := aggregator.Query{Domain: "AB123CD"}
			members, _ := eng.Select(q, nil)
			v, err := m.Submit(ctx, Request{Query: q, Sources: members, CallbackURL: recv.srv.URL + "/hook"})
			if err != nil {
				t.Fatal(err)
			}
			request.End()
			if v.Status != Pending {
				t.Fatalf("status %s, want pending", v.Status)
			}
			stored, err := store.Query(context.Background(), v.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got := stored.Trace.spanContext(); got.SpanID() != request.SpanContext().SpanID() || got.TraceState().Get("vendor") != "v1" {
				t.Fatalf("stored trace context %+v, want the request's span with its tracestate", stored.Trace)
			}

			// A restart; the portal recovers, the query completes, and its
			// delivery fails its only attempt.
			_ = m.Close()
			p.setDown(0)
			m = start()
			for i := 0; len(recv.hooks()) < 1; i++ {
				if i > 400 {
					t.Fatal("not delivered 20s after the portal recovered")
				}
				step()
			}
			var dlq []DLQEntry
			eventually(t, "dead letter", func() bool {
				dlq, _ = m.DLQ(context.Background())
				return len(dlq) == 1
			})
			// Another restart; redelivered from the DLQ, it succeeds.
			_ = m.Close()
			recv.set(http.StatusOK)
			m = start()
			if err := m.Redeliver(context.Background(), dlq[0].ID); err != nil {
				t.Fatal(err)
			}
			for i := 0; len(recv.hooks()) < 2; i++ {
				if i > 400 {
					t.Fatal("not redelivered")
				}
				step()
			}
			_ = m.Close()

			want := request.SpanContext()
			var retained, attempts int
			for _, s := range rec.Ended() {
				if s.SpanContext().TraceID() == want.TraceID() {
					// The request's own trace: the first run, no links.
					if len(s.Links()) != 0 {
						t.Errorf("span %q in the request's trace has links", s.Name())
					}
					continue
				}
				root := !s.Parent().IsValid()
				switch {
				case root && s.Name() == "lookup caba":
					retained++
				case root && s.SpanKind() == trace.SpanKindClient:
					attempts++
				case root:
					t.Errorf("unexpected root span %q", s.Name())
				}
				if !root {
					if len(s.Links()) != 0 {
						t.Errorf("span %q, under a linked span, has links of its own", s.Name())
					}
					continue
				}
				if len(s.Links()) != 1 {
					t.Errorf("span %q has %d links, want 1", s.Name(), len(s.Links()))
					continue
				}
				l := s.Links()[0].SpanContext
				if l.TraceID() != want.TraceID() || l.SpanID() != want.SpanID() || l.TraceState().Get("vendor") != "v1" {
					t.Errorf("span %q links to %v, want the request's %v", s.Name(), l, want)
				}
			}
			if retained == 0 {
				t.Errorf("no retained lookup span")
			}
			if attempts != 2 {
				t.Errorf("%d delivery attempt spans, want 2", attempts)
			}
			// Each attempt sent its own trace, not the request's.
			for _, h := range recv.hooks() {
				if tp := h.header.Get("traceparent"); tp == "" || strings.Contains(tp, want.TraceID().String()) {
					t.Errorf("the receiver got traceparent %q", tp)
				}
			}
		})
	}
}

// soundTrace is a trace context as Submit keeps it.
var soundTrace = TraceContext{Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", State: "vendor=v1"}

// unsoundTraces are trace contexts of the right shape that this package
// does not write.
var unsoundTraces = map[string]TraceContext{
	"not W3C":                          {Parent: marker},
	"upper-case hex":                   {Parent: strings.ToUpper(soundTrace.Parent)},
	"a zero trace id":                  {Parent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
	"a zero span id":                   {Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01"},
	"reserved flags":                   {Parent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09"},
	"version ff":                       {Parent: "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	"a later version, more parts":      {Parent: "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-" + marker},
	"a tracestate that does not parse": {Parent: soundTrace.Parent, State: "=" + marker + ",="},
	"a tracestate too long":            {Parent: soundTrace.Parent, State: "v=" + strings.Repeat("x", maxText)},
	"a tracestate alone":               {State: soundTrace.State},
}

// Redis contents are untrusted (SPEC 9): a query, a delivery or a DLQ
// entry whose trace context is not one this package writes is read
// without it (its work goes on, unlinked), never an error, and the key is
// logged, not the value. A sound one is read back as written; a value
// written before trace contexts were kept is read as untraced, unreported.
func TestRedisStoreUnsoundTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, prefix, log := garbageStore(t)
	cases := map[string]TraceContext{"sound": soundTrace, "absent": {}}
	for name, tc := range unsoundTraces {
		cases[name] = tc
	}
	for name, tc := range cases {
		want := tc
		if !tc.sound() {
			want = TraceContext{}
		}
		if (name == "sound") != (want != TraceContext{}) {
			t.Fatalf("%s: sound() = %v", name, tc.sound())
		}
		q := goodQuery()
		q.Trace = tc
		qdoc, _ := json.Marshal(q)
		if name == "absent" && strings.Contains(string(qdoc), "trace") {
			t.Fatalf("an untraced query is written with a trace member, unlike before: %s", qdoc)
		}
		qkey := prefix + "{async}:q:" + q.ID
		c.HSet(ctx, qkey, "status", "pending", "doc", qdoc)
		got, err := s.Query(ctx, q.ID)
		if err != nil {
			t.Errorf("%s: Query = %v", name, err)
		} else if got.Trace != want {
			t.Errorf("%s: query read with trace %+v, want %+v", name, got.Trace, want)
		}

		d := &Delivery{ID: newID("dlv_"), MessageID: "msg_" + q.ID, QueryID: q.ID, CallbackURL: q.CallbackURL,
			Payload: json.RawMessage(`{"type":"query.completed"}`), CreatedAt: t0, Due: t0, Trace: tc}
		if err := s.SaveDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}
		ds, err := s.ClaimDeliveries(ctx, t0, time.Minute, 100)
		if err != nil || len(ds) != 1 || ds[0].ID != d.ID {
			t.Errorf("%s: ClaimDeliveries = %+v, %v; want the delivery", name, ds, err)
		} else if ds[0].Trace != want {
			t.Errorf("%s: delivery read with trace %+v, want %+v", name, ds[0].Trace, want)
		}
		if err := s.DeleteDelivery(ctx, d); err != nil {
			t.Fatal(err)
		}

		e := DLQEntry{ID: newID("dlv_"), QueryID: q.ID, CallbackURL: q.CallbackURL, Attempts: 5, LastError: "HTTP 500",
			CreatedAt: t0, FailedAt: t0, Payload: d.Payload, MessageID: d.MessageID, Trace: tc}
		if err := s.DeadLetter(ctx, &Delivery{ID: e.ID}, e); err != nil {
			t.Fatal(err)
		}
		entries, err := s.DLQ(ctx)
		if err != nil || len(entries) != 1 {
			t.Errorf("%s: DLQ = %+v, %v; want the entry", name, entries, err)
		} else if entries[0].Trace != want {
			t.Errorf("%s: DLQ entry read with trace %+v, want %+v", name, entries[0].Trace, want)
		}
		var fresh *Delivery
		if err := s.Redeliver(ctx, e.ID, func(e DLQEntry) *Delivery {
			fresh = &Delivery{ID: newID("dlv_"), MessageID: e.MessageID, QueryID: e.QueryID, CallbackURL: e.CallbackURL,
				Payload: e.Payload, CreatedAt: t0, Due: t0, Trace: e.Trace}
			return fresh
		}); err != nil {
			t.Errorf("%s: Redeliver = %v", name, err)
		} else if fresh.Trace != want {
			t.Errorf("%s: redelivered with trace %+v, want %+v", name, fresh.Trace, want)
		}
		if err := s.DeleteDelivery(ctx, fresh); err != nil {
			t.Fatal(err)
		}

		for what, at := range map[string]string{
			qkey: `"at":"trace"`, prefix + "{async}:d:" + d.ID: `"at":"trace"`, prefix + "{async}:dlq": `"at":"field ` + e.ID + ` trace"`,
		} {
			reported := strings.Contains(log.String(), `"key":"`+what+`",`+at)
			if reported != (tc != want) {
				t.Errorf("%s: %s %s reported: %v, want %v", name, what, at, reported, tc != want)
			}
		}
	}
	if strings.Contains(log.String(), marker) {
		t.Errorf("the log holds a planted value:\n%s", log.String())
	}
}
