package portalsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// PagingStyle is how a ShapePaged portal splits its answers into pages: the
// query parameters it reads and how it says where the next page is.
type PagingStyle string

// The paging styles (SPEC 8 pagination.style).
const (
	// PagePages reads page (from 1) and size, and answers
	// "paginacion": {"pagina", "tamanio", "total"}.
	PagePages PagingStyle = "page"
	// PageOffset reads offset (from 0) and limit, and answers
	// "paginacion": {"desde", "limite", "total"}.
	PageOffset PagingStyle = "offset"
	// PageCursor reads cursor (absent or empty: the first page) and limit,
	// and answers "paginacion": {"limite", "siguiente"}, an opaque cursor
	// left out on the last page.
	PageCursor PagingStyle = "cursor"
	// PageLink reads page (from 1) and per_page, and says where the next
	// page is in an RFC 8288 Link header (absolute URLs, rel="first" and,
	// but on the last page, rel="next") and in "paginacion": {"siguiente"},
	// a URL relative to the portal's origin, left out on the last page.
	PageLink PagingStyle = "link"
)

// PagingStyles lists every style in a stable order.
func PagingStyles() []PagingStyle { return []PagingStyle{PagePages, PageOffset, PageCursor, PageLink} }

// Paging configures a ShapePaged portal. The zero value is PagePages with
// pages of DefaultPageSize.
type Paging struct {
	Style PagingStyle `json:"style,omitempty"`
	// Size is the page size when a request names none, and the size the
	// aggregator's mapping asks for. A request may ask for 1 to MaxPageSize.
	Size int `json:"size,omitempty"`
}

// DefaultPageSize is the page size of a Paging without one: small, so that
// a handful of records spans several pages.
const DefaultPageSize = 3

// MaxPageSize is the largest page a ShapePaged portal serves.
const MaxPageSize = 100

func (g Paging) withDefaults() Paging {
	if g.Style == "" {
		g.Style = PagePages
	}
	if g.Size == 0 {
		g.Size = DefaultPageSize
	}
	return g
}

func (g Paging) validate() error {
	var errs []error
	if g.Style != "" && !slices.Contains(PagingStyles(), g.Style) {
		errs = append(errs, fmt.Errorf("paging: unknown style %q (want page, offset, cursor or link)", g.Style))
	}
	if g.Size < 0 || g.Size > MaxPageSize {
		errs = append(errs, fmt.Errorf("paging: size %d is outside 1–%d", g.Size, MaxPageSize))
	}
	return errors.Join(errs...)
}

// OAuth2 configures the authorisation server of a ShapeOAuth2 portal: the
// one client it knows, the scopes that client may be granted (all of them
// when it asks for none), which the API then requires every one of, and how
// long a token lives. Empty fields take the Demo* credentials, the scope
// DemoScope and DefaultTokenTTL.
type OAuth2 struct {
	ClientID     string   `json:"client_id,omitempty"`
	ClientSecret string   `json:"client_secret,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	// TokenTTL is a token's lifetime; expires_in says it in whole seconds,
	// at least 1 (a TTL under a second is for tests).
	TokenTTL time.Duration `json:"-"`
}

// The credentials and scope of the demo's OAuth2 client. They are public:
// the simulator has nothing to protect.
const (
	DemoClientID     = "agregador-demo"
	DemoClientSecret = "demo-secreto-publico"
	DemoScope        = "actas.read"
)

// DefaultTokenTTL is the lifetime of a token when OAuth2.TokenTTL is zero.
const DefaultTokenTTL = time.Hour

type oauth2JSON struct {
	ClientID     string   `json:"client_id,omitempty"`
	ClientSecret string   `json:"client_secret,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	TokenTTL     string   `json:"token_ttl,omitempty"`
}

// MarshalJSON writes o with TokenTTL as a Go duration string ("token_ttl").
func (o OAuth2) MarshalJSON() ([]byte, error) {
	w := oauth2JSON{ClientID: o.ClientID, ClientSecret: o.ClientSecret, Scopes: o.Scopes}
	if o.TokenTTL != 0 {
		w.TokenTTL = o.TokenTTL.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes; unknown members are errors.
func (o *OAuth2) UnmarshalJSON(b []byte) error {
	var w oauth2JSON
	if err := decodeStrict(b, &w); err != nil {
		return fmt.Errorf("oauth2: %w", err)
	}
	ttl, err := parseDuration("oauth2: token_ttl", w.TokenTTL)
	if err != nil {
		return err
	}
	*o = OAuth2{ClientID: w.ClientID, ClientSecret: w.ClientSecret, Scopes: w.Scopes, TokenTTL: ttl}
	return nil
}

func (o OAuth2) withDefaults() OAuth2 {
	if o.ClientID == "" {
		o.ClientID = DemoClientID
	}
	if o.ClientSecret == "" {
		o.ClientSecret = DemoClientSecret
	}
	if len(o.Scopes) == 0 {
		o.Scopes = []string{DemoScope}
	} else {
		o.Scopes = slices.Clone(o.Scopes)
	}
	if o.TokenTTL == 0 {
		o.TokenTTL = DefaultTokenTTL
	}
	return o
}

func (o OAuth2) validate() error {
	var errs []error
	if o.TokenTTL < 0 {
		errs = append(errs, fmt.Errorf("oauth2: token_ttl %s is negative", o.TokenTTL))
	}
	for _, s := range o.Scopes {
		if s == "" || !isScopeToken(s) {
			errs = append(errs, fmt.Errorf("oauth2: scope %q is not a scope token", s))
		}
	}
	return errors.Join(errs...)
}

// isScopeToken reports whether s is an RFC 6749 scope-token: printable
// ASCII but space, '"' and '\'.
func isScopeToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Session configures a ShapeSession portal. The zero value takes
// DefaultSessionTTL.
type Session struct {
	// TTL is how long a session lives without being used: every call that
	// uses it starts the wait again.
	TTL time.Duration `json:"-"`
}

// DefaultSessionTTL is the idle lifetime of a session when Session.TTL is
// zero.
const DefaultSessionTTL = 10 * time.Minute

type sessionJSON struct {
	TTL string `json:"ttl,omitempty"`
}

// MarshalJSON writes s with TTL as a Go duration string.
func (s Session) MarshalJSON() ([]byte, error) {
	var w sessionJSON
	if s.TTL != 0 {
		w.TTL = s.TTL.String()
	}
	return json.Marshal(w)
}

// UnmarshalJSON reads what MarshalJSON writes; unknown members are errors.
func (s *Session) UnmarshalJSON(b []byte) error {
	var w sessionJSON
	if err := decodeStrict(b, &w); err != nil {
		return fmt.Errorf("session: %w", err)
	}
	ttl, err := parseDuration("session: ttl", w.TTL)
	if err != nil {
		return err
	}
	*s = Session{TTL: ttl}
	return nil
}

func (s Session) withDefaults() Session {
	if s.TTL == 0 {
		s.TTL = DefaultSessionTTL
	}
	return s
}

func (s Session) validate() error {
	if s.TTL < 0 {
		return fmt.Errorf("session: ttl %s is negative", s.TTL)
	}
	return nil
}

func decodeStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
