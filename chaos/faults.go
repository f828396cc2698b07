package chaos

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/multas/aggregator/portalsim"
)

// Kind is one way a portal misbehaves.
type Kind string

// The kinds of fault. All but Slowloris and ResetMidBody are the
// simulator's own modes; those two are wrappers of this package around the
// simulator's answer.
const (
	Healthy Kind = "healthy"
	// Slow answers after Fault.Latency.
	Slow Kind = "slow"
	// Flaky answers a fraction Fault.FailRate of calls 503, with
	// Retry-After when Fault.RetryAfter is set: with a rate of 1 and a
	// Retry-After, a 503 burst.
	Flaky Kind = "flaky"
	// Throttle answers every call 429 with Retry-After: a 429 storm.
	Throttle Kind = "throttle"
	// Down closes every connection without answering.
	Down Kind = "down"
	// Hang never answers.
	Hang Kind = "hang"
	// ServerError answers every call 500.
	ServerError Kind = "status-500"
	// InvalidJSON answers 200 with a body that is not JSON.
	InvalidJSON Kind = "invalid-json"
	// Oversized answers 200 with a JSON body larger than any limit.
	Oversized Kind = "oversized"
	// Slowloris sends the portal's real answer a few bytes at a time, far
	// slower than any client waits for.
	Slowloris Kind = "slowloris"
	// ResetMidBody sends the headers and half of the portal's real answer,
	// then resets the connection (TCP RST).
	ResetMidBody Kind = "reset-mid-body"
)

// Fault is the behaviour of a portal for a while.
type Fault struct {
	Kind       Kind
	Latency    time.Duration // Slow
	FailRate   float64       // Flaky
	RetryAfter time.Duration // Flaky, Throttle
}

func (f Fault) String() string {
	s := string(f.Kind)
	switch f.Kind {
	case Slow:
		s += " " + f.Latency.String()
	case Flaky:
		s += fmt.Sprintf(" %g%%", f.FailRate*100)
	}
	if f.RetryAfter > 0 {
		s += " Retry-After " + f.RetryAfter.String()
	}
	return s
}

// wrapped reports whether the fault is one of this package's wrappers.
func (f Fault) wrapped() bool { return f.Kind == Slowloris || f.Kind == ResetMidBody }

// sim is the simulator's fault for f; healthy for the wrappers, which
// distort the simulator's healthy answer.
func (f Fault) sim() portalsim.Fault {
	switch f.Kind {
	case Slow:
		return portalsim.Fault{Mode: portalsim.Slow, Latency: f.Latency}
	case Flaky:
		return portalsim.Fault{Mode: portalsim.Flaky, FailRate: f.FailRate, RetryAfter: f.RetryAfter}
	case Throttle:
		return portalsim.Fault{Mode: portalsim.Throttle, RetryAfter: f.RetryAfter}
	case Down:
		return portalsim.Fault{Mode: portalsim.Down}
	case Hang:
		return portalsim.Fault{Mode: portalsim.Hang}
	case ServerError:
		return portalsim.Fault{Mode: portalsim.Healthy, Status: http.StatusInternalServerError}
	case InvalidJSON:
		return portalsim.Fault{Mode: portalsim.Error}
	case Oversized:
		return portalsim.Fault{Mode: portalsim.Oversized}
	}
	return portalsim.Fault{Mode: portalsim.Healthy}
}

// How slowly a slowloris body goes: a source's timeout sees a few bytes.
const (
	slowlorisChunk = 8
	slowlorisEvery = 150 * time.Millisecond
)

// slowloris answers r with h's answer, its body trickled out.
func slowloris(w http.ResponseWriter, r *http.Request, h http.Handler, done <-chan struct{}) {
	ans := capture(h, r)
	copyHeader(w.Header(), ans.header)
	w.Header().Set("Content-Length", strconv.Itoa(ans.body.Len()))
	w.WriteHeader(ans.status)
	rc := http.NewResponseController(w)
	body := ans.body.Bytes()
	t := time.NewTimer(slowlorisEvery)
	defer t.Stop()
	for off := 0; off < len(body); off += slowlorisChunk {
		if _, err := w.Write(body[off:min(off+slowlorisChunk, len(body))]); err != nil {
			return
		}
		if rc.Flush() != nil {
			return
		}
		t.Reset(slowlorisEvery)
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-done:
			return
		}
	}
}

// resetMidBody answers r with the headers and half the body of h's
// answer, then resets the connection.
func resetMidBody(w http.ResponseWriter, r *http.Request, h http.Handler) {
	ans := capture(h, r)
	copyHeader(w.Header(), ans.header)
	w.Header().Set("Content-Length", strconv.Itoa(ans.body.Len()))
	w.WriteHeader(ans.status)
	body := ans.body.Bytes()
	_, _ = w.Write(body[:len(body)/2])
	rc := http.NewResponseController(w)
	_ = rc.Flush()
	conn, _, err := rc.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler) // the server closes the connection
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // RST, not FIN
	}
	_ = conn.Close()
}

// answer is a response held in memory.
type answer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answer) Header() http.Header { return a.header }
func (a *answer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
}
func (a *answer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

// capture runs h for r into memory.
func capture(h http.Handler, r *http.Request) *answer {
	a := &answer{header: http.Header{}}
	h.ServeHTTP(a, r)
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append([]string(nil), vs...)
	}
}
