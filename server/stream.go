package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/correlation"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/memory"
	"github.com/multas/aggregator/problem"
)

// reconnectDelay is the SSE `retry:` a stream opens with: so long that an
// EventSource whose stream ended waits before it comes back, and when it
// does, its Last-Event-ID gets a 204, which stops it (SPEC 14).
const reconnectDelay = 24 * time.Hour

// streamSlack is how long past the query's budget a stream may still be
// writing: the memory's writes and stand-ins (bounded by the store), the
// fan-out's grace for the calls under way, and the summary.
const streamSlack = 10 * time.Second

// reconnecting reports whether r is an EventSource coming back after its
// stream ended: it sends the id of the last event it received.
func reconnecting(r *http.Request) bool {
	_, ok := r.Header["Last-Event-Id"]
	return ok
}

// stream answers a query as a stream of events in m (SPEC 14, Streaming):
// 200 at once, each source's part as it finishes, then the summary, each
// event flushed as it is written. The counts and the memory are those of
// the JSON answer (answer): the same engine call, with a hook.
func (s *Server) stream(c *gin.Context, m media, q aggregator.Query, set []fanout.Member, budget time.Duration, d memory.Directives, start time.Time) {
	w := newEventWriter(c.Writer, m)
	// The server's write timeout is for slow clients of quick answers: a
	// stream lasts as long as its query's budget, and no longer.
	_ = w.rc.SetWriteDeadline(time.Now().Add(budget + streamSlack))
	h := c.Writer.Header()
	noStore(c)
	h.Set("Content-Type", m.String())
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Accel-Buffering", "no") // nginx and its kin: pass each event on as it comes
	c.Status(http.StatusOK)
	w.open()

	res := s.opts.Engine.Stream(c.Request.Context(), q, set, budget, d, func(p aggregator.Part) {
		if p.Infractions == nil {
			p.Infractions = []aggregator.Infraction{}
		}
		w.send(aggregator.EventSource, aggregator.SourceEvent{Type: aggregator.EventSource, Part: p})
	})
	sum := aggregator.NewSummaryEvent(res)
	outcome := queryOutcome(res)
	if outcome == "unavailable" {
		sum.Problem = s.unanswered(res, "No source answered; the source events say why, one by one.")
		sum.Problem.Instance = c.Request.URL.Path
		sum.Problem.RequestID = h.Get(correlation.Header)
	}
	s.observeQuery(c.Request.Context(), q, outcome, s.opts.Now().Sub(start))
	w.send(aggregator.EventSummary, sum)
}

// eventWriter writes the events of one stream: SSE events numbered from 1,
// or NDJSON lines. A write that fails (the client went away) ends the
// writing; the query itself ends with the request's context.
type eventWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	media media
	n     int // events written
	buf   bytes.Buffer
	err   error
}

func newEventWriter(w http.ResponseWriter, m media) *eventWriter {
	return &eventWriter{w: w, rc: http.NewResponseController(w), media: m}
}

// open sends the headers, and, for SSE, the reconnection delay: the first
// line of the first event, so that it holds from the start.
func (w *eventWriter) open() {
	if w.media == mediaEventStream {
		w.buf.WriteString("retry: ")
		w.buf.WriteString(strconv.FormatInt(reconnectDelay.Milliseconds(), 10))
		w.buf.WriteByte('\n')
	}
	w.flush()
}

// send writes one event of type typ with data v.
func (w *eventWriter) send(typ string, v any) {
	if w.err != nil {
		return
	}
	w.n++
	if w.media == mediaEventStream {
		w.buf.WriteString("id: ")
		w.buf.WriteString(strconv.Itoa(w.n))
		w.buf.WriteString("\nevent: ")
		w.buf.WriteString(typ)
		w.buf.WriteString("\ndata: ")
	}
	// encoding/json escapes every line break inside strings: the data is
	// one line, which Encode ends.
	if w.err = json.NewEncoder(&w.buf).Encode(v); w.err != nil {
		return
	}
	if w.media == mediaEventStream {
		w.buf.WriteByte('\n') // the blank line that dispatches the event
	}
	w.flush()
}

func (w *eventWriter) flush() {
	if w.err != nil {
		return
	}
	if _, w.err = w.w.Write(w.buf.Bytes()); w.err == nil {
		w.err = w.rc.Flush()
	}
	w.buf.Reset()
}

// unanswered is the no-source-available problem of a result that no
// source answered: with Retry-After when every source was skipped.
func (s *Server) unanswered(res aggregator.Result, detail string) *problem.Problem {
	p := s.opts.Problems.New(problem.NoSourceAvailable, detail)
	if len(res.Sources) == 0 {
		p.Detail = "No configured source can answer this query."
	}
	if retry, ok := shortestRetry(res.Sources); ok {
		p.RetryAfter = &retry
	}
	return p
}

// queryOutcome is the outcome of a query in aggregator_queries_total.
func queryOutcome(res aggregator.Result) string {
	switch {
	case !res.Answered():
		return "unavailable"
	case res.Complete:
		return "complete"
	}
	return "partial"
}
