package server

import (
	"bytes"
	"net/http"
	"net/http/pprof"
	runtimepprof "runtime/pprof"
	"slices"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/multas/aggregator/problem"
)

// pprofPrefix is where the runtime profiles are served, to operators only
// (routes.go: behind adminAuth, like /v1/admin). The index is a JSON list
// at the prefix itself, not net/http/pprof's HTML page at prefix + "/".
const pprofPrefix = "/debug/pprof"

// isPprof reports whether path is /debug/pprof or under it.
func isPprof(path string) bool {
	rest, ok := strings.CutPrefix(path, pprofPrefix)
	return ok && (rest == "" || rest[0] == '/')
}

// pprofKind is a profile of GET /debug/pprof/{profile}, as net/http/pprof
// serves it; runtime marks those runtime/pprof keeps (they have a count).
type pprofKind struct {
	name, description string
	runtime           bool
}

var pprofProfiles = []pprofKind{
	{"allocs", "A sampling of all past memory allocations.", true},
	{"block", "Stack traces that led to blocking on synchronization primitives.", true},
	{"cmdline", "The command line of the process.", false},
	{"goroutine", "Stack traces of all current goroutines (debug=2: as a panic prints them).", true},
	{"heap", "A sampling of the memory allocations of live objects (gc=1: after a garbage collection).", true},
	{"mutex", "Stack traces of the holders of contended mutexes.", true},
	{"profile", "A CPU profile of seconds (default 30), for go tool pprof.", false},
	{"symbol", "Maps program counters to function names.", false},
	{"threadcreate", "Stack traces that led to the creation of new OS threads.", true},
	{"trace", "An execution trace of seconds (default 1), for go tool trace.", false},
}

// pprofEntry is one profile in GET /debug/pprof.
type pprofEntry struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Href        string `json:"href"`
	Count       *int   `json:"count,omitempty"`
}

// pprofIndex serves GET /debug/pprof: the profiles, with their links.
func (s *Server) pprofIndex(c *gin.Context) {
	out := make([]pprofEntry, 0, len(pprofProfiles))
	for _, p := range pprofProfiles {
		e := pprofEntry{Name: p.name, Description: p.description, Href: pprofPrefix + "/" + p.name}
		if rp := runtimepprof.Lookup(p.name); p.runtime && rp != nil {
			n := rp.Count()
			e.Count = &n
		}
		out = append(out, e)
	}
	noStore(c)
	writeJSON(c, http.StatusOK, map[string]any{"profiles": out})
}

// pprofProfile serves GET /debug/pprof/{profile} with net/http/pprof: the
// CPU profile, an execution trace, the command line, symbols, or a runtime
// profile by name.
func (s *Server) pprofProfile(c *gin.Context) {
	name := c.Param("profile")
	var h http.Handler
	switch name {
	case "cmdline":
		h = http.HandlerFunc(pprof.Cmdline)
	case "profile":
		h = http.HandlerFunc(pprof.Profile)
	case "symbol":
		h = http.HandlerFunc(pprof.Symbol)
	case "trace":
		h = http.HandlerFunc(pprof.Trace)
	default:
		if !slices.ContainsFunc(pprofProfiles, func(p pprofKind) bool { return p.runtime && p.name == name }) {
			s.failSlug(c, problem.NotFound, "No such profile: "+pprofPrefix+" lists them.")
			return
		}
		h = pprof.Handler(name)
	}
	// net/http/pprof takes a CPU profile of 30 s for seconds it cannot
	// read: a typo would hold the request and the profiler that long.
	if v, ok := c.GetQuery("seconds"); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > pprofMaxSeconds {
			s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "seconds",
				Reason: "must be a whole number of seconds from 1 to " + strconv.Itoa(pprofMaxSeconds)}), nil)
			return
		}
	}
	noStore(c)
	s.servePprof(c, h)
}

// pprofMaxSeconds bounds the seconds of a profile.
const pprofMaxSeconds = 600

// servePprof runs a net/http/pprof handler. Its errors (a CPU profile
// already running, say) are plain text; they become problems, as every
// error of the API is.
func (s *Server) servePprof(c *gin.Context, h http.Handler) {
	w := &pprofWriter{ResponseWriter: c.Writer}
	h.ServeHTTP(w, c.Request)
	if w.status == 0 {
		return
	}
	hd := c.Writer.Header()
	for _, k := range []string{"Content-Type", "Content-Disposition", "X-Go-Pprof", "X-Content-Type-Options"} {
		hd.Del(k)
	}
	detail := strings.TrimSpace(w.detail.String())
	switch w.status {
	case http.StatusBadRequest: // seconds is the one parameter pprof reads and refuses
		s.fail(c, s.opts.Problems.Invalid(problem.InvalidParam{Name: "seconds", Reason: detail}), nil)
	case http.StatusNotFound:
		s.failSlug(c, problem.NotFound, detail)
	default:
		s.failSlug(c, problem.Internal, detail)
	}
}

// pprofWriter holds back an error answer of net/http/pprof (a status of
// 400 or more and its text) for servePprof; anything else goes through.
type pprofWriter struct {
	gin.ResponseWriter
	status int
	detail bytes.Buffer
}

func (w *pprofWriter) WriteHeader(code int) {
	if code >= http.StatusBadRequest {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *pprofWriter) Write(b []byte) (int, error) {
	if w.status != 0 {
		return w.detail.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

func (w *pprofWriter) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// Unwrap lets pprof move the write deadline of a profile that lasts past
// the server's WriteTimeout (http.ResponseController).
func (w *pprofWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
