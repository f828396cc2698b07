package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"math"
	"mime"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/multas/aggregator"
)

// HTTPType is the type of the configuration-driven HTTP adapter, the
// default of sources[].type.
const HTTPType = "http"

// Body is what an operation sends (SPEC 8): at most one of Form, JSON and
// Text, and ContentType with Text.
type Body struct {
	Form        map[string]string `yaml:"form,omitempty" json:"form,omitempty"`
	JSON        *JSONValue        `yaml:"json,omitempty" json:"json,omitempty"`
	Text        string            `yaml:"text,omitempty" json:"text,omitempty"`
	ContentType string            `yaml:"content_type,omitempty" json:"content_type,omitempty"`
}

// JSONValue is a YAML value to be sent as JSON: mappings become objects
// (in the order written), sequences arrays, and scalars strings, numbers,
// booleans or null as YAML types them. ${NAME} is expanded in scalars.
type JSONValue struct {
	// Raw is the value as one JSON document.
	Raw json.RawMessage
}

// MarshalJSON writes the value itself.
func (v JSONValue) MarshalJSON() ([]byte, error) {
	if v.Raw == nil {
		return []byte("null"), nil
	}
	return v.Raw, nil
}

// MarshalYAML writes the value as YAML (JSON is YAML's flow style).
func (v JSONValue) MarshalYAML() (any, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(v.Raw, &n); err != nil || len(n.Content) == 0 {
		return nil, err
	}
	return n.Content[0], nil
}

// Pagination says how a lookup follows an answer's pages (SPEC 8).
type Pagination struct {
	// Style is page, offset, cursor or link.
	Style string `yaml:"style" json:"style"`
	// Start is the first {page} (default 1) or {offset} (default 0).
	Start *int `yaml:"start" json:"start,omitempty"`
	// Size is {size}; offset advances by it, and page and offset styles
	// stop at a page with fewer items.
	Size int `yaml:"size" json:"size"`
	// Next selects the next cursor (cursor) or URL (link) in an answer.
	Next string `yaml:"next" json:"next,omitempty"`
	// MaxPages bounds the pages of one lookup (default 20).
	MaxPages int `yaml:"max_pages" json:"max_pages"`
}

// DefaultMaxPages is pagination.max_pages when not set.
const DefaultMaxPages = 20

// Auth authenticates a source's calls: at most one of its kinds.
type Auth struct {
	OAuth2  *OAuth2  `yaml:"oauth2,omitempty" json:"oauth2,omitempty"`
	Session *Session `yaml:"session,omitempty" json:"session,omitempty"`
}

// OAuth2 is the client-credentials grant (RFC 6749 section 4.4).
type OAuth2 struct {
	TokenURL     string `yaml:"token_url" json:"token_url"`
	ClientID     string `yaml:"client_id" json:"-"`
	ClientSecret string `yaml:"client_secret" json:"-"`
	// ClientAuth is how the client authenticates to the token endpoint
	// (RFC 6749 section 2.3.1): basic (HTTP Basic, the default) or body
	// (client_id and client_secret in the form).
	ClientAuth string   `yaml:"client_auth" json:"client_auth,omitempty"`
	Scopes     []string `yaml:"scopes" json:"scopes,omitempty"`
}

// Session is a page visited first, whose cookies and extracted values the
// calls carry for TTL.
type Session struct {
	Method string   `yaml:"method" json:"method"`
	Path   string   `yaml:"path" json:"path"`
	TTL    Duration `yaml:"ttl" json:"ttl"`
	// Format of the session page: json, xml or html (default html).
	Format string `yaml:"format" json:"format"`
	// Extract maps names ({session.NAME}) to selectors in the page.
	Extract map[string]string `yaml:"extract" json:"extract,omitempty"`
}

// DefaultSessionTTL is auth.session.ttl when not set.
const DefaultSessionTTL = Duration(10 * 60 * 1e9)

// TLS configures the connection to a portal: a private CA, a client
// certificate (mutual TLS), the name the certificate must carry.
type TLS struct {
	CAFile     string `yaml:"ca_file,omitempty" json:"ca_file,omitempty"`
	CertFile   string `yaml:"cert_file,omitempty" json:"cert_file,omitempty"`
	KeyFile    string `yaml:"key_file,omitempty" json:"key_file,omitempty"`
	ServerName string `yaml:"server_name,omitempty" json:"server_name,omitempty"`
}

// IsZero reports whether t configures nothing.
func (t TLS) IsZero() bool { return t == TLS{} }

