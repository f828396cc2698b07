package server

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
)

// dashboardPage is the operator's page: one self-contained file, its style
// and script inline, so that the binary serves it offline.
//
//go:embed dashboard.html
var dashboardPage []byte

// dashboardCSP allows the page's own inline style and script, by hash,
// and nothing else but calls to this origin: no injected markup can run.
var dashboardCSP = mustDashboardCSP(dashboardPage)

// dashboard is GET /: the operator's page. It loads without credentials
// and asks for the admin token, which it sends on its API calls.
func (s *Server) dashboard(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", dashboardCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	c.Data(http.StatusOK, "text/html; charset=utf-8", dashboardPage)
}

// mustDashboardCSP builds the Content-Security-Policy of page from the
// SHA-256 of each inline <style> and <script> element. It panics on a page
// without them, which the package's tests catch.
func mustDashboardCSP(page []byte) string {
	styles, err := inlineHashes(page, "style")
	if err != nil {
		panic(err)
	}
	scripts, err := inlineHashes(page, "script")
	if err != nil {
		panic(err)
	}
	return strings.Join([]string{
		"default-src 'none'",
		"script-src " + scripts,
		"style-src " + styles,
		"connect-src 'self'",
		"img-src 'self' data:",
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}

// inlineHashes returns the CSP hash sources of every <tag>…</tag> element
// of page (written without attributes), separated by spaces.
func inlineHashes(page []byte, tag string) (string, error) {
	open, end := []byte("<"+tag+">"), []byte("</"+tag+">")
	var out []string
	for rest := page; ; {
		i := bytes.Index(rest, open)
		if i < 0 {
			break
		}
		rest = rest[i+len(open):]
		j := bytes.Index(rest, end)
		if j < 0 {
			return "", fmt.Errorf("dashboard: <%s> without </%s>", tag, tag)
		}
		sum := sha256.Sum256(rest[:j])
		out = append(out, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
		rest = rest[j+len(end):]
	}
	if len(out) == 0 {
		return "", fmt.Errorf("dashboard: no inline <%s>", tag)
	}
	return strings.Join(out, " "), nil
}
