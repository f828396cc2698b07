package h1

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"strconv"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// This file reads an answer's head and frames its body as net/http's
// ReadResponse does (its textproto.Reader.ReadMIMEHeader and
// readTransfer), at a fraction of the allocations: the head is read into
// the connection's buffer and made one string, whose substrings are the
// status, the canonical keys and the values; the values share one backing
// array; the Response and its body are one allocation.
//
// Where it is stricter than net/http, on purpose:
//   - a field name with a space before its colon ("Content-Length : 5")
//     is refused; net/http keeps it, uncanonicalised (go.dev/issue/34540),
//     where it silently frames nothing. RFC 9112 §5.1 forbids it, and a
//     name that looks like a framing field but is not one is how
//     responses are split;
//   - the status code is three ASCII digits; net/http takes what Atoi
//     takes in three bytes ("+20");
//   - the version is HTTP/1.0 or HTTP/1.1; net/http takes any HTTP/d.d,
//     which on this transport could only be a broken or foreign answer.
//
// GODEBUG=httplaxcontentlength=1 is not honoured: an empty Content-Length
// is refused.
//
// Unlike net/http's, the errors never quote a header line or the status
// line: a portal's fields may echo a plate, and these errors are logged.

// answer is an answer's Response and its body, allocated together.
type answer struct {
	resp http.Response
	body body
	te   [1]string // the backing of resp.TransferEncoding
	// vals backs the header's values when they fit: most answers have
	// fewer fields than this.
	vals [8]string
}

// readAnswer reads the final answer to req from br, skipping up to
// max1xx informational ones, with *buf as the scratch space of its head.
// A 101 is returned as it is: the caller refuses it.
func readAnswer(br *bufio.Reader, req *http.Request, buf *[]byte) (*answer, error) {
	for n := 0; ; n++ {
		a, err := readResponse(br, req, buf)
		if err != nil {
			return nil, err
		}
		code := a.resp.StatusCode
		if code < 100 || code > 199 || code == http.StatusSwitchingProtocols {
			return a, nil
		}
		if n == max1xx {
			return nil, errors.New("h1: too many 1xx informational answers")
		}
	}
}

// readResponse reads one answer's head from br and frames its body, as
// http.ReadResponse. resp.Body is http.NoBody or the framed body,
// &a.body.src.
func readResponse(br *bufio.Reader, req *http.Request, buf *[]byte) (*answer, error) {
	head, nfields, err := readLines(br, buf, true)
	if err != nil {
		return nil, err
	}
	a := &answer{}
	r := &a.resp
	r.Request = req
	line, fields := nextLine(head)
	if err := parseStatusLine(line, r); err != nil {
		return nil, err
	}
	vals := a.vals[:0]
	if nfields > len(a.vals) {
		vals = make([]string, 0, nfields)
	}
	if r.Header, err = parseFields(fields, nfields, vals[:nfields]); err != nil {
		return nil, err
	}
	fixPragmaCacheControl(r.Header)
	if err := a.frame(br); err != nil {
		return nil, err
	}
	return a, nil
}

// readLines reads header lines from br up to and with the empty line that
// ends them (the first line, when status, is the status line, never the
// end) into *buf, and returns them as one string with the number of field
// lines (continuations aside). Lines end with LF or CRLF, as net/http
// takes them; the end of the input before the empty line is
// io.ErrUnexpectedEOF.
func readLines(br *bufio.Reader, buf *[]byte, status bool) (string, int, error) {
	b := (*buf)[:0]
	defer func() { *buf = b }()
	fields := 0
	for first := status; ; first = false {
		start := len(b)
		for {
			frag, err := br.ReadSlice('\n')
			b = append(b, frag...)
			if err == bufio.ErrBufferFull {
				continue // a line longer than br's buffer
			}
			if err == io.EOF {
				return "", 0, io.ErrUnexpectedEOF
			}
			if err != nil {
				return "", 0, err
			}
			break
		}
		if first {
			continue
		}
		switch line := b[start:]; {
		case len(line) == 1 || len(line) == 2 && line[0] == '\r':
			return string(b), fields, nil
		case line[0] != ' ' && line[0] != '\t':
			fields++
		}
	}
}

