package chaos

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
)

// callHeader carries a call's id from a replica's transport to the portal.
const callHeader = "X-Chaos-Call"

// call is one request of a replica to a portal, as both ends saw it.
type call struct {
	id      uint64
	replica int // -1 when the portal got a call without an id
	breaker breaker.ID

	// The replica's side.
	start time.Time
	end   time.Time // the body was closed or the call failed; zero before
	// clean is true when the replica read the answer to its end with time
	// to spare before every deadline of the call: the aggregator then
	// judged it on the portal's answer alone.
	clean bool
	// deadline is the call's deadline, as its context had it.
	deadline time.Time

	// The portal's side.
	arrived, served time.Time // zero when it never got there
	status          int
	kindIn, kindOut Kind // the portal's fault when the call arrived and ended
	broken          bool // writing the answer failed, or the handler aborted
	// replay is true for a second arrival of the same call: the client's
	// transport sends an idempotent request again, once, when a reused
	// connection closes without an answer.
	replay bool
}

// inFlightUntil is when the call stopped being in flight: the earlier of
// the two ends, or far in the future while neither has ended.
func (c *call) inFlightUntil() time.Time {
	switch {
	case c.served.IsZero() && c.end.IsZero():
		return time.Unix(1<<40, 0)
	case c.served.IsZero():
		return c.end
	case c.end.IsZero() || c.served.Before(c.end):
		return c.served
	}
	return c.end
}

// decisive reports whether the portal's answer to c decided a half-open
// episode: data or a failure status, read in full with time to spare, so
// that the breaker closed or opened on it.
func (c *call) decisive() bool {
	if !c.clean || c.broken || c.kindIn != c.kindOut || c.served.IsZero() {
		return false
	}
	switch c.kindIn {
	case Healthy, Slow:
		return c.status == http.StatusOK || c.status == http.StatusNotFound && c.breaker.Operation != aggregator.Voucher
	case Flaky:
		return c.status == http.StatusOK || c.status == http.StatusServiceUnavailable ||
			c.status == http.StatusNotFound && c.breaker.Operation != aggregator.Voucher
	case ServerError:
		return c.status == http.StatusInternalServerError
	}
	return false
}

// callLog joins the two ends of every call and keeps, per breaker, the
// calls in the order they arrived at the portal.
type callLog struct {
	hosts map[string]string // a portal's host:port → its source id

	mu        sync.Mutex
	next      uint64
	pending   map[uint64]*call // until both ends have ended
	byBreaker map[breaker.ID][]*call
	arrived   int64
	replays   int64
}

func newCallLog() *callLog {
	return &callLog{hosts: map[string]string{}, pending: map[uint64]*call{}, byBreaker: map[breaker.ID][]*call{}}
}

// operationOf tells the operation of a portal request by its path, for the
// three dialects of portalsim.
func operationOf(r *http.Request) aggregator.Operation {
	p, q := r.URL.Path, r.URL.Query()
	switch {
	case strings.HasSuffix(p, "/boleta"), strings.HasSuffix(p, "/cupon"), strings.HasSuffix(p, "/comprobante"):
		return aggregator.Voucher
	case q.Has("dominio"), q.Has("patente"), strings.HasPrefix(p, "/v1/vehiculos/"):
		return aggregator.ByDomain
	case q.Has("cuit"), q.Has("documento"), strings.HasPrefix(p, "/v1/personas/"):
		return aggregator.ByID
	}
	return ""
}

// begin records a call the replica is about to send.
func (l *callLog) begin(replica int, r *http.Request) *call {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.next++
	c := &call{id: l.next, replica: replica, start: time.Now(),
		breaker: breaker.ID{Key: l.hosts[r.URL.Host], Operation: operationOf(r)}}
	l.pending[c.id] = c
	return c
}

// ended records the replica's end of c.
func (l *callLog) ended(c *call, clean bool, deadline time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.end, c.clean, c.deadline = time.Now(), clean, deadline
	if !c.served.IsZero() {
		delete(l.pending, c.id)
	}
}

// arrive records a call arriving at portal source.
func (l *callLog) arrive(source string, r *http.Request, kind Kind) *call {
	id, err := strconv.ParseUint(r.Header.Get(callHeader), 10, 64)
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.pending[id]
	switch {
	case err != nil || c == nil:
		c = &call{replica: -1, breaker: breaker.ID{Key: source, Operation: operationOf(r)}}
	case !c.arrived.IsZero():
		c = &call{id: c.id, replica: c.replica, breaker: c.breaker, start: c.start, replay: true}
		l.replays++
	}
	c.arrived, c.kindIn = time.Now(), kind
	l.arrived++
	if c.breaker.Operation != "" {
		l.byBreaker[c.breaker] = append(l.byBreaker[c.breaker], c)
	}
	return c
}

// serve records the portal's end of c.
func (l *callLog) serve(c *call, status int, broken bool, kind Kind) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c.served, c.status, c.broken, c.kindOut = time.Now(), status, broken, kind
	if !c.end.IsZero() && !c.replay {
		delete(l.pending, c.id)
	}
}

// tap is a replica's transport to the portals: it tags and records every
// call.
type tap struct {
	next    http.RoundTripper
	replica int
	log     *callLog
}

// spare is how far from its deadline a call must end to be clean: the
// aggregator's verdict on it then cannot be a cut by its query's deadline.
const spare = 100 * time.Millisecond

func (t *tap) RoundTrip(req *http.Request) (*http.Response, error) {
	c := t.log.begin(t.replica, req)
	out := req.Clone(req.Context())
	out.Header.Set(callHeader, strconv.FormatUint(c.id, 10))
	resp, err := t.next.RoundTrip(out)
	if err != nil {
		t.log.ended(c, false, time.Time{})
		return nil, err
	}
	resp.Body = &tapBody{ReadCloser: resp.Body, ctx: req.Context(), c: c, log: t.log}
	return resp, nil
}

// tapBody notes when the replica is done with an answer, and whether it
// read all of it in time.
type tapBody struct {
	io.ReadCloser
	ctx  context.Context
	c    *call
	log  *callLog
	eof  bool
	once sync.Once
}

func (b *tapBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

func (b *tapBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() {
		clean := b.eof && b.ctx.Err() == nil
		d, ok := b.ctx.Deadline()
		if ok && time.Until(d) < spare {
			clean = false
		}
		b.log.ended(b.c, clean, d)
	})
	return err
}
