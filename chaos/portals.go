package chaos

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/multas/aggregator/portalsim"
)

// portal is one simulated portal on its own loopback listener: the
// simulator, this package's fault wrappers around it, and in front of both
// the recorder that notes every call.
type portal struct {
	id      string
	sim     *portalsim.Portal
	profile profile
	log     *callLog
	url     string

	fault atomic.Pointer[Fault]
	done  chan struct{} // closed at shutdown: slowloris bodies stop

	mu   sync.Mutex
	seen map[Kind]bool // every kind of fault it has had

	srv     *http.Server
	serving chan struct{} // closed when Serve has returned
}

// set changes the portal's behaviour from the next call on.
func (p *portal) set(f Fault) {
	// The wrappers distort the simulator's healthy answer: make it healthy
	// before the wrapper goes on, and take the wrapper off before the
	// simulator's own fault goes on.
	if f.wrapped() {
		_ = p.sim.SetFault(f.sim())
		p.fault.Store(&f)
	} else {
		p.fault.Store(&f)
		_ = p.sim.SetFault(f.sim())
	}
	p.mu.Lock()
	p.seen[f.Kind] = true
	p.mu.Unlock()
}

func (p *portal) kind() Kind { return p.fault.Load().Kind }

// kinds lists the kinds of fault the portal has had, healthy excepted.
func (p *portal) kinds() []Kind {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ks []Kind
	for _, k := range allKinds {
		if k != Healthy && p.seen[k] {
			ks = append(ks, k)
		}
	}
	return ks
}

// onlyThrottled reports whether the portal's only fault was 429 storms.
func (p *portal) onlyThrottled() bool {
	ks := p.kinds()
	return len(ks) == 1 && ks[0] == Throttle
}

func (p *portal) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f := *p.fault.Load()
	c := p.log.arrive(p.id, r, f.Kind)
	rw := &recordingWriter{ResponseWriter: w}
	broken := true // until the handler returns normally
	defer func() { p.log.serve(c, rw.status, broken || rw.failed, p.kind()) }()
	switch f.Kind {
	case Slowloris:
		slowloris(rw, r, p.sim, p.done)
	case ResetMidBody:
		resetMidBody(rw, r, p.sim)
	default:
		p.sim.ServeHTTP(rw, r)
	}
	broken = f.Kind == Down || f.Kind == Hang || f.Kind == Slowloris || f.Kind == ResetMidBody
}

// recordingWriter notes the status a handler answered and whether writing
// failed. Unwrap lets http.ResponseController reach the connection.
type recordingWriter struct {
	http.ResponseWriter
	status int
	failed bool
}

func (w *recordingWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	if err != nil {
		w.failed = true
	}
	return n, err
}

func (w *recordingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// startPortals serves each jurisdiction on a free 127.0.0.1 port, with the
// profile of the same index. On error nothing is left running.
func startPortals(js []portalsim.Jurisdiction, profiles []profile, calls *callLog) ([]*portal, error) {
	var ps []*portal
	for i, j := range js {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			closePortals(ps)
			return nil, err
		}
		p := &portal{
			id: j.ID, sim: portalsim.New(j), profile: profiles[i], log: calls,
			url: "http://" + ln.Addr().String(), done: make(chan struct{}),
			seen: map[Kind]bool{}, serving: make(chan struct{}),
		}
		p.set(Fault{Kind: Healthy})
		p.srv = &http.Server{
			Handler:           p,
			ReadHeaderTimeout: 10 * time.Second,
			// Aborted calls are what a fault injector is for, not news.
			ErrorLog: log.New(io.Discard, "", 0),
		}
		calls.hosts[ln.Addr().String()] = j.ID
		go func() {
			defer close(p.serving)
			_ = p.srv.Serve(ln)
		}()
		ps = append(ps, p)
	}
	return ps, nil
}

// closePortals stops every portal and returns when none of their handlers
// is left running.
func closePortals(ps []*portal) error {
	var errs []error
	for _, p := range ps {
		close(p.done)
		p.set(Fault{Kind: Healthy})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range ps {
		// The simulator's hanging and sleeping calls return when it is
		// closed; Shutdown then waits for every other handler to return.
		p.sim.Close()
		if err := p.srv.Shutdown(ctx); err != nil {
			errs = append(errs, err)
			_ = p.srv.Close()
		}
		<-p.serving
	}
	return errors.Join(errs...)
}