// fillAdapter applies the adapter defaults of source s.
func (s *Source) fillAdapter() {
	if s.Type == "" {
		s.Type = HTTPType
	}
	if p := s.Pagination; p != nil {
		if p.MaxPages == 0 {
			p.MaxPages = DefaultMaxPages
		}
		if p.Start == nil {
			start := 0
			if p.Style == "page" {
				start = 1
			}
			p.Start = &start
		}
	}
	if ss := s.Auth.Session; ss != nil {
		if ss.Method == "" {
			ss.Method = "GET"
		}
		ss.Method = strings.ToUpper(ss.Method)
		if ss.TTL == 0 {
			ss.TTL = DefaultSessionTTL
		}
		if ss.Format == "" {
			ss.Format = "html"
		}
	}
}

// jsonValue decodes the YAML value n into v as one JSON document.
func (d *decoder) jsonValue(n *yaml.Node, v *JSONValue, path string) {
	var b bytes.Buffer
	if d.writeJSON(&b, n, path, 0) {
		v.Raw = json.RawMessage(b.Bytes())
	}
}

// writeJSON writes n as JSON to b; false when it reported a problem.
func (d *decoder) writeJSON(b *bytes.Buffer, n *yaml.Node, path string, depth int) bool {
	if !d.step() {
		return false
	}
	line := n.Line
	if n = resolve(n); n == nil {
		d.fail(line, path, "alias cannot be resolved")
		return false
	}
	if depth > 64 {
		d.fail(n.Line, path, "nested too deeply")
		return false
	}
	switch n.Kind {
	case yaml.MappingNode:
		pairs, ok := d.mapping(n, path)
		if !ok {
			return false
		}
		b.WriteByte('{')
		for i, p := range pairs {
			if i > 0 {
				b.WriteByte(',')
			}
			k, _ := json.Marshal(p.key)
			b.Write(k)
			b.WriteByte(':')
			if !d.writeJSON(b, p.value, child(path, p.key), depth+1) {
				return false
			}
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			if !d.writeJSON(b, e, index(path, i), depth+1) {
				return false
			}
		}
		b.WriteByte(']')
	case yaml.ScalarNode:
		s, _, ok := d.scalar(n, path, "a value")
		if !ok {
			return false
		}
		switch n.ShortTag() {
		case "!!null":
			b.WriteString("null")
		case "!!bool":
			b.WriteString(strconv.FormatBool(strings.EqualFold(s, "true")))
		case "!!int", "!!float":
			f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
			if i, ierr := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 0, 64); ierr == nil {
				b.WriteString(strconv.FormatInt(i, 10))
			} else if err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
				b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
			} else {
				d.fail(n.Line, path, "a number JSON cannot carry")
				return false
			}
		default:
			q, _ := json.Marshal(s)
			b.Write(q)
		}
	default:
		d.fail(n.Line, path, "want a YAML value, got "+kindName(n))
		return false
	}
	return true
}

// validateAdapter checks what SPEC 8 adds to a source: its type, the
// requests of its operations, pagination, authentication and TLS.
func validateAdapter(errs *Errors, p string, s Source, readFiles bool) {
	if !validID(s.Type) {
		errs.add(child(p, "type"), "%q must be lower-case letters, digits, _ and -", s.Type)
	}
	validatePagination(errs, child(p, "pagination"), s.Pagination)
	validateAuth(errs, child(p, "auth"), s.Auth)
	validateTLS(errs, child(p, "tls"), s.TLS, s.BaseURL, readFiles)
	sc := placeholderScope{paging: pagingPlaceholders(s.Pagination)}
	if s.Auth.Session != nil {
		for _, name := range sortedKeys(s.Auth.Session.Extract) {
			sc.session = append(sc.session, "session."+name)
		}
	}
	for _, name := range sortedKeys(s.Operations) {
		if name.Valid() {
			validateRequest(errs, child(child(p, "operations"), string(name)), name, s.Operations[name], sc)
		}
	}
}

// placeholderScope is what a source's requests may use beyond their
// operation's own placeholders.
type placeholderScope struct {
	paging  []string
	session []string
}

// pagingPlaceholders are the placeholders a pagination style gives.
func pagingPlaceholders(p *Pagination) []string {
	if p == nil {
		return nil
	}
	switch p.Style {
	case "page":
		return []string{"page", "size"}
	case "offset":
		return []string{"offset", "size"}
	case "cursor":
		return []string{"cursor", "size"}
	case "link":
		return []string{"size"}
	}
	return nil
}

