package portalsim

import "sync"

// CallStats counts the calls a portal received since it started or since
// its counts were last reset, whatever it then answered. Calls to the
// control endpoint /_sim/ are not counted.
type CallStats struct {
	ByDomain int64 `json:"by_domain"`
	ByID     int64 `json:"by_id"`
	Voucher  int64 `json:"voucher"`
	// Other counts calls to paths the portal does not serve, or without the
	// query parameters it needs.
	Other int64 `json:"other"`
	// Token counts the calls to the OAuth2 token endpoint, SessionPage the
	// calls to the session page (ShapeOAuth2, ShapeSession).
	Token       int64 `json:"token"`
	SessionPage int64 `json:"session_page"`
	// Total is every call: the sum of the six counts above.
	Total int64 `json:"total"`

	// TokensIssued counts the OAuth2 tokens issued, SessionsIssued the
	// sessions started (by the session page, or by a call without a valid
	// session answered with that page).
	TokensIssued   int64 `json:"tokens_issued"`
	SessionsIssued int64 `json:"sessions_issued"`
	// Refused counts the calls refused for want of valid credentials: the
	// token endpoint's invalid_client, the API's 401 and 403, a session
	// page in place of an answer.
	Refused int64 `json:"refused"`

	// InFlight is the number of calls being handled now, and MaxInFlight
	// the largest it has been: a half-open breaker should let one through.
	InFlight    int64 `json:"in_flight"`
	MaxInFlight int64 `json:"max_in_flight"`
}

// counter is the concurrency-safe keeper of CallStats.
type counter struct {
	mu   sync.Mutex
	idle sync.Cond // broadcast when InFlight drops to zero
	c    CallStats
}

func newCounter() *counter {
	c := &counter{}
	c.idle.L = &c.mu
	return c
}

func (c *counter) begin(k kind) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch k {
	case kindByDomain:
		c.c.ByDomain++
	case kindByID:
		c.c.ByID++
	case kindVoucher:
		c.c.Voucher++
	case kindToken:
		c.c.Token++
	case kindSession:
		c.c.SessionPage++
	default:
		c.c.Other++
	}
	c.c.Total++
	c.c.InFlight++
	c.c.MaxInFlight = max(c.c.MaxInFlight, c.c.InFlight)
}

func (c *counter) refused()       { c.bump(&c.c.Refused) }
func (c *counter) tokenIssued()   { c.bump(&c.c.TokensIssued) }
func (c *counter) sessionIssued() { c.bump(&c.c.SessionsIssued) }

// bump adds one to n, a count of c.c.
func (c *counter) bump(n *int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	*n++
}

func (c *counter) end() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.c.InFlight--
	if c.c.InFlight == 0 {
		c.idle.Broadcast()
	}
}

func (c *counter) snapshot() CallStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.c
}

// reset zeroes the counts; the calls in flight stay in flight.
func (c *counter) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.c = CallStats{InFlight: c.c.InFlight, MaxInFlight: c.c.InFlight}
}

// waitIdle blocks until no call is in flight.
func (c *counter) waitIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.c.InFlight > 0 {
		c.idle.Wait()
	}
}