// nextLine splits s after its first line, returning that line without its
// LF or CRLF.
func nextLine(s string) (line, rest string) {
	line, rest, _ = strings.Cut(s, "\n")
	return strings.TrimSuffix(line, "\r"), rest
}

func parseStatusLine(line string, r *http.Response) error {
	proto, status, ok := strings.Cut(line, " ")
	if !ok {
		return errors.New("h1: malformed HTTP response: no status code after the version")
	}
	r.Proto = proto
	r.Status = strings.TrimLeft(status, " ")
	code, _, _ := strings.Cut(r.Status, " ")
	if len(code) != 3 || !isDigit(code[0]) || !isDigit(code[1]) || !isDigit(code[2]) {
		return errors.New("h1: malformed HTTP status code: not three digits")
	}
	r.StatusCode = int(code[0]-'0')*100 + int(code[1]-'0')*10 + int(code[2]-'0')
	switch proto {
	case "HTTP/1.1":
		r.ProtoMajor, r.ProtoMinor = 1, 1
	case "HTTP/1.0":
		r.ProtoMajor, r.ProtoMinor = 1, 0
	default:
		return errors.New("h1: malformed HTTP version: not HTTP/1.0 or HTTP/1.1")
	}
	return nil
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// parseFields parses the n header fields of s, which ends with an empty
// line, as textproto's ReadMIMEHeader, the values in vals (n long) as far
// as it goes: obs-fold continuation lines are joined to their field with
// one space; values lose their leading and trailing blanks.
func parseFields(s string, n int, vals []string) (http.Header, error) {
	h := make(http.Header, n)
	if s != "" && (s[0] == ' ' || s[0] == '\t') {
		return nil, errors.New("h1: malformed MIME header initial line: a continuation with nothing to continue")
	}
	for {
		line, rest := nextLine(s)
		if line == "" {
			return h, nil
		}
		s = rest
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			return nil, errors.New("h1: malformed MIME header: missing colon")
		}
		if !httpguts.ValidHeaderFieldName(k) {
			return nil, errors.New("h1: malformed MIME header line: not a field name before the colon")
		}
		v = trimBlanks(v)
		if s != "" && (s[0] == ' ' || s[0] == '\t') {
			v, s = unfold(v, s)
		}
		if !httpguts.ValidHeaderFieldValue(v) {
			return nil, fmt.Errorf("h1: malformed MIME header line: the value of %s is not a field value", k)
		}
		k = canonicalKey(k)
		if vv := h[k]; vv == nil && len(vals) > 0 {
			// Most fields come once: each gets a one-element slice of
			// the shared backing, its capacity one so that an append
			// for a second value does not run into its neighbour's.
			vv, vals = vals[:1:1], vals[1:]
			vv[0] = v
			h[k] = vv
		} else {
			h[k] = append(vv, v)
		}
	}
}

// unfold joins to a field's value v the continuation lines that begin s,
// each trimmed and after one space (as textproto's
// readContinuedLineSlice), and returns what follows them.
func unfold(v, s string) (string, string) {
	b := []byte(v)
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		var line string
		line, s = nextLine(s)
		b = append(b, ' ')
		b = append(b, trimBlanks(line)...)
	}
	return strings.TrimLeft(string(b), " \t"), s
}

func trimBlanks(s string) string { return strings.Trim(s, " \t") }

// canonicalKey is k (a valid field name) in textproto's canonical form,
// without an allocation when k is canonical already or a common field's.
func canonicalKey(k string) string {
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return recase(k)
		}
		upper = c == '-'
	}
	return k
}

func recase(k string) string {
	var arr [64]byte
	b := arr[:0]
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
		upper = c == '-'
	}
	if common, ok := commonKeys[string(b)]; ok {
		return common
	}
	return string(b)
}

