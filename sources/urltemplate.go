package sources

import (
	"context"
	"net/http"
	"net/url"
	"strings"
)

// urlTemplate names a portal request by what is configured, never by what
// is sent (SPEC 10: no plate, person id, token or expanded URL in a
// trace): name is the method and the path template ("POST /consulta"),
// path the template alone ("/consulta"), without the query.
type urlTemplate struct {
	name, path string
}

func newURLTemplate(method, path string) *urlTemplate {
	return &urlTemplate{name: method + " " + path, path: path}
}

// templatePath is the path of the requests to base followed by path, as
// configured: base's own path joined to path's part before any '?' or
// '#' the way the request's URL is (one '/' between them), placeholders
// unexpanded.
func templatePath(base, path string) string {
	var bp string
	if u, err := url.Parse(base); err == nil {
		bp = u.EscapedPath()
	}
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	if strings.HasSuffix(bp, "/") && strings.HasPrefix(path, "/") {
		path = path[1:]
	}
	p := bp + path
	if !strings.HasPrefix(p, "/") {
		p = "/" + p
	}
	return p
}

// urlPath is the path of an absolute URL ("/" when it has none), without
// its query.
func urlPath(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.EscapedPath() == "" {
		return "/"
	}
	return u.EscapedPath()
}

type urlTemplateKey struct{}

// namesRequests reports whether rt may read URLTemplate: a transport that
// says it names none (tracing without a provider) spares every lookup a
// context value. One that does not say may.
func namesRequests(rt http.RoundTripper) bool {
	n, ok := rt.(interface{ NamesRequests() bool })
	return !ok || n.NamesRequests()
}

// withURLTemplate returns ctx naming the requests made under it by t. The
// context of a call carries its operation's; a token request or a session
// page made within the call carries its own.
func withURLTemplate(ctx context.Context, t *urlTemplate) context.Context {
	return context.WithValue(ctx, urlTemplateKey{}, t)
}

// URLTemplate reports how the portal request made under ctx is named in
// traces (SPEC 10: path templates only). name is its method and configured
// path template ("POST /consulta", "GET /api/v2/actas/{infraction_id}/boleta"),
// template the path template alone, for the url.template attribute: the
// base URL's path and the operation's, placeholders unexpanded, without
// the query. Every request a Source makes carries one: lookups and each of
// their pages (a next-page URL a portal gave is named by its operation),
// vouchers, OAuth2 token requests (the token_url's path) and session pages
// (lookups and vouchers only when their transport names requests at all:
// NamesRequests).
// ok is false for a request no Source made. It is a
// tracing.URLTemplateFunc.
func URLTemplate(ctx context.Context) (name, template string, ok bool) {
	t, ok := ctx.Value(urlTemplateKey{}).(*urlTemplate)
	if !ok {
		return "", "", false
	}
	return t.name, t.path, true
}
