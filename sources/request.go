package sources

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/multas/aggregator"
)

// Body is what an operation sends as its request body: at most one of
// Form, JSON and Text (SPEC 8).
type Body struct {
	// Form fields, sent as application/x-www-form-urlencoded.
	Form map[string]string
	// JSON is a JSON document sent as application/json; placeholders are
	// substituted inside its strings.
	JSON json.RawMessage
	// Text is sent as it is, with ContentType (required with Text).
	Text        string
	ContentType string
}

// ErrUnbuildable is the cause of a call whose request could not be made:
// a value that cannot be sent where it lands (a token or a session value
// holding a line break or another control character, bound for a header;
// a dot segment bound for a path). It is wrapped in an *Error with Outcome
// Unreadable (source-error): nothing was sent, so it says nothing of the
// portal's capacity and the breaker never counts it (SPEC 9). Its text
// names the placeholder, never the value.
var ErrUnbuildable = errors.New("the request cannot be made")

// unbuildable is the *Error of a request that could not be made.
func unbuildable(err error) *Error {
	return &Error{Outcome: aggregator.Unreadable, Err: fmt.Errorf("%w: %w", ErrUnbuildable, err)}
}

// request is a compiled OperationSpec: how one portal request is built.
type request struct {
	method   string
	url      template
	headers  []headerTemplate // the operation's own, over the source's
	body     template
	bodyType string // the body's Content-Type; "" when there is no body
	// named names the requests in traces: the method and the path
	// template, never a value.
	named *urlTemplate
}

// headerTemplate is one header of an operation.
type headerTemplate struct {
	name  string
	value template
}

// compileRequest checks and compiles the request of operation op: the
// URL (base, path and query), the operation's headers and its body. The
// operation's own placeholder must appear somewhere in it.
func compileRequest(base string, op aggregator.Operation, spec OperationSpec, sc scope) (request, error) {
	var (
		r    request
		seen [numParams]bool
		errs []error
	)
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	r.method = strings.ToUpper(spec.Method)
	if r.method == "" {
		r.method = http.MethodGet
	}
	if !isToken(r.method) {
		fail("method: not an HTTP method")
	}
	r.named = newURLTemplate(r.method, templatePath(base, spec.Path))

	path := spec.Path
	if strings.HasSuffix(base, "/") && strings.HasPrefix(path, "/") {
		path = path[1:]
	}
	r.url.add(base)
	pathPart, queryPart, hasQuery := strings.Cut(path, "?")
	if t, err := compileText(pathPart, inPath, sc, &seen); err != nil {
		fail("path: %w", err)
	} else {
		r.url.append(t)
	}
	if hasQuery {
		r.url.add("?")
		if t, err := compileText(queryPart, inQuery, sc, &seen); err != nil {
			fail("path: %w", err)
		} else {
			r.url.append(t)
		}
	}
	sep := "?"
	if hasQuery {
		sep = "&"
	}
	for _, name := range slices.Sorted(maps.Keys(spec.Query)) {
		t, err := compileText(spec.Query[name], inQuery, sc, &seen)
		if err != nil {
			fail("query.%s: %w", name, err)
			continue
		}
		r.url.add(sep + url.QueryEscape(name) + "=")
		r.url.append(t)
		sep = "&"
	}

	for _, name := range slices.Sorted(maps.Keys(spec.Headers)) {
		if !isToken(name) {
			fail("headers: %q is not a header name", name)
			continue
		}
		if strings.ContainsAny(spec.Headers[name], "\r\n\x00") {
			fail("headers.%s: value holds a line break", name)
			continue
		}
		t, err := compileText(spec.Headers[name], inHeader, sc, &seen)
		if err != nil {
			fail("headers.%s: %w", name, err)
			continue
		}
		r.headers = append(r.headers, headerTemplate{name: http.CanonicalHeaderKey(name), value: t})
	}

	if err := r.compileBody(spec.Body, sc, &seen); err != nil {
		fail("body: %w", err)
	}
	if len(errs) == 0 && !seen[required(op)] {
		fail("the request of operation %s lacks its placeholder %s (in path, query, headers or body)", op, paramNames[required(op)])
	}
	if len(errs) == 0 {
		var v values
		v.p[paramDomain], v.p[paramID], v.p[paramIDKind], v.p[paramInfractionID] = "X", "1", "dni", "1"
		if u, err := r.url.expand(&v); err != nil {
			fail("path: %w", err)
		} else if _, err := url.Parse(u); err != nil {
			fail("path %q does not make a valid URL", spec.Path)
		}
	}
	return r, errors.Join(errs...)
}