// commonKeys are the canonical names of the fields portals send most,
// so that one sent in lower case (as some servers and proxies do) costs
// no allocation. Read only.
var commonKeys = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{
		"Accept-Ranges", "Access-Control-Allow-Origin", "Age", "Cache-Control",
		"Connection", "Content-Disposition", "Content-Encoding", "Content-Language",
		"Content-Length", "Content-Security-Policy", "Content-Type", "Date", "Etag",
		"Expires", "Keep-Alive", "Last-Modified", "Location", "Pragma",
		"Ratelimit", "Ratelimit-Limit", "Ratelimit-Policy", "Ratelimit-Remaining", "Ratelimit-Reset",
		"Referrer-Policy", "Retry-After", "Server", "Set-Cookie",
		"Strict-Transport-Security", "Trailer", "Transfer-Encoding", "Vary", "Via",
		"Www-Authenticate", "X-Content-Type-Options", "X-Frame-Options", "X-Powered-By",
		"X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset", "X-Request-Id",
	} {
		m[k] = k
	}
	return m
}()

// fixPragmaCacheControl is net/http's: "Pragma: no-cache" alone means
// "Cache-Control: no-cache" (RFC 7234 §5.4).
func fixPragmaCacheControl(h http.Header) {
	if hp, ok := h["Pragma"]; ok && len(hp) > 0 && hp[0] == "no-cache" {
		if _, ok := h["Cache-Control"]; !ok {
			h["Cache-Control"] = []string{"no-cache"}
		}
	}
}

// frame sets the answer's body framing, ContentLength, TransferEncoding,
// Close and Trailer from its head, as net/http's readTransfer, and its
// Body.
func (a *answer) frame(br *bufio.Reader) error {
	r := &a.resp
	h := r.Header
	method := http.MethodGet
	if r.Request != nil && r.Request.Method != "" {
		method = r.Request.Method
	}
	head := method == http.MethodHead

	r.Close = shouldClose(r.ProtoMajor, r.ProtoMinor, h)

	// Transfer-Encoding: only "chunked", alone, and only from HTTP/1.1
	// on; it leaves the header either way.
	chunked := false
	if te, ok := h["Transfer-Encoding"]; ok {
		delete(h, "Transfer-Encoding")
		if r.ProtoMinor >= 1 {
			if len(te) != 1 {
				return fmt.Errorf("h1: too many transfer encodings: %q", te)
			}
			if !strings.EqualFold(te[0], "chunked") {
				return fmt.Errorf("h1: unsupported transfer encoding: %q", te[0])
			}
			chunked = true
		}
	}

	// Content-Length: repeated only with the same value (which is then
	// kept once), a decimal number.
	cls := h["Content-Length"]
	if len(cls) > 1 {
		first := textproto.TrimString(cls[0])
		for _, cl := range cls[1:] {
			if textproto.TrimString(cl) != first {
				return fmt.Errorf("http: message cannot contain multiple Content-Length headers; got %q", cls)
			}
		}
		cls = cls[:1:1]
		cls[0] = first
		h["Content-Length"] = cls
	}
	length := int64(-1)
	if len(cls) > 0 {
		cl := textproto.TrimString(cls[0])
		if cl == "" {
			return errors.New("h1: invalid empty Content-Length")
		}
		n, err := strconv.ParseUint(cl, 10, 63)
		if err != nil {
			return fmt.Errorf("h1: bad Content-Length %q", cl)
		}
		length = int64(n)
	}

	bodyAllowed := !head && bodyAllowedForStatus(r.StatusCode)
	switch {
	case head:
		r.ContentLength = length // what a GET would have had, or -1
	case !bodyAllowed:
		r.ContentLength = 0
	case chunked:
		delete(h, "Content-Length")
		r.ContentLength = -1
	default:
		r.ContentLength = length
	}

	if chunked {
		a.te[0] = "chunked"
		r.TransferEncoding = a.te[:1:1]
		if err := fixTrailer(r); err != nil {
			return err
		}
	}

	src := &a.body.src
	src.br = br
	switch {
	case !bodyAllowed || r.ContentLength == 0:
		r.Body = http.NoBody
	case chunked:
		src.chunked = httputil.NewChunkedReader(br)
		src.trailer = &r.Trailer
		r.Body = src
	case r.ContentLength > 0:
		src.left = r.ContentLength
		r.Body = src
	default:
		// Neither chunked nor sized: the body ends with the connection.
		r.Close = true
		src.left = -1
		r.Body = src
	}
	return nil
}

