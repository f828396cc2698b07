// Package sources is the generic, configuration-driven adapter to the
// jurisdictions' HTTP/JSON portals. A Spec says where a portal lives, how
// each operation's URL is built, and where the parts of an infraction are
// in its answers (RFC 6901 pointers); a Source built from it makes the
// calls, classifies every failure by outcome (SPEC 4, 5), reads the
// portal's back-off signals (Retry-After, RateLimit), and normalises
// amounts, dates and statuses (SPEC 3.1).
//
// A Source knows nothing of breakers, rate limiters or retries: each
// method call is one call as the breaker sees it, and reports what
// happened. That call may be several requests (SPEC 8): the pages of a
// paginated lookup (each after the first admitted by the page gate the
// caller put in the context, see WithPageGate), an OAuth2 token or a
// session page fetched first, and one repetition after the portal refused
// a token or a session.
package sources

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/sources/document"
	"github.com/multas/aggregator/sources/mapping"
)

// DefaultMaxResponseBytes is the answer size limit used when
// Spec.MaxResponseBytes is zero (SPEC 6 `max_response_bytes`).
const DefaultMaxResponseBytes = 2 << 20

// maxPooledBuffer is the largest body buffer kept for reuse.
const maxPooledBuffer = 256 << 10

// drainLimit bounds how much of an unused body is read so that its
// connection can be reused; longer bodies are closed unread.
const drainLimit = 64 << 10

// OperationSpec says how one operation is called (SPEC 8, Requests).
type OperationSpec struct {
	// Method is the HTTP method; empty means GET.
	Method string
	// Path is appended to the base URL. Its placeholders are replaced by
	// the values, path-escaped before the '?' and query-escaped after it.
	Path string
	// Query holds parameters appended to the URL.
	Query map[string]string
	// Headers are sent with this operation's requests, over the source's.
	Headers map[string]string
	// Body is what a POST sends.
	Body Body
	// Accepts lists the kinds of person id a by_id operation takes; empty
	// means both.
	Accepts []aggregator.IDKind
}

// Spec describes one source portal (SPEC 6, `sources[]`).
type Spec struct {
	ID, Jurisdiction, BaseURL string
	// Headers are sent with every request (a "Host" entry sets the
	// request's host).
	Headers    map[string]string
	Operations map[aggregator.Operation]OperationSpec
	// Response says how lookup answers are read: their format, where the
	// items and their fields are, what their values look like, what an
	// error page looks like (SPEC 8, 12); see package mapping.
	Response mapping.Response
	// Location is the zone of the portal's zone-less times; nil is UTC.
	Location *time.Location
	// Currency applies when an item has no currency of its own.
	Currency string
	// MaxResponseBytes bounds a lookup answer; 0 is
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Pagination, when its Style is set, makes a lookup follow pages.
	Pagination Pagination
	// Auth authenticates the calls: at most one of its kinds.
	Auth Auth
	// VoucherTypes are the media types a voucher may have (parameters
	// ignored, case-insensitive); empty is DefaultVoucherTypes.
	VoucherTypes []string
	// VoucherMaxBytes bounds a voucher; 0 is DefaultVoucherMaxBytes.
	VoucherMaxBytes int64
	// TLS, when set, gives the source a transport of its own: a private
	// CA, a client certificate, a server name.
	TLS TLS
}

// Source calls one portal. It is safe for concurrent use.
type Source struct {
	spec     Spec
	client   *http.Client // the caller's, with this source's redirect policy
	now      func() time.Time
	ops      [3]*operation // by opIndex
	lookupH  http.Header   // headers of lookups, Accept included
	voucherH http.Header
	host     string
	maxBytes int64
	vouchers voucherPolicy
	mapping  *mapping.Mapping
	buffers  sync.Pool          // of *[]byte, for lookup answers
	base     *url.URL           // the base URL, whose origin is the source's
	next     *document.Selector // pagination.next, compiled; nil when not set
	tokens   *tokens            // OAuth2; nil without
	sessions *sessions          // a session page; nil without
	named    bool               // the transport names requests (URLTemplate)
}

