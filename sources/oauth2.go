package sources

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/multas/aggregator"
)

// maxTokenMargin is the most a token is renewed before its expiry.
const maxTokenMargin = 10 * time.Second

// ErrTokenRefused is the cause of a call whose token endpoint refused the
// source's credentials (4xx): source-rejected, a configuration problem.
var ErrTokenRefused = errors.New("the token endpoint refused the client credentials")

// tokens holds one source's OAuth2 client-credentials token (SPEC 8): one
// token shared by every call, fetched by one call at a time, reused until
// shortly before it expires.
type tokens struct {
	cfg    clientcredentials.Config
	client *http.Client // the token endpoint's: see tokenClient
	named  *urlTemplate // POST and the token_url's path
	now    func() time.Time
	fetch  chan struct{} // a one-slot semaphore: the fetcher holds it

	mu      sync.Mutex
	token   string
	renewAt time.Time // zero: no expiry given
}

// newTokens prepares the token of o, whose token_url parsed as endpoint;
// client is the source's.
func newTokens(o *OAuth2, endpoint *url.URL, client *http.Client, now func() time.Time) *tokens {
	return &tokens{
		cfg: clientcredentials.Config{
			ClientID: o.ClientID, ClientSecret: o.ClientSecret, TokenURL: o.TokenURL,
			Scopes: o.Scopes, AuthStyle: authStyle(o.ClientAuth),
		},
		client: tokenClient(endpoint, client),
		named:  newURLTemplate(http.MethodPost, urlPath(o.TokenURL)),
		now:    now,
		fetch:  make(chan struct{}, 1),
	}
}

// tokenClient is the client of a token endpoint: the source's transport
// (its TLS settings, its pooled connections), no cookie jar, and redirects
// followed only within the endpoint's own origin, at most MaxRedirects
// (SPEC 9: client credentials go only to the token endpoint's origin).
// The source's client would follow them within the portal's origin
// instead: a token endpoint answering 307 to the portal would have sent it
// the credentials (net/http keeps Authorization for the same host name on
// another port, and re-sends the body on a 307 or 308), and a redirect
// within the endpoint's own origin would have been refused.
//
// golang.org/x/oauth2 sends the credentials as Basic authentication on a
// POST with a re-readable body, so whatever the client follows is sent
// them again: the CheckRedirect is what keeps them home, and the
// transport refuses any other origin as a second lock.
func tokenClient(endpoint *url.URL, source *http.Client) *http.Client {
	return &http.Client{
		Transport:     &originOnly{origin: endpoint, next: source.Transport},
		CheckRedirect: checkRedirect(endpoint),
		Timeout:       source.Timeout,
	}
}

// originOnly carries requests to one origin only; any other is refused
// unsent, as a redirect not followed.
type originOnly struct {
	origin *url.URL
	next   http.RoundTripper // nil is http.DefaultTransport
}

func (o *originOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if !sameOrigin(o.origin, req.URL) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, errForeignRedirect
	}
	next := o.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(req)
}

// current is the token held, if still good.
func (t *tokens) current() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token != "" && (t.renewAt.IsZero() || t.now().Before(t.renewAt)) {
		return t.token
	}
	return ""
}

// get returns a good token, fetching one under ctx (the call's: bounded by
// its timeout) when none is held. Calls that need one while another
// fetches wait for it. A failure is an *Error.
func (t *tokens) get(ctx context.Context) (string, error) {
	if tok := t.current(); tok != "" {
		return tok, nil
	}
	select {
	case t.fetch <- struct{}{}:
	case <-ctx.Done():
		return "", transportError(ctx, ctx.Err())
	}
	defer func() { <-t.fetch }()
	if tok := t.current(); tok != "" {
		return tok, nil // fetched while we waited
	}
	learnSecrets(ctx, t.cfg.ClientSecret)
	tok, err := t.cfg.Token(context.WithValue(withAuthRequest(withURLTemplate(ctx, t.named)), oauth2.HTTPClient, t.client))
	if err != nil {
		return "", tokenError(ctx, err)
	}
	if !headerSafe(tok.AccessToken) {
		// Never kept: the next call asks again, and no call sends it.
		learnSecrets(ctx, tok.AccessToken)
		return "", unbuildable(errors.New("the token endpoint's access token cannot go in a header"))
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.token, t.renewAt = tok.AccessToken, time.Time{}
	if !tok.Expiry.IsZero() {
		// expires_in, as the library turned it into a time of its clock,
		// counted on ours.
		lifetime := time.Until(tok.Expiry)
		t.renewAt = t.now().Add(lifetime - min(maxTokenMargin, lifetime/10))
	}
	return t.token, nil
}

// drop forgets tok (a portal refused it), unless another already replaced it.
func (t *tokens) drop(tok string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.token == tok {
		t.token = ""
	}
}

// tokenError classifies a failure to get a token. A refusal (4xx) is
// Rejected, never counted by the breaker; 429 is RateLimited; a 5xx,
// a timeout or a connection failure is as if the portal failed. The
// endpoint's own words are left out: its answer may echo credentials.
func tokenError(ctx context.Context, err error) *Error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		code := re.Response.StatusCode
		cause := fmt.Errorf("token endpoint answered %d", code)
		switch {
		case code == http.StatusTooManyRequests:
			return &Error{Outcome: aggregator.RateLimited, Status: code, Err: cause}
		case code >= 500:
			return &Error{Outcome: aggregator.Unavailable, Status: code, Err: cause}
		case code >= 400:
			return &Error{Outcome: aggregator.Rejected, Status: code, Err: fmt.Errorf("%w (HTTP %d)", ErrTokenRefused, code)}
		}
		return &Error{Outcome: aggregator.Unreadable, Status: code, Err: cause}
	}
	var ue *url.Error
	var ne net.Error
	if ctx.Err() != nil || errors.As(err, &ue) || errors.As(err, &ne) {
		e := transportError(ctx, err)
		e.Err = fmt.Errorf("token endpoint: %w", e.Err)
		return e
	}
	// A 2xx answer without a usable token.
	return &Error{Outcome: aggregator.Unreadable, Err: errors.New("token endpoint: no usable token in its answer")}
}

// authStyle is how client_auth sends the credentials.
func authStyle(clientAuth string) oauth2.AuthStyle {
	if clientAuth == "body" {
		return oauth2.AuthStyleInParams
	}
	return oauth2.AuthStyleInHeader
}
