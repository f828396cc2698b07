package server

import (
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator/problem"
)

// apiKeys enforces the per-key budgets of SPEC 4.2 when keys are
// configured: every answer announces the budget, an exhausted one is 429.
func (s *Server) apiKeys(c *gin.Context) {
	if s.opts.Keys == nil || isAdmin(c.Request.URL.Path) {
		c.Next()
		return
	}
	name, ok := s.opts.Keys.Lookup(c.GetHeader("X-API-Key"))
	if !ok {
		s.failSlug(c, problem.Unauthorized, "A valid X-API-Key header is required.")
		return
	}
	c.Set(keyNameKey, name)
	q := s.opts.Keys.Take(name)
	q.SetHeaders(c.Writer.Header())
	if !q.Allowed {
		p := s.opts.Problems.New(problem.TooManyRequests, "This API key's request budget is spent.")
		p.SetRetryAfter(q.RetryAfter)
		s.fail(c, p, nil)
		return
	}
	c.Next()
}

// keyNameKey is where apiKeys keeps the name of the request's API key.
const keyNameKey = "aggregator.api_key"

// keyName is the name of the API key that sent the request; "" without
// API keys.
func keyName(c *gin.Context) string {
	return c.GetString(keyNameKey)
}

// isAdmin reports whether path is /v1/admin or under it.
func isAdmin(path string) bool {
	rest, ok := strings.CutPrefix(path, "/v1/admin")
	return ok && (rest == "" || rest[0] == '/')
}