// operation is a compiled OperationSpec.
type operation struct {
	request
	cuit, dni bool // the kinds of id accepted (by_id)
}

// Answer is a successful lookup.
type Answer struct {
	// Infractions found, in the portal's order; none is filtered out.
	Infractions []aggregator.Infraction
	// Pause > 0 when the answer, although successful, asked us to back off
	// (an exhausted RateLimit quota).
	Pause time.Duration
	// Health says how the answer mapped (SPEC 13), summed over its pages.
	Health mapping.Health
}

// Voucher is a payment voucher being streamed from the portal. The caller
// must close Body.
type Voucher struct {
	// ContentType is the portal's, re-written from its parsed form; its
	// media type is one of the source's voucher types.
	ContentType string
	// MediaType is ContentType's media type, in lower case, without
	// parameters.
	MediaType string
	// Body yields at most the source's voucher_max_bytes: a longer voucher
	// makes a Read fail with ErrVoucherTooLarge.
	Body io.ReadCloser
	// Length is the body's length, or -1 when the portal did not say.
	Length int64
	// Pause > 0 when the answer asked us to back off (an exhausted
	// RateLimit quota), as for Answer.Pause.
	Pause time.Duration
}

// New checks spec and compiles its templates and pointers. client makes
// the calls (nil is http.DefaultClient; share one so connections are
// pooled): the source uses a copy of it, same Transport, whose
// CheckRedirect follows redirects within the base URL's origin only, at
// most MaxRedirects (SPEC 9). now reads the clock for HTTP-date Retry-After
// values (nil is time.Now). Every problem found is reported.
func New(spec Spec, client *http.Client, now func() time.Time) (*Source, error) {
	if client == nil {
		client = http.DefaultClient
	}
	if now == nil {
		now = time.Now
	}
	own := *client
	s := &Source{spec: cloneSpec(spec), client: &own, now: now}
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if spec.ID == "" {
		fail("id is empty")
	}
	base, err := url.Parse(spec.BaseURL)
	switch {
	case err != nil:
		fail("base_url: not a URL")
	case base.Scheme != "http" && base.Scheme != "https", base.Host == "":
		fail("base_url: must be an absolute http or https URL")
	default:
		own.CheckRedirect = checkRedirect(base)
		s.base = base
	}
	if own.CheckRedirect == nil {
		own.CheckRedirect = func(*http.Request, []*http.Request) error { return errForeignRedirect }
	}
	if !spec.TLS.IsZero() {
		if tr, err := spec.TLS.transport(client.Transport); err != nil {
			errs = append(errs, err)
		} else {
			own.Transport = tr
		}
	}
	s.named = namesRequests(own.Transport)
	if len(spec.Operations) == 0 {
		fail("operations: none configured")
	}
	for _, op := range slices.Sorted(maps.Keys(spec.Operations)) {
		o, err := compileOperation(spec.BaseURL, op, spec.Operations[op], spec.scope(op))
		if err != nil {
			fail("operations.%s: %w", op, err)
			continue
		}
		s.ops[opIndex(op)] = o
	}

	s.lookupH, s.host, err = compileHeaders(spec.Headers)
	if err != nil {
		fail("headers: %w", err)
	}
	s.voucherH = s.lookupH.Clone()
	received, _ := document.ParseFormat(spec.Response.Format) // a wrong format is reported below
	s.lookupH.Set("Accept", received.Accept())

	switch {
	case spec.MaxResponseBytes < 0:
		fail("max_response_bytes: negative")
	case spec.MaxResponseBytes == 0:
		s.maxBytes = DefaultMaxResponseBytes
	default:
		s.maxBytes = spec.MaxResponseBytes
	}

	if s.vouchers, err = compileVoucherPolicy(spec.VoucherTypes, spec.VoucherMaxBytes); err != nil {
		errs = append(errs, err)
	}

	_, byDomain := spec.Operations[aggregator.ByDomain]
	_, byID := spec.Operations[aggregator.ByID]
	opts := mapping.Options{Source: spec.ID, Jurisdiction: spec.Jurisdiction, Currency: spec.Currency, Location: spec.Location, Now: now,
		VoucherOnly: !byDomain && !byID}
	if _, ok := spec.Operations[aggregator.Voucher]; ok {
		opts.VoucherPrefix = "/v1/sources/" + url.PathEscape(spec.ID) + "/infractions/"
	}
	if s.mapping, err = mapping.Compile(spec.Response, opts); err != nil {
		var merrs mapping.Errors
		if errors.As(err, &merrs) {
			for _, e := range merrs {
				errs = append(errs, e)
			}
		} else {
			errs = append(errs, err)
		}
	}
	if err := s.compilePagination(); err != nil {
		errs = append(errs, err)
	}
	if err := s.compileAuth(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("source %q: %w", spec.ID, errors.Join(errs...))
	}
	return s, nil
}

