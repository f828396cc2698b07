package server

import (
	"context"
	"errors"
	"html/template"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator/api"
	"github.com/multas/aggregator/problem"
)

var problemPage = template.Must(template.New("problem").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} ({{.Slug}})</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:42rem;margin:2rem auto;padding:0 1rem;color:#222}
code{background:#f3f3f3;padding:.1rem .3rem;border-radius:3px}</style></head>
<body><h1>{{.Title}}</h1>
<p>Problem type <code>{{.Type}}</code>, usually with HTTP status <code>{{.Status}}</code>.</p>
<p>{{.About}}</p>
<p>Integrators should branch on the <code>type</code> URI of a problem, never on its prose.</p>
</body></html>
`))

// problemPage is GET /problems/{slug}: the human-readable page of a type.
func (s *Server) problemPage(c *gin.Context) {
	k, ok := problem.Lookup(problem.Slug(c.Param("slug")))
	if !ok {
		s.failSlug(c, problem.NotFound, "No such problem type.")
		return
	}
	c.Header("Content-Type", "text/html; charset=utf-8")
	c.Status(http.StatusOK)
	_ = problemPage.Execute(c.Writer, struct {
		problem.Kind
		Type string
	}{k, s.opts.Problems.Base + string(k.Slug)})
}

func (s *Server) healthz(c *gin.Context) {
	writeJSON(c, http.StatusOK, map[string]string{"status": "ok"})
}

// degraded marks a check that failed without making the replica unready:
// it serves on, with less (the shared store is away, local state is used).
type degraded struct{ err error }

func (d *degraded) Error() string { return d.err.Error() }

// Degraded wraps err so that /readyz reports "degraded" with 200.
func Degraded(err error) error { return &degraded{err: err} }

// checkResult is one readiness check in /readyz (Status only) and in
// /v1/admin/readyz (with Detail, the error text).
type checkResult struct {
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// readiness runs every readiness check (the shared store, when used): each
// is ok, degraded (the replica serves on with less) or unavailable (it
// cannot serve). The HTTP status is 503 when any is unavailable.
func (s *Server) readiness(ctx context.Context) (status string, code int, checks map[string]checkResult) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	status, code = "ok", http.StatusOK
	checks = map[string]checkResult{}
	for name, check := range s.opts.Ready {
		err := check(ctx)
		var d *degraded
		switch {
		case errors.As(err, &d):
			checks[name] = checkResult{Status: "degraded", Detail: d.err.Error()}
			if code == http.StatusOK {
				status = "degraded"
			}
		case err != nil:
			checks[name] = checkResult{Status: "unavailable", Detail: err.Error()}
			status, code = "unavailable", http.StatusServiceUnavailable
		default:
			checks[name] = checkResult{Status: "ok"}
		}
	}
	return status, code, checks
}

// readyz is GET /readyz. Unauthenticated callers learn each check's state
// only: no address, no error text (SPEC 9); /v1/admin/readyz has those.
func (s *Server) readyz(c *gin.Context) {
	status, code, checks := s.readiness(c.Request.Context())
	for name, r := range checks {
		checks[name] = checkResult{Status: r.Status}
	}
	writeJSON(c, code, map[string]any{"status": status, "checks": checks})
}

// adminReadyz is GET /v1/admin/readyz: the readiness checks with the
// error text of each that is not ok, for operators. It answers 200 (the
// request itself succeeded); status says whether the replica is ready.
func (s *Server) adminReadyz(c *gin.Context) {
	status, _, checks := s.readiness(c.Request.Context())
	writeJSON(c, http.StatusOK, map[string]any{"status": status, "checks": checks})
}

func (s *Server) openapi(c *gin.Context) {
	c.Data(http.StatusOK, "application/yaml", api.Spec)
}

func (s *Server) metrics(c *gin.Context) {
	if s.opts.Metrics == nil {
		s.notFound(c)
		return
	}
	s.opts.Metrics.Handler().ServeHTTP(c.Writer, c.Request)
}
