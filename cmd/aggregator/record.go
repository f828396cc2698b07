package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/internal/har"
	"github.com/multas/aggregator/sources/document"
)

// personalData is what `sources check -record` says on stderr (SPEC 13).
const personalData = `aggregator sources check: a HAR file holds the subject looked up and what the portal answered
about it: personal data. It is written with mode 0600; record a test vehicle, or anonymise
the file, before committing it (secrets are already masked as ***).
`

// checkCommand is the command line that checked one source, written in a
// HAR's log.comment: `sources test -update` reads its subject back.
func checkCommand(id string, op aggregator.Operation, q aggregator.Query, infractionID string) string {
	c := "aggregator sources check -source " + id
	switch op {
	case aggregator.ByDomain:
		return c + " -domain " + string(q.Domain)
	case aggregator.ByID:
		return c + " -id " + q.ID
	}
	return c + " -infraction " + infractionID
}

// recordHAR writes exs to dir/<id>.har, every secret masked by m, mode
// 0600 (the directory is made, 0700, when missing). The file is replaced
// whole: a reader never sees it half written, and an older file's mode
// does not carry over.
func recordHAR(dir, id, comment string, m *masker, exs []exchange) error {
	m.learnCookies(exs)
	f := &har.File{Log: har.Log{Version: har.Version, Creator: har.Creator{Name: "aggregator", Version: buildInfo(version, debug.ReadBuildInfo).Version}, Comment: comment}}
	for _, e := range exs {
		f.Log.Entries = append(f.Log.Entries, harEntry(m, e))
	}
	var buf bytes.Buffer
	if err := har.Write(&buf, f); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return writePrivate(filepath.Join(dir, id+".har"), buf.Bytes())
}