// compileOperation checks and compiles one operation.
func compileOperation(base string, op aggregator.Operation, spec OperationSpec, sc scope) (*operation, error) {
	if !op.Valid() {
		return nil, errors.New("unknown operation (known: by_domain, by_id, voucher)")
	}
	r, err := compileRequest(base, op, spec, sc)
	if err != nil {
		return nil, err
	}
	o := &operation{request: r}
	if len(spec.Accepts) > 0 && op != aggregator.ByID {
		return nil, errors.New("accepts: only by_id takes kinds of id")
	}
	o.cuit, o.dni = len(spec.Accepts) == 0, len(spec.Accepts) == 0
	for _, k := range spec.Accepts {
		switch k {
		case aggregator.CUIT:
			o.cuit = true
		case aggregator.DNI:
			o.dni = true
		default:
			return nil, fmt.Errorf("accepts: unknown kind of id %q (known: cuit, dni)", k)
		}
	}
	return o, nil
}

// compileHeaders checks the configured headers and returns them in
// canonical form, with Host apart.
func compileHeaders(in map[string]string) (http.Header, string, error) {
	h := make(http.Header, len(in)+1)
	var host string
	for _, name := range slices.Sorted(maps.Keys(in)) {
		value := in[name]
		if !isToken(name) {
			return h, "", fmt.Errorf("%q is not a header name", name)
		}
		if strings.ContainsAny(value, "\r\n\x00") {
			return h, "", fmt.Errorf("%s: value holds a line break", name)
		}
		if strings.EqualFold(name, "Host") {
			host = value
			continue
		}
		h.Set(name, value)
	}
	return h, host, nil
}

// ID is the source's id.
func (s *Source) ID() string { return s.spec.ID }

// Paginated reports whether a lookup may take more than one request:
// only then does it call the page gate (WithPageGate).
func (s *Source) Paginated() bool { return s.spec.Pagination.Style != "" }

// Jurisdiction is the name of the source's jurisdiction.
func (s *Source) Jurisdiction() string { return s.spec.Jurisdiction }

// Spec returns the source's configuration (a copy).
func (s *Source) Spec() Spec { return cloneSpec(s.spec) }

// Supports reports whether the source answers op for this kind of person
// id; kind is ignored (pass "") for by_domain and voucher, and "" for by_id
// asks whether by_id exists at all.
func (s *Source) Supports(op aggregator.Operation, kind aggregator.IDKind) bool {
	if !op.Valid() {
		return false
	}
	o := s.ops[opIndex(op)]
	if o == nil {
		return false
	}
	if op != aggregator.ByID {
		return true
	}
	switch kind {
	case aggregator.CUIT:
		return o.cuit
	case aggregator.DNI:
		return o.dni
	}
	return kind == ""
}

