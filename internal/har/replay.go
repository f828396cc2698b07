package har

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/transform"
)

// maxRequestBody bounds the body of a request being matched.
const maxRequestBody = 1 << 20

// Options says how a Replay serves recorded answers. The zero value is
// usable.
type Options struct {
	// MaxBody bounds each body served: one recorded longer is served cut
	// after MaxBody+1 bytes, which is enough for a reader bounded to
	// MaxBody to see it is too long. 0 is MaxFileBytes.
	MaxBody int64
	// Encoding, when set, is the charset the answers are read in (a
	// source's configured response.charset): a body recorded as text,
	// which HAR 1.2 transcodes to UTF-8, is encoded back into it. Without
	// it, such a body is served as UTF-8 and its Content-Type says so.
	Encoding encoding.Encoding
}

// Replay is an http.RoundTripper that answers from a HAR and never opens a
// connection. Each request takes the answer of the first entry not yet
// used that matches it: same method, same path (percent-decoded), the same
// query parameters in any order, and the same body (forms parameter by
// parameter in any order, JSON member by member, other bodies as text),
// where a Wildcard ("***", a masked value) on either side stands for any
// text and a body that is the Wildcard alone for any body. Headers, the
// scheme and the host are not compared: equal requests take the recorded
// answers in order, and entries that match nothing are ignored. A request
// no entry answers fails, and is kept as a Miss.
//
// A recorded answer is served as it was recorded, but for what the
// replay changes: Content-Encoding, Content-Length and Transfer-Encoding
// are dropped (HAR bodies are decoded), a body recorded as text is
// labelled UTF-8 (see Options.Encoding), and the recorded request's origin
// is replaced by the replayed request's in the Location, Content-Location,
// Link and Refresh headers and in the body, so that a HAR recorded at one
// address replays at another. An entry whose answer has no status (0: no
// answer was recorded) fails the request as a connection would.
//
// It is safe for concurrent use.
type Replay struct {
	opts    Options
	entries []recorded

	mu     sync.Mutex
	used   []bool
	misses []Miss
}

// recorded is an entry, with the key it is matched by.
type recorded struct {
	key    key
	ok     bool // the entry can match
	origin string
	entry  *Entry
}

// Miss is a request that no entry answered.
type Miss struct {
	// Method and URL are the request's.
	Method, URL string
	// Body is the start of its body.
	Body string
	// Reason says what the nearest entries differed in.
	Reason string
}

// NoAnswerError is the error of a request that no entry answered.
type NoAnswerError struct{ Method, Path string }

func (e *NoAnswerError) Error() string {
	return "no recorded answer for " + e.Method + " " + e.Path
}

// ErrNoAnswer is the error of a request whose entry recorded no answer.
var ErrNoAnswer = errors.New("the recorded request got no answer")

// NewReplay returns a Replay of f's entries.
func NewReplay(f *File, opts Options) *Replay {
	if opts.MaxBody <= 0 {
		opts.MaxBody = MaxFileBytes
	}
	r := &Replay{opts: opts, entries: make([]recorded, len(f.Log.Entries)), used: make([]bool, len(f.Log.Entries))}
	for i := range f.Log.Entries {
		e := &f.Log.Entries[i]
		k, ok := entryKey(e.Request)
		r.entries[i] = recorded{key: k, ok: ok, entry: e}
		if u, err := url.Parse(e.Request.URL); err == nil && u.Host != "" {
			r.entries[i].origin = u.Scheme + "://" + u.Host
		}
	}
	return r
}

// Misses are the requests that no entry answered, in order.
func (r *Replay) Misses() []Miss {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Miss(nil), r.misses...)
}

// WithTLS is r itself: a recording is replayed without connections, so
// a source's tls settings change nothing.
func (r *Replay) WithTLS(func(*tls.Config)) http.RoundTripper { return r }

// RoundTrip answers req from the first unused entry that matches it.
func (r *Replay) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		b, err := io.ReadAll(io.LimitReader(req.Body, maxRequestBody+1))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(b) > maxRequestBody {
			return nil, fmt.Errorf("har: request body larger than %d bytes", maxRequestBody)
		}
		body = b
	}
	k := requestKey(req.Method, req.URL, body, req.Header.Get("Content-Type"))
	e, err := r.take(k, req, body)
	if err != nil {
		return nil, err
	}
	return r.answer(e, req)
}

