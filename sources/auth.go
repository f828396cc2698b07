package sources

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"time"
)

// Auth authenticates a source's calls (SPEC 8): at most one of OAuth2 and
// Session.
type Auth struct {
	OAuth2  *OAuth2
	Session *Session
}

// OAuth2 is the client-credentials grant.
type OAuth2 struct {
	TokenURL, ClientID, ClientSecret string
	// ClientAuth is "basic" (HTTP Basic; "" too) or "body" (the
	// credentials in the token request's form, RFC 6749 section 2.3.1).
	ClientAuth string
	Scopes     []string
}

// Session is a page visited before the calls, whose cookies and extracted
// values they carry.
type Session struct {
	// Method (GET or POST) and Path of the session page.
	Method, Path string
	// TTL is how long a session is kept.
	TTL time.Duration
	// Format of the session page: json, xml or html.
	Format string
	// Extract names values read from the page by selector
	// ({session.NAME} in the operations' query, headers and body).
	Extract map[string]string
}

// sessionNames lists the values a session extracts, sorted.
func (a Auth) sessionNames() []string {
	if a.Session == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(a.Session.Extract))
}

// clone copies a and what it points to.
func (a Auth) clone() Auth {
	if a.OAuth2 != nil {
		o := *a.OAuth2
		o.Scopes = slices.Clone(o.Scopes)
		a.OAuth2 = &o
	}
	if a.Session != nil {
		s := *a.Session
		s.Extract = maps.Clone(s.Extract)
		a.Session = &s
	}
	return a
}

// compileAuth checks the source's auth and prepares its state.
func (s *Source) compileAuth() error {
	a := s.spec.Auth
	if a.OAuth2 != nil && a.Session != nil {
		return errors.New("auth: at most one of oauth2 and session")
	}
	if o := a.OAuth2; o != nil {
		u, err := parseTokenURL(o.TokenURL)
		if err != nil {
			return fmt.Errorf("auth.oauth2.token_url: %w", err)
		}
		if o.ClientAuth != "" && o.ClientAuth != "basic" && o.ClientAuth != "body" {
			return errors.New("auth.oauth2.client_auth: want basic or body")
		}
		if o.ClientID == "" {
			return errors.New("auth.oauth2.client_id: required")
		}
		s.tokens = newTokens(o, u, s.client, s.now)
	}
	if a.Session != nil {
		return s.compileSession()
	}
	return nil
}

// parseTokenURL checks a token_url as base_url is checked: an absolute
// http or https URL (the scheme in any case: url.Parse lowers it, and the
// token endpoint's origin is compared in lower case), with a host; and, as
// RFC 6749 section 3.2 says of the endpoint, without a fragment (a query
// is kept).
func parseTokenURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, errors.New("must be an absolute http or https URL")
	case u.Fragment != "":
		return nil, errors.New("must not have a fragment")
	}
	return u, nil
}