// writePrivate writes data to path with mode 0600, through a temporary
// file renamed over it.
func writePrivate(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// harEntry is one exchange as a HAR entry, masked as sources check prints
// it (SPEC 9): secret headers and cookies as ***, secret parameters and
// every secret value wherever it appears, a token request's form values,
// and, in a token answer, every value but its token_type and expires_in.
func harEntry(m *masker, e exchange) har.Entry {
	req := har.Request{Method: e.method, URL: m.maskURL(e.url), HTTPVersion: "HTTP/1.1", HeadersSize: -1, BodySize: float64(len(e.reqBody)),
		Headers: harHeaders(m, e.reqHeader), Cookies: harCookies(e.reqHeader, false)}
	if u, err := url.Parse(req.URL); err == nil {
		for part := range strings.SplitSeq(u.RawQuery, "&") {
			if part == "" {
				continue
			}
			name, value, _ := strings.Cut(part, "=")
			req.QueryString = append(req.QueryString, har.NameValue{Name: unescapeQuery(name), Value: unescapeQuery(value)})
		}
	}
	if len(e.reqBody) > 0 {
		text, _ := m.maskBody(e.reqHeader, e.reqBody, e.auth)
		req.PostData = &har.PostData{MimeType: e.reqHeader.Get("Content-Type"), Text: text}
	}
	out := har.Entry{StartedDateTime: e.start.UTC().Format(time.RFC3339Nano), Time: ms(e.took), Request: req,
		Timings: har.Timings{Blocked: -1, DNS: -1, Connect: -1, SSL: -1, Wait: ms(e.took)}}
	if e.err != nil {
		out.Response = har.Response{HTTPVersion: "HTTP/1.1", HeadersSize: -1, BodySize: -1,
			Comment: "no answer: " + m.mask(e.err.Error())}
		return out
	}
	ct := e.header.Get("Content-Type")
	body, comment := m.maskAnswer(e)
	if e.cut {
		comment = strings.TrimSpace(comment + fmt.Sprintf(" cut after %d bytes: the answer was longer", len(e.body)))
	}
	proto := e.proto
	if proto == "" {
		proto = "HTTP/1.1"
	}
	out.Response = har.Response{
		Status: e.status, StatusText: m.mask(strings.TrimSpace(strings.TrimPrefix(e.statusText, fmt.Sprint(e.status)))), HTTPVersion: proto,
		Headers: harHeaders(m, e.header), Cookies: harCookies(e.header, true),
		Content:     har.Body(body, ct, utf8.Valid(body) && (isASCII(body) || document.Declared(body, ct) == "utf-8")),
		RedirectURL: m.mask(e.header.Get("Location")), HeadersSize: -1, BodySize: float64(len(body)),
	}
	out.Response.Content.Comment = comment
	return out
}

// maskAnswer is an answer's body with its secrets hidden, and a comment on
// what was hidden beyond the known secrets.
func (m *masker) maskAnswer(e exchange) ([]byte, string) {
	b, comment := e.body, ""
	if e.auth {
		// A token answer, or a JSON session page: every value but those
		// the client needs to read it is hidden (refresh tokens, ids).
		if masked, ok := maskValues(b, e.header.Get("Content-Type")); ok {
			b, comment = masked, "token or session answer: every value but token_type and expires_in masked"
		}
	}
	b = []byte(m.mask(string(b)))
	// A secret the masker knows in a form that only shows once the body
	// is decoded from its charset: the body is not recorded.
	if text := decodeText(b, e.header.Get("Content-Type")); m.holds(text) {
		return []byte(har.Wildcard), "not recorded: it holds a secret in a form that cannot be masked"
	}
	return b, comment
}

// maskValues hides every value of a JSON or form-encoded answer but its
// token_type and expires_in; ok is false when it is neither.
func maskValues(b []byte, contentType string) ([]byte, bool) {
	keep := func(name string) bool { return name == "token_type" || name == "expires_in" }
	mt, _, _ := mime.ParseMediaType(contentType)
	if mt == "application/x-www-form-urlencoded" || mt == "text/plain" {
		// As golang.org/x/oauth2 reads a token answer that is not JSON.
		pairs := strings.Split(string(b), "&")
		for i, p := range pairs {
			if k, _, ok := strings.Cut(p, "="); ok && !keep(unescapeQuery(k)) {
				pairs[i] = k + "=" + har.Wildcard
			}
		}
		return []byte(strings.Join(pairs, "&")), true
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return nil, false
	}
	var hide func(v any, top bool) any
	hide = func(v any, top bool) any {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if !(top && keep(k)) {
					v[k] = hide(x, false)
				}
			}
		case []any:
			for i := range v {
				v[i] = hide(v[i], false)
			}
		case string:
			return har.Wildcard
		}
		return v
	}
	out, err := json.Marshal(hide(v, true))
	return out, err == nil
}

// holds reports whether s holds any known secret value, in any form.
func (m *masker) holds(s string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.ContainsFunc(m.forms, func(f string) bool { return strings.Contains(s, f) })
}

// harHeaders are h's headers, sorted, each masked as printed.
func harHeaders(m *masker, h http.Header) []har.NameValue {
	var out []har.NameValue
	for _, k := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[k] {
			out = append(out, har.NameValue{Name: k, Value: m.maskHeader(k, v)})
		}
	}
	return out
}

// harCookies are the names of the cookies h sends (Cookie) or sets
// (Set-Cookie), each value ***.
func harCookies(h http.Header, set bool) []har.Cookie {
	var out []har.Cookie
	if set {
		for _, line := range h.Values("Set-Cookie") {
			if c, err := http.ParseSetCookie(line); err == nil {
				out = append(out, har.Cookie{Name: c.Name, Value: har.Wildcard})
			}
		}
		return out
	}
	for _, line := range h.Values("Cookie") {
		if cs, err := http.ParseCookie(line); err == nil {
			for _, c := range cs {
				out = append(out, har.Cookie{Name: c.Name, Value: har.Wildcard})
			}
		}
	}
	return out
}

// unescapeQuery is s query-unescaped, or s when it does not unescape.
func unescapeQuery(s string) string {
	if d, err := url.QueryUnescape(s); err == nil {
		return d
	}
	return s
}

// isASCII reports whether b is plain ASCII.
func isASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
