package server

import (
	"net/http"

	"github.com/gin-gonic/gin"
)

// Drain marks the replica as shutting down (SPEC 10, Safe defaults):
// /readyz answers 503 from now on, so that load balancers stop sending it
// new requests, while every other route is served as before until the
// HTTP server itself stops.
func (s *Server) Drain() { s.draining.Store(true) }

// unlessDraining answers /readyz at once while draining: unavailable,
// with the `shutdown` check saying why, and no other check run.
func (s *Server) unlessDraining(c *gin.Context) {
	if !s.draining.Load() {
		c.Next()
		return
	}
	writeJSON(c, http.StatusServiceUnavailable, map[string]any{
		"status": "unavailable",
		"checks": map[string]any{"shutdown": map[string]string{"status": "unavailable"}},
	})
	c.Abort()
}
