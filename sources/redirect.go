package sources

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
)

// MaxRedirects is how many redirects of a portal are followed in one call
// (SPEC 9); one more fails the call.
const MaxRedirects = 3

// ErrRedirect is the cause of a call that a portal redirected elsewhere
// than its own origin, or too many times: an answer that cannot be used
// (source-error), which says nothing of the portal's capacity. It is
// wrapped in an *Error with Outcome Unreadable.
var ErrRedirect = errors.New("redirect not followed: another origin, or more than 3")

// errForeignRedirect and errTooManyRedirects say which; both are
// ErrRedirect. Their text carries no URL: a Location may hold a plate.
var (
	errForeignRedirect  = &redirectError{"redirect to another origin not followed"}
	errTooManyRedirects = &redirectError{"more than 3 redirects"}
)

type redirectError struct{ msg string }

func (e *redirectError) Error() string        { return e.msg }
func (e *redirectError) Is(target error) bool { return target == ErrRedirect }

// checkRedirect is the http.Client.CheckRedirect of a source whose base URL
// is base: a redirect is followed only to base's origin (scheme, host and
// port), at most MaxRedirects times. Stopping before the first request to
// another origin is what keeps the configured headers (credentials among
// them) on the portal's own origin: net/http copies them to every request
// of a redirect chain it follows, and judges only by host name whether to
// drop Authorization and cookies, so a redirect to another port of the same
// host, or from https to http, would carry them.
func checkRedirect(base *url.URL) func(*http.Request, []*http.Request) error {
	return func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(base, req.URL) {
			return errForeignRedirect
		}
		if len(via) > MaxRedirects {
			return errTooManyRedirects
		}
		return nil
	}
}

// sameOrigin reports whether u is on base's origin (RFC 6454): the same
// scheme, host and port, a missing port being the scheme's default (80 for
// http, 443 for https). Hosts are compared as written, without regard to
// case: "localhost" and "127.0.0.1" are different origins, as are a name
// and the same name with a trailing dot. Anything else that follows a URL a
// portal gave (a next-page link) must check it with sameOrigin too.
func sameOrigin(base, u *url.URL) bool {
	if base == nil || u == nil || u.Opaque != "" || base.Opaque != "" {
		return false
	}
	scheme := strings.ToLower(base.Scheme)
	if scheme != "http" && scheme != "https" || !strings.EqualFold(u.Scheme, scheme) {
		return false
	}
	host := base.Hostname()
	if host == "" || !strings.EqualFold(u.Hostname(), host) {
		return false
	}
	return effectivePort(scheme, base.Port()) == effectivePort(scheme, u.Port())
}

// effectivePort is port, or the scheme's default when it is empty. A port
// with leading zeros is the same number ("080" is 80).
func effectivePort(scheme, port string) string {
	if port == "" {
		if scheme == "https" {
			return "443"
		}
		return "80"
	}
	trimmed := strings.TrimLeft(port, "0")
	if trimmed == "" {
		return "0"
	}
	return trimmed
}
