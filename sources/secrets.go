package sources

import "context"

// What a caller that shows a call's requests and answers (`sources check`)
// needs to mask them (SPEC 9: every secret, wherever it appears): the
// secret values the call used, which only the call knows (a token, a
// session's values), and which requests are authentication's own.

type secretsKey struct{}

type authRequestKey struct{}

// WithSecrets returns ctx carrying learn, which every call of a Source made
// under ctx calls with each secret value it puts in a request, before the
// request is sent: the OAuth2 client secret when the call fetches a token,
// the access token, and every value a session page gave. learn is called
// from the goroutine that made the call, possibly more than once with the
// same value. It is meant for masking what is shown; the values must never
// be logged.
func WithSecrets(ctx context.Context, learn func(secret string)) context.Context {
	return context.WithValue(ctx, secretsKey{}, learn)
}

// learnSecrets passes each non-empty value to ctx's learner, if any.
func learnSecrets(ctx context.Context, values ...string) {
	learn, _ := ctx.Value(secretsKey{}).(func(string))
	if learn == nil {
		return
	}
	for _, v := range values {
		if v != "" {
			learn(v)
		}
	}
}

// IsAuthRequest reports whether the request made under ctx (an
// http.Request's context, as a RoundTripper sees it) is an OAuth2 token
// request or a session page, or a redirect of one: its answer as a whole
// holds secrets (tokens, a session's values), and so does a token
// request's body.
func IsAuthRequest(ctx context.Context) bool {
	auth, _ := ctx.Value(authRequestKey{}).(bool)
	return auth
}

// withAuthRequest marks the requests made under ctx as IsAuthRequest's.
func withAuthRequest(ctx context.Context) context.Context {
	return context.WithValue(ctx, authRequestKey{}, true)
}
