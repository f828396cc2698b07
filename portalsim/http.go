package portalsim

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// errorJSON is the body of every error answer of the simulator.
type errorJSON struct {
	Error string `json:"error"`
}

func errorBody(msg string) errorJSON { return errorJSON{Error: msg} }

// writeJSON answers status with v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is one of this package's own types.
		http.Error(w, "portalsim: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Content-Length", itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// setRetryAfter sets Retry-After in delay-seconds when d > 0.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	if d > 0 {
		w.Header().Set("Retry-After", ceilSeconds(d))
	}
}

// ceilSeconds writes d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) string {
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

func itoa(n int) string { return strconv.Itoa(n) }

// abort ends the call without an answer: the connection is closed, so the
// client sees a connection error. Where the connection cannot be taken
// over (HTTP/2), the handler is aborted, which resets the stream.
func abort(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	conn.Close()
}