// validateRequest checks an operation's path, query, headers and body,
// and that its own placeholder is somewhere in them.
func validateRequest(errs *Errors, p string, op aggregator.Operation, o Operation, sc placeholderScope) {
	required, available := placeholders(op)
	if op != aggregator.Voucher {
		available = append(available, sc.paging...)
	}
	available = append(available, sc.session...)
	found := false
	check := func(key, text string) {
		f, msgs := scanPlaceholders(op, text, required, available)
		found = found || f
		for _, msg := range msgs {
			errs.add(key, "%s", msg)
		}
	}
	for _, msg := range checkPathShape(o.Path) {
		errs.add(child(p, "path"), "%s", msg)
	}
	check(child(p, "path"), o.Path)
	for _, k := range sortedKeys(o.Query) {
		check(child(child(p, "query"), k), o.Query[k])
	}
	validateHeaders(errs, child(p, "headers"), o.Headers)
	for _, k := range sortedKeys(o.Headers) {
		check(child(child(p, "headers"), k), o.Headers[k])
	}
	bp := child(p, "body")
	b := o.Body
	kinds := 0
	for _, set := range []bool{len(b.Form) > 0, b.JSON != nil, b.Text != ""} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		errs.add(bp, "at most one of form, json and text")
	case b.Text != "" && b.ContentType == "":
		errs.add(child(bp, "content_type"), "required with text")
	case b.Text == "" && b.ContentType != "":
		errs.add(child(bp, "content_type"), "goes with text only (form and json set their own)")
	case kinds == 1 && o.Method != "POST":
		errs.add(bp, "a %s request has no body: set method: POST", o.Method)
	}
	if b.ContentType != "" {
		if _, _, err := mime.ParseMediaType(b.ContentType); err != nil {
			errs.add(child(bp, "content_type"), "%q is not a media type", b.ContentType)
		}
	}
	for _, k := range sortedKeys(b.Form) {
		check(child(child(bp, "form"), k), b.Form[k])
	}
	if b.JSON != nil {
		for _, s := range jsonStrings(b.JSON.Raw) {
			check(child(bp, "json"), s)
		}
	}
	if b.Text != "" {
		check(child(bp, "text"), b.Text)
	}
	if !found && o.Path != "" {
		errs.add(child(p, "path"), "must contain {%s} (here, or in query, headers or body)", required)
	}
}

// jsonStrings lists every string (keys excluded) in a JSON document.
func jsonStrings(raw json.RawMessage) []string {
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case string:
			out = append(out, v)
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for _, k := range sortedKeys(v) {
				walk(v[k])
			}
		}
	}
	var v any
	if json.Unmarshal(raw, &v) == nil {
		walk(v)
	}
	return out
}

// scanPlaceholders checks the placeholders of text: found reports whether
// it holds the required one; msgs says what is wrong.
func scanPlaceholders(op aggregator.Operation, text, required string, available []string) (found bool, msgs []string) {
	for rest := text; ; {
		open := strings.IndexByte(rest, '{')
		if stray := strings.IndexByte(rest, '}'); stray >= 0 && (open < 0 || stray < open) {
			return found, append(msgs, `has a "}" without "{"`)
		}
		if open < 0 {
			return found, msgs
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return found, append(msgs, `has a "{" without "}"`)
		}
		name := rest[open+1 : open+end]
		switch {
		case slices.Contains(available, name):
			found = found || name == required
		case slices.Contains([]string{"domain", "id", "id_kind", "infraction_id"}, name):
			msgs = append(msgs, fmt.Sprintf("{%s} is not available to %s (it has %s)", name, op, braced(available)))
		case slices.Contains([]string{"page", "offset", "size", "cursor"}, name):
			msgs = append(msgs, fmt.Sprintf("{%s} needs a pagination style that gives it (%s has %s)", name, op, braced(available)))
		case strings.HasPrefix(name, "session."):
			msgs = append(msgs, fmt.Sprintf("{%s} needs auth.session.extract.%s", name, strings.TrimPrefix(name, "session.")))
		default:
			msgs = append(msgs, fmt.Sprintf("unknown placeholder {%s} (%s has %s)", name, op, braced(available)))
		}
		rest = rest[open+end+1:]
	}
}