// shouldClose is net/http's: whether the connection ends with this
// answer. "Connection: close" leaves an HTTP/1.1 answer's header.
func shouldClose(major, minor int, h http.Header) bool {
	conn := h["Connection"]
	closing := httpguts.HeaderValuesContainsToken(conn, "close")
	if major == 1 && minor == 0 {
		return closing || !httpguts.HeaderValuesContainsToken(conn, "keep-alive")
	}
	if closing {
		delete(h, "Connection")
	}
	return closing
}

func bodyAllowedForStatus(code int) bool {
	return (code < 100 || code > 199) && code != http.StatusNoContent && code != http.StatusNotModified
}

// fixTrailer moves a chunked answer's Trailer field to r.Trailer's keys,
// as net/http.
func fixTrailer(r *http.Response) error {
	vv, ok := r.Header["Trailer"]
	if !ok {
		return nil
	}
	delete(r.Header, "Trailer")
	trailer := make(http.Header)
	for _, v := range vv {
		for k := range strings.SplitSeq(v, ",") {
			k = textproto.TrimString(k)
			if k == "" {
				continue
			}
			k = http.CanonicalHeaderKey(k)
			switch k {
			case "Transfer-Encoding", "Trailer", "Content-Length":
				return fmt.Errorf("h1: bad trailer key %q", k)
			}
			trailer[k] = nil
		}
	}
	if len(trailer) > 0 {
		r.Trailer = trailer
	}
	return nil
}

// framing reads an answer's body from its connection's reader as the head
// framed it: a number of bytes, chunks, or everything up to the end.
type framing struct {
	br      *bufio.Reader
	left    int64     // bytes of a sized body still to come; -1: up to the end
	chunked io.Reader // the chunk decoder; nil when the body is not chunked
	trailer *http.Header
	err     error // sticky, io.EOF at the body's end
}

func (f *framing) Read(p []byte) (int, error) {
	if f.err != nil {
		return 0, f.err
	}
	var n int
	var err error
	switch {
	case f.chunked != nil:
		n, err = f.chunked.Read(p)
		if err == io.EOF {
			if terr := readTrailer(f.br, f.trailer); terr != nil {
				err = terr
			}
		}
	case f.left >= 0:
		if int64(len(p)) > f.left {
			p = p[:f.left]
		}
		n, err = f.br.Read(p)
		f.left -= int64(n)
		switch {
		case err == io.EOF && f.left > 0:
			err = io.ErrUnexpectedEOF
		case err == nil && f.left == 0:
			err = io.EOF // with the last bytes, to free the connection sooner
		}
	default:
		n, err = f.br.Read(p)
	}
	f.err = err
	return n, err
}

// Close ends the body's reads; the connection is the caller's to close
// (roundTrip puts the body, which does, in the framing's place).
func (f *framing) Close() error {
	if f.err == nil {
		f.err = errClosed
	}
	return nil
}

var errClosed = errors.New("h1: read on a closed body")

var errTrailerEOF = errors.New("h1: unexpected EOF reading trailer")

// readTrailer reads the trailer section after a chunked body's last
// chunk into *dst, as net/http: the section must end, with CRLF CRLF,
// within br's buffer.
func readTrailer(br *bufio.Reader, dst *http.Header) error {
	buf, err := br.Peek(2)
	if string(buf) == "\r\n" {
		_, _ = br.Discard(2)
		return nil
	}
	if len(buf) < 2 {
		return errTrailerEOF
	}
	if err != nil {
		return err
	}
	if !seeUpcomingDoubleCRLF(br) {
		return errors.New("h1: suspiciously long trailer after chunked body")
	}
	var scratch []byte
	s, n, err := readLines(br, &scratch, false)
	if err != nil {
		if err == io.ErrUnexpectedEOF {
			return errTrailerEOF
		}
		return err
	}
	h, err := parseFields(s, n, make([]string, n))
	if err != nil {
		return err
	}
	if *dst == nil {
		*dst = h
		return nil
	}
	for k, vv := range h {
		(*dst)[k] = vv
	}
	return nil
}

func seeUpcomingDoubleCRLF(br *bufio.Reader) bool {
	for size := 4; ; size++ {
		buf, err := br.Peek(size)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			return true
		}
		if err != nil {
			return false
		}
	}
}
