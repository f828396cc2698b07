package portalsim

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// maxControlBody bounds the body of PUT /_sim/fault.
const maxControlBody = 64 << 10

// handleFault serves GET and PUT /_sim/fault.
func (p *Portal) handleFault(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		writeJSON(w, http.StatusOK, p.Fault())
	case http.MethodPut:
		var f Fault
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxControlBody))
		if err := dec.Decode(&f); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody("bad fault JSON: "+err.Error()))
			return
		}
		if err := dec.Decode(&struct{}{}); !errors.Is(err, io.EOF) {
			writeJSON(w, http.StatusBadRequest, errorBody("bad fault JSON: more than one value"))
			return
		}
		if err := p.SetFault(f); err != nil {
			writeJSON(w, http.StatusBadRequest, errorBody(err.Error()))
			return
		}
		writeJSON(w, http.StatusOK, p.Fault())
	default:
		methodNotAllowed(w, "GET, HEAD, PUT")
	}
}

// handleCalls serves GET /_sim/calls.
func (p *Portal) handleCalls(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		methodNotAllowed(w, "GET, HEAD")
		return
	}
	writeJSON(w, http.StatusOK, p.Calls())
}

// handleCallsReset serves POST /_sim/calls/reset.
func (p *Portal) handleCallsReset(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	p.ResetCalls()
	w.WriteHeader(http.StatusNoContent)
}

func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	writeJSON(w, http.StatusMethodNotAllowed, errorBody("method not allowed"))
}

// handleRevokeTokens serves POST /_sim/tokens/revoke.
func (p *Portal) handleRevokeTokens(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	p.RevokeTokens()
	w.WriteHeader(http.StatusNoContent)
}

// handleExpireSessions serves POST /_sim/sessions/expire.
func (p *Portal) handleExpireSessions(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		methodNotAllowed(w, "POST")
		return
	}
	p.ExpireSessions()
	w.WriteHeader(http.StatusNoContent)
}
