package server

import (
	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator/problem"
)

// DefaultMaxInFlight is Options.MaxInFlight when it is zero (SPEC 9
// `server.max_in_flight`).
const DefaultMaxInFlight = 1024

// limitInFlight bounds the requests being served at once to
// Options.MaxInFlight. It runs once the request's body has arrived
// (readBody), so that slow clients take no slot. Above the bound, the
// answer is 503 overloaded with Retry-After: 1, at once: one atomic
// addition decides, before any handler runs. Health, readiness and
// metrics are neither counted nor refused, so that probes and scrapes see
// an overloaded replica as it is; nor are the profiles of /debug/pprof,
// which an operator needs most when the replica is overloaded (they take
// the admin token).
func (s *Server) limitInFlight(c *gin.Context) {
	switch p := c.Request.URL.Path; {
	case p == "/healthz", p == "/readyz", p == "/metrics", isPprof(p):
		c.Next()
		return
	}
	if s.inFlight.Add(1) > s.maxInFlight {
		s.inFlight.Add(-1)
		s.overloaded(c)
		return
	}
	defer s.inFlight.Add(-1)
	c.Next()
}

// overloaded answers 503 overloaded, counted in the HTTP metrics like any
// other answer.
func (s *Server) overloaded(c *gin.Context) {
	p := s.opts.Problems.New(problem.Overloaded, "This replica is serving as many requests as it may; try again shortly.")
	one := 1
	p.RetryAfter = &one
	noStore(c) // it may stand in for any answer, query data included
	s.fail(c, p, nil)
	s.record(c, 0)
}