// compileBody compiles b, escaping every placeholder for the body's type.
func (r *request) compileBody(b Body, sc scope, seen *[numParams]bool) error {
	kinds := 0
	for _, set := range []bool{len(b.Form) > 0, b.JSON != nil, b.Text != ""} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds > 1:
		return errors.New("at most one of form, json and text")
	case b.ContentType != "" && b.Text == "":
		return errors.New("content_type goes with text")
	case kinds == 0:
		return nil
	case r.method == http.MethodGet || r.method == http.MethodHead:
		return fmt.Errorf("a %s request has no body (use method: POST)", r.method)
	}
	switch {
	case len(b.Form) > 0:
		r.bodyType = "application/x-www-form-urlencoded"
		for i, name := range slices.Sorted(maps.Keys(b.Form)) {
			t, err := compileText(b.Form[name], inQuery, sc, seen)
			if err != nil {
				return fmt.Errorf("form.%s: %w", name, err)
			}
			if i > 0 {
				r.body.add("&")
			}
			r.body.add(url.QueryEscape(name) + "=")
			r.body.append(t)
		}
	case b.JSON != nil:
		r.bodyType = "application/json"
		dec := json.NewDecoder(bytes.NewReader(b.JSON))
		dec.UseNumber()
		if err := compileJSON(dec, &r.body, sc, seen); err != nil {
			return fmt.Errorf("json: %w", err)
		}
		if _, err := dec.Token(); err != io.EOF {
			return errors.New("json: more than one value")
		}
	default:
		if b.ContentType == "" {
			return errors.New("content_type is required with text")
		}
		mt, _, err := mime.ParseMediaType(b.ContentType)
		if err != nil {
			return fmt.Errorf("content_type: %q is not a media type", b.ContentType)
		}
		r.bodyType = b.ContentType
		t, err := compileText(b.Text, textLanding(mt), sc, seen)
		if err != nil {
			return fmt.Errorf("text: %w", err)
		}
		r.body = t
	}
	return nil
}

// textLanding is how placeholders of a text body of media type mt are
// escaped: as XML text for */xml and */*+xml, inside JSON strings for JSON,
// as form values for forms, else as they are.
func textLanding(mt string) landing {
	switch {
	case strings.HasSuffix(mt, "/xml"), strings.HasSuffix(mt, "+xml"):
		return inXML
	case mt == "application/json", strings.HasSuffix(mt, "+json"):
		return inJSON
	case mt == "application/x-www-form-urlencoded":
		return inQuery
	}
	return inText
}

// maxJSONDepth bounds the nesting of a JSON body.
const maxJSONDepth = 64

// compileJSON compiles the next JSON value of dec into t: structure and
// literals as they are, placeholders inside strings escaped as JSON.
func compileJSON(dec *json.Decoder, t *template, sc scope, seen *[numParams]bool) error {
	return compileJSONValue(dec, t, sc, seen, 0)
}

func compileJSONValue(dec *json.Decoder, t *template, sc scope, seen *[numParams]bool, depth int) error {
	if depth > maxJSONDepth {
		return errors.New("nested too deeply")
	}
	tok, err := dec.Token()
	if err != nil {
		return errors.New("not a JSON document")
	}
	switch v := tok.(type) {
	case json.Delim:
		closing := "]"
		if v == '{' {
			closing = "}"
		}
		t.add(string(v))
		for first := true; dec.More(); first = false {
			if !first {
				t.add(",")
			}
			if v == '{' {
				key, err := dec.Token()
				if err != nil {
					return errors.New("not a JSON document")
				}
				k, _ := json.Marshal(key)
				t.add(string(k) + ":")
			}
			if err := compileJSONValue(dec, t, sc, seen, depth+1); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return errors.New("not a JSON document")
		}
		t.add(closing)
	case string:
		s, err := compileText(v, inJSON, sc, seen)
		if err != nil {
			return err
		}
		t.add(`"`)
		for _, p := range s.parts {
			if p.param != paramNone {
				t.parts = append(t.parts, p)
				continue
			}
			var b strings.Builder
			writeJSONString(&b, p.literal)
			t.add(b.String())
		}
		t.add(`"`)
	case json.Number:
		t.add(v.String())
	case bool:
		t.add(fmt.Sprint(v))
	case nil:
		t.add("null")
	}
	return nil
}

// build makes the request for v, with the source's headers h under the
// operation's own. A value that cannot be sent where it lands (a dot
// segment in a path, a control character in a header) is an error.
// private says that the caller or the client adds header fields (a token,
// cookies): the request then has a header of its own.
func (r *request) build(ctx context.Context, v *values, h http.Header, host string, private bool) (*http.Request, error) {
	u, err := r.url.expand(v)
	if err != nil {
		return nil, err
	}
	if v.next != "" {
		u = v.next
	}
	var body io.Reader
	if r.bodyType != "" {
		text, err := r.body.expand(v)
		if err != nil {
			return nil, err
		}
		body = strings.NewReader(text)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return nil, withoutURL(err)
	}
	switch {
	case !private && len(r.headers) == 0 && r.bodyType == "" && h != nil:
		// Nothing to add: the source's own fields, which nothing down
		// the line writes to (a RoundTripper must not change its
		// request; a client with no jar adds no cookies; send gives a
		// redirect's request, and user info's Basic authentication, a
		// header of their own).
		req.Header = h
	default:
		// A copy: headers are added to it, by us or by the client.
		req.Header = h.Clone()
		if req.Header == nil {
			req.Header = make(http.Header, len(r.headers)+1)
		}
	}
	for _, ht := range r.headers {
		value, err := ht.value.expand(v)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", ht.name, err)
		}
		req.Header[ht.name] = []string{value}
	}
	if r.bodyType != "" {
		req.Header.Set("Content-Type", r.bodyType)
	}
	if host != "" {
		req.Host = host
	}
	return req, nil
}
