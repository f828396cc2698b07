package server

import (
	"net/http"

	"github.com/multas/aggregator/correlation"
)

// withRequestID gives the request its id (SPEC 10, Correlation): the
// caller's X-Request-Id when it is valid, else a new one. The answer
// carries it from the start, so that every answer has it, whatever
// writes it (problem.Write copies it into problem documents), and the
// request's context holds it for the log lines written about it.
func withRequestID(w http.ResponseWriter, r *http.Request) *http.Request {
	id := r.Header.Get(correlation.Header)
	if !correlation.Valid(id) {
		id = correlation.New()
	}
	w.Header().Set(correlation.Header, id)
	return r.WithContext(correlation.WithRequestID(r.Context(), id))
}
