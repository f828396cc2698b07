package server

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

//go:embed dashboard.html
var dashboardPage []byte

// dashboard is GET /: the operator's page. It loads without credentials
// and asks for the admin token, which it sends on its API calls.
func (s *Server) dashboard(c *gin.Context) {
	c.Header("Cache-Control", "no-cache")
	c.Data(http.StatusOK, "text/html; charset=utf-8", dashboardPage)
}