// Lookup asks the portal for the infractions of q (by_domain or by_id, as
// q.Operation says). A 404 (or a 204) is a successful answer with no
// infractions.
// Failures are *Error; ErrUnsupported when the source cannot answer q.
func (s *Source) Lookup(ctx context.Context, q aggregator.Query) (Answer, error) {
	op := q.Operation()
	if !s.Supports(op, q.IDKind) {
		return Answer{}, ErrUnsupported
	}
	o := s.ops[opIndex(op)]
	// Every request of the call (each page too) is named by the operation.
	if s.named {
		ctx = withURLTemplate(ctx, o.named)
	}
	var v values
	v.p[paramDomain], v.p[paramID], v.p[paramIDKind] = q.Domain, q.ID, string(q.IDKind)
	subj := mapping.Subject{Op: op, Value: q.Value()}
	if s.Paginated() {
		return s.lookupPages(ctx, o, &v, subj)
	}
	pg, err := s.lookupPage(ctx, o, &v, subj)
	if err != nil {
		return Answer{}, err
	}
	return Answer{Infractions: pg.infractions, Pause: pg.pause, Health: pg.health}, nil
}

// Voucher asks the portal for an infraction's payment voucher and returns
// it for streaming, with the portal's content type. The portal's 404 is an
// *Error with Status 404 wrapping ErrNotFound; other failures are
// classified as for Lookup. A 2xx answer whose media type is not one of
// the source's voucher types (or is missing, or unparsable), or whose
// Content-Length exceeds voucher_max_bytes, is Unreadable (SPEC 9). The
// body is streamed, never held in memory; reading more than
// voucher_max_bytes of it fails with ErrVoucherTooLarge.
func (s *Source) Voucher(ctx context.Context, infractionID string) (*Voucher, error) {
	o := s.ops[opIndex(aggregator.Voucher)]
	if o == nil {
		return nil, ErrUnsupported
	}
	if infractionID == "" {
		return nil, &Error{Outcome: aggregator.Rejected, Err: ErrNotFound}
	}
	if s.named {
		ctx = withURLTemplate(ctx, o.named)
	}
	var v values
	v.p[paramInfractionID] = infractionID
	resp, err := s.do(ctx, o, &v, s.voucherH)
	if err != nil {
		return nil, err
	}
	code := resp.StatusCode
	pause := s.pause(resp)
	if code >= 200 && code < 300 {
		v, err := s.vouchers.check(resp)
		if err != nil {
			// Unread: a voucher may be large, and it is not wanted.
			resp.Body.Close()
			return nil, unreadable(code, pause, err)
		}
		v.Pause = pause
		return v, nil
	}
	drain(resp.Body)
	resp.Body.Close()
	if code == http.StatusNotFound {
		return nil, &Error{Outcome: aggregator.Rejected, Status: code, Pause: pause, Err: ErrNotFound}
	}
	return nil, statusError(code, pause)
}