// validatePagination checks a pagination block.
func validatePagination(errs *Errors, p string, pg *Pagination) {
	if pg == nil {
		return
	}
	switch pg.Style {
	case "page", "offset", "cursor", "link":
	case "":
		errs.add(child(p, "style"), "required: page, offset, cursor or link")
	default:
		errs.add(child(p, "style"), "want page, offset, cursor or link, got %q", pg.Style)
	}
	switch {
	case pg.Size < 0:
		errs.add(child(p, "size"), "must not be negative")
	case pg.Size == 0 && (pg.Style == "page" || pg.Style == "offset"):
		errs.add(child(p, "size"), "required with style %s (a page with fewer items is the last)", pg.Style)
	}
	if pg.Start != nil && *pg.Start < 0 {
		errs.add(child(p, "start"), "must not be negative")
	}
	if pg.Style == "cursor" && pg.Next == "" {
		errs.add(child(p, "next"), "required with style cursor: the selector of the next cursor")
	}
	if pg.Next != "" && (pg.Style == "page" || pg.Style == "offset") {
		errs.add(child(p, "next"), "goes with style cursor or link only")
	}
	if pg.MaxPages < 1 {
		errs.add(child(p, "max_pages"), "must be at least 1")
	}
}

// validateAuth checks an auth block.
func validateAuth(errs *Errors, p string, a Auth) {
	if a.OAuth2 != nil && a.Session != nil {
		errs.add(p, "at most one of oauth2 and session")
	}
	if o := a.OAuth2; o != nil {
		op := child(p, "oauth2")
		// As base_url, but for a query: RFC 6749 section 3.2 lets the
		// endpoint have one (and forbids a fragment).
		if u, ok := absoluteHTTP(o.TokenURL); o.TokenURL == "" {
			errs.add(child(op, "token_url"), "required")
		} else if !ok {
			errs.add(child(op, "token_url"), "want an absolute http:// or https:// URL")
		} else if u.Fragment != "" {
			errs.add(child(op, "token_url"), "must not have a fragment")
		}
		if o.ClientID == "" {
			errs.add(child(op, "client_id"), "required")
		}
		if o.ClientSecret == "" {
			errs.add(child(op, "client_secret"), "required (value not shown)")
		}
		if o.ClientAuth != "" && o.ClientAuth != "basic" && o.ClientAuth != "body" {
			errs.add(child(op, "client_auth"), "want basic (HTTP Basic) or body (client_id and client_secret in the form), got %q", o.ClientAuth)
		}
		for i, sc := range o.Scopes {
			if sc == "" || strings.ContainsAny(sc, " \t\r\n\"\\") {
				errs.add(index(child(op, "scopes"), i), "not a valid OAuth2 scope")
			}
		}
	}
	if s := a.Session; s != nil {
		sp := child(p, "session")
		if s.Method != "GET" && s.Method != "POST" {
			errs.add(child(sp, "method"), "want GET or POST, got %q", s.Method)
		}
		if msgs := checkPathShape(s.Path); len(msgs) > 0 {
			for _, msg := range msgs {
				errs.add(child(sp, "path"), "%s", msg)
			}
		} else if strings.ContainsAny(s.Path, "{}") {
			errs.add(child(sp, "path"), "takes no placeholders")
		}
		if s.TTL <= 0 {
			errs.add(child(sp, "ttl"), "must be positive")
		}
		switch s.Format {
		case "json", "xml", "html":
		default:
			errs.add(child(sp, "format"), "want json, xml or html, got %q", s.Format)
		}
		if len(s.Extract) == 0 {
			errs.add(child(sp, "extract"), "name at least one value to extract (name: selector)")
		}
		for _, name := range sortedKeys(s.Extract) {
			if !validID(name) || strings.Contains(name, "-") {
				errs.add(child(child(sp, "extract"), name), "a name of lower-case letters, digits and _")
			}
			if s.Extract[name] == "" {
				errs.add(child(child(sp, "extract"), name), "empty selector")
			}
		}
	}
}

// validateTLS checks the tls block and, with readFiles, that its files
// exist and hold what they should.
func validateTLS(errs *Errors, p string, t TLS, baseURL string, readFiles bool) {
	if t.IsZero() {
		return
	}
	if u, err := url.Parse(baseURL); err == nil && u.Scheme == "http" {
		errs.add(p, "needs an https:// base_url")
	}
	if t.CAFile != "" && readFiles {
		if pem, err := os.ReadFile(t.CAFile); err != nil {
			errs.add(child(p, "ca_file"), "cannot be read: %v", fileError(err))
		} else if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			errs.add(child(p, "ca_file"), "holds no PEM certificate")
		}
	}
	switch {
	case (t.CertFile == "") != (t.KeyFile == ""):
		errs.add(p, "cert_file and key_file go together")
	case t.CertFile != "" && readFiles:
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			errs.add(child(p, "cert_file"), "cannot load the certificate and key: %v", fileError(err))
		}
	}
}

// fileError describes a file error without the file's contents.
func fileError(err error) string {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Op + ": " + pe.Err.Error()
	}
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}
