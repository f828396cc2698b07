package server

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/problem"
)

// forgetMemory is DELETE /v1/admin/memory (SPEC 14): ?domain= or ?id=
// forgets a subject in every source (a person under each of their ids),
// and its watches with their last known infractions (SPEC 15); ?source=
// everything one source remembered. A lookup in flight does not
// write a forgotten subject back (memory.Ticket). 204 once it is done;
// when the store cannot be reached the erasure is not reported done.
func (s *Server) forgetMemory(c *gin.Context) {
	ctx := c.Request.Context()
	values := c.Request.URL.Query()
	_, hasDomain := values["domain"]
	_, hasID := values["id"]
	sources, hasSource := values["source"]
	var err error
	switch {
	case hasSource && (hasDomain || hasID):
		s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "source",
			Reason: "forgets everything one source remembered: give it alone, or domain or id without it"}), nil)
		return
	case hasSource:
		if len(sources) != 1 || sources[0] == "" {
			s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "source", Reason: "must name one source"}), nil)
			return
		}
		if _, ok := s.opts.Engine.Member(sources[0]); !ok {
			s.failSlug(c, problem.NotFound, "No such source.")
			return
		}
		err = s.opts.Memory.ForgetSource(ctx, sources[0])
	default:
		q, bad := aggregator.NewQuery(values.Get("domain"), values.Get("id"), hasDomain, hasID)
		if len(bad) > 0 {
			s.fail(c, s.opts.Problems.Invalid(bad...), nil)
			return
		}
		err = s.opts.Memory.Forget(ctx, q)
		if err == nil && s.opts.Watches != nil {
			err = s.opts.Watches.Forget(ctx, q)
		}
	}
	if err != nil {
		s.opts.Logger.ErrorContext(ctx, "forgetting remembered answers", "err", err.Error())
		s.failSlug(c, problem.Internal, "The remembered answers could not be erased now (the store did not answer); try again.")
		return
	}
	c.Status(http.StatusNoContent)
	c.Writer.WriteHeaderNow()
}