// do sends one request of operation o, authenticated as the source's auth
// says: a portal's 401 to an OAuth2 token drops it, and a 401, a 403 or
// the session page again (to a lookup) ends the session; either way the
// request is repeated once, with a fresh token or session. The token and
// the session's values go to ctx's learner (WithSecrets) before the
// request is sent. A failure to get an answer comes back as *Error; a
// request that cannot be made (ErrUnbuildable) is Unreadable, never sent.
func (s *Source) do(ctx context.Context, o *operation, v *values, h http.Header) (*http.Response, error) {
	for retried := false; ; retried = true {
		var gen uint64
		if s.sessions != nil {
			values, g, err := s.sessions.get(ctx, s)
			if err != nil {
				return nil, err
			}
			v.session, gen = values, g
			for _, name := range s.sessions.names {
				learnSecrets(ctx, values[name])
			}
		}
		req, err := o.build(ctx, v, h, s.host, s.tokens != nil || s.client.Jar != nil)
		if err != nil {
			return nil, unbuildable(err)
		}
		var token string
		if s.tokens != nil {
			if token, err = s.tokens.get(ctx); err != nil {
				return nil, err
			}
			learnSecrets(ctx, token)
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := s.send(req)
		if err != nil {
			e := transportError(ctx, err)
			if resp != nil && e.Outcome == aggregator.Unreadable {
				e.Status = resp.StatusCode // the redirect not followed
			}
			return nil, e
		}
		code := resp.StatusCode
		switch {
		case retried:
			return resp, nil
		case s.tokens != nil && code == http.StatusUnauthorized:
			s.tokens.drop(token)
		case s.sessions != nil && (code == http.StatusUnauthorized || code == http.StatusForbidden ||
			code >= 200 && code < 300 && o != s.ops[opIndex(aggregator.Voucher)] && s.sessions.isSessionPage(ctx, s, resp)):
			s.sessions.drop(gen)
		default:
			return resp, nil
		}
		drain(resp.Body)
		resp.Body.Close()
	}
}

// buffer takes a body buffer from the source's pool.
func (s *Source) buffer() *[]byte {
	if b, ok := s.buffers.Get().(*[]byte); ok {
		return b
	}
	b := make([]byte, 0, 4<<10)
	return &b
}

// release returns a body buffer to the pool, unless it grew too large to
// be worth keeping.
func (s *Source) release(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		s.buffers.Put(b)
	}
}

// readLimited appends r's content to buf until EOF, or until more than
// limit bytes came (over is then true, and the rest is left unread). err is
// a read error other than EOF.
func readLimited(r io.Reader, buf []byte, limit int64) (_ []byte, over bool, err error) {
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		room := buf[len(buf):cap(buf)]
		if left := limit + 1 - int64(len(buf)); int64(len(room)) > left {
			room = room[:left]
		}
		n, err := r.Read(room)
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > limit {
			return buf, true, nil
		}
		if err == io.EOF {
			return buf, false, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
}

// pause is how long the answer asks us to wait: Retry-After on a 429 or a
// 5xx, or whenever a RateLimit quota is exhausted (Retry-After first);
// otherwise the exhausted quota's reset; 0 when the answer says nothing.
func (s *Source) pause(resp *http.Response) time.Duration {
	remaining, reset, ok := ParseRateLimit(resp.Header)
	exhausted := ok && remaining == 0
	if exhausted || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		if ra := resp.Header["Retry-After"]; len(ra) > 0 {
			if d, ok := ParseRetryAfter(ra[0], s.now()); ok {
				return d
			}
		}
	}
	if exhausted {
		return reset
	}
	return 0
}

// drain reads what remains of a small body so the connection is reused.
// It returns the read error, if any, other than EOF.
func drain(body io.Reader) error {
	if _, err := io.CopyN(io.Discard, body, drainLimit); err != io.EOF {
		return err
	}
	return nil
}

// opIndex is the index of a valid operation in Source.ops.
func opIndex(op aggregator.Operation) int {
	switch op {
	case aggregator.ByDomain:
		return 0
	case aggregator.ByID:
		return 1
	}
	return 2
}

// isToken reports whether s is an RFC 9110 token (a method or field name).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// cloneSpec copies spec and the maps and slices it holds.
func cloneSpec(spec Spec) Spec {
	spec.Headers = maps.Clone(spec.Headers)
	spec.Response = spec.Response.Clone()
	spec.Auth = spec.Auth.clone()
	spec.VoucherTypes = slices.Clone(spec.VoucherTypes)
	if spec.Operations != nil {
		ops := make(map[aggregator.Operation]OperationSpec, len(spec.Operations))
		for op, opSpec := range spec.Operations {
			opSpec.Accepts = slices.Clone(opSpec.Accepts)
			opSpec.Query = maps.Clone(opSpec.Query)
			opSpec.Headers = maps.Clone(opSpec.Headers)
			opSpec.Body.Form = maps.Clone(opSpec.Body.Form)
			opSpec.Body.JSON = slices.Clone(opSpec.Body.JSON)
			ops[op] = opSpec
		}
		spec.Operations = ops
	}
	return spec
}
