package chaos

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// requestHeader carries a worker's request id to the replica's handler.
const requestHeader = "X-Chaos-Request"

// handled is how long a replica's handler took over one request: the
// time the aggregator's budget governs, without the time the request and
// its answer spent between the client and the handler.
type handled struct {
	start time.Time
	d     time.Duration
}

// handlerTimes keeps the handling time of each request by id until the
// worker that sent it takes it.
type handlerTimes struct {
	mu   sync.Mutex
	byID map[uint64]handled
}

// wrap times h's handling of every request that carries an id.
func (ht *handlerTimes) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := strconv.ParseUint(r.Header.Get(requestHeader), 10, 64)
		if err != nil {
			h.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		defer func() { // a handler that aborts its answer panics
			ht.mu.Lock()
			ht.byID[id] = handled{start: start, d: time.Since(start)}
			ht.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// take returns the handling time of request id, waiting up to wait for
// the handler to return: the end of an answer may reach the client just
// before its handler returns.
func (ht *handlerTimes) take(id uint64, wait time.Duration) (handled, bool) {
	deadline := time.Now().Add(wait)
	for {
		ht.mu.Lock()
		h, ok := ht.byID[id]
		delete(ht.byID, id)
		ht.mu.Unlock()
		if ok || time.Now().After(deadline) {
			return h, ok
		}
		time.Sleep(2 * time.Millisecond)
	}
}