// take marks the first unused entry that matches k as used, and returns
// it; none is a Miss.
func (r *Replay) take(k key, req *http.Request, body []byte) (recorded, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// What the nearest entries differ in: those of the same method and
	// path, unless all of them were used.
	same, differs := 0, ""
	for i, e := range r.entries {
		if !e.ok {
			continue
		}
		why := e.key.mismatch(k)
		if why == "" && !r.used[i] {
			r.used[i] = true
			return e, nil
		}
		if why == "" || why == "query" || why == "body" {
			same++
			if !r.used[i] && differs == "" {
				differs = why
			}
		}
	}
	reason := "no entry has this method and path"
	switch {
	case differs != "":
		reason = fmt.Sprintf("%d entr%s of this method and path, but the %s differs", same, plural(same, "y", "ies"), differs)
	case same > 0:
		reason = fmt.Sprintf("the %d answer%s recorded for it %s used already", same, plural(same, "", "s"), plural(same, "was", "were"))
	}
	r.misses = append(r.misses, Miss{Method: req.Method, URL: strings.ReplaceAll(req.URL.String(), "%2A%2A%2A", Wildcard), Body: string(body[:min(len(body), 200)]), Reason: reason})
	return recorded{}, &NoAnswerError{Method: req.Method, Path: req.URL.EscapedPath()}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// answer builds the response e recorded, for req.
func (r *Replay) answer(e recorded, req *http.Request) (*http.Response, error) {
	rs := e.entry.Response
	if rs.Status < 100 || rs.Status > 999 {
		return nil, ErrNoAnswer
	}
	from, to := e.origin, req.URL.Scheme+"://"+req.URL.Host
	rewrite := from != "" && req.URL.Host != "" && !strings.EqualFold(from, to)
	h := make(http.Header, len(rs.Headers))
	for _, nv := range rs.Headers {
		name := http.CanonicalHeaderKey(strings.TrimSpace(nv.Name))
		switch {
		case name == "" || strings.HasPrefix(name, ":"), // HTTP/2 pseudo-headers
			name == "Content-Encoding", name == "Content-Length", name == "Transfer-Encoding":
			continue
		case rewrite && (name == "Location" || name == "Content-Location" || name == "Link" || name == "Refresh"):
			h.Add(name, strings.ReplaceAll(nv.Value, from, to))
		default:
			h.Add(name, nv.Value)
		}
	}
	if h.Get("Content-Type") == "" && rs.Content.MimeType != "" {
		h.Set("Content-Type", rs.Content.MimeType)
	}
	rd, err := rs.Content.Reader(r.opts.MaxBody + 1)
	if err != nil {
		return nil, fmt.Errorf("har: %w", err)
	}
	text := rs.Content.Encoding == ""
	if text && r.opts.Encoding != nil {
		rd = transform.NewReader(rd, encoding.ReplaceUnsupported(r.opts.Encoding.NewEncoder()))
	}
	body, err := io.ReadAll(io.LimitReader(rd, r.opts.MaxBody+1))
	if err != nil {
		return nil, fmt.Errorf("har: the recorded body does not decode: %w", err)
	}
	if text && r.opts.Encoding == nil && !ascii(rs.Content.Text) {
		if ct, ok := withUTF8(h.Get("Content-Type")); ok {
			h.Set("Content-Type", ct)
		}
	}
	if rewrite {
		body = bytes.ReplaceAll(body, []byte(from), []byte(to))
		body = bytes.ReplaceAll(body, []byte(strings.ReplaceAll(from, "/", `\/`)), []byte(strings.ReplaceAll(to, "/", `\/`)))
	}
	statusText := rs.StatusText
	if statusText == "" || !utf8.ValidString(statusText) {
		statusText = http.StatusText(rs.Status)
	}
	return &http.Response{
		Status:     strconv.Itoa(rs.Status) + " " + statusText,
		StatusCode: rs.Status,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

// ascii reports whether s is plain ASCII.
func ascii(s string) bool {
	for i := range len(s) {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// withUTF8 is a Content-Type with its charset set to UTF-8; ok is false
// when there is no Content-Type, or it does not parse.
func withUTF8(contentType string) (string, bool) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "", false
	}
	if strings.EqualFold(params["charset"], "utf-8") {
		return contentType, true
	}
	params["charset"] = "utf-8"
	return mime.FormatMediaType(mt, params), true
}
