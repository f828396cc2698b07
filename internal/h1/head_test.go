package h1

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

// answerCases are answers as portals send them, and as broken or hostile
// ones do, with what reading them must give: TestReadAnswer's cases and
// FuzzReadHead's seeds.
var answerCases = []struct {
	name, in string
	head     bool   // the request is a HEAD
	err      string // in the head's error; "" when it is accepted
	body     string
	bodyErr  error // reading the body; nil: none
	check    func(*http.Response) string
}{
	{name: "sized", in: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\nok", body: "ok", check: func(r *http.Response) string {
		if r.ContentLength != 2 || r.Close || r.Header.Get("Content-Type") != "application/json" || r.Status != "200 OK" {
			return "wrong head"
		}
		return ""
	}},
	{name: "chunked", in: "HTTP/1.1 200 OK\r\nDate: Wed, 02 Dec 2026 15:00:00 GMT\r\nServer: nginx\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nhel\r\n2\r\nlo\r\n0\r\n\r\n", body: "hello", check: func(r *http.Response) string {
		if r.ContentLength != -1 || len(r.TransferEncoding) != 1 || r.Header.Get("Transfer-Encoding") != "" {
			return "wrong framing"
		}
		return ""
	}},
	{name: "declared trailer", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum, Expires\r\n\r\n2\r\nok\r\n0\r\nX-Checksum: abc\r\n\r\n", body: "ok", check: func(r *http.Response) string {
		if r.Trailer.Get("X-Checksum") != "abc" || r.Header.Get("Trailer") != "" {
			return "trailer lost"
		}
		return ""
	}},
	{name: "bad trailer key", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: Content-Length\r\n\r\n0\r\n\r\n", err: "bad trailer key"},
	{name: "chunk lines with bare LF", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\nok\n0\n\n", bodyErr: errAny},
	{name: "gzip transfer coding", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", err: "unsupported transfer encoding"},
	{name: "transfer coding twice", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", err: "too many transfer encodings"},
	{name: "identity transfer coding", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: identity\r\n\r\nok", err: "unsupported transfer encoding"},
	{name: "HTTP/1.0 ignores Transfer-Encoding", in: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", body: "2\r\nok\r\n0\r\n\r\n", check: closes},
	{name: "HTTP/1.0 closes", in: "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", body: "ok", check: closes},
	{name: "HTTP/1.0 keep-alive", in: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", body: "ok", check: func(r *http.Response) string {
		if r.Close {
			return "closes"
		}
		return ""
	}},
	{name: "unsized", in: "HTTP/1.1 200 OK\r\n\r\nuntil the end", body: "until the end", check: closes},
	{name: "Connection: close", in: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbye", body: "bye", check: func(r *http.Response) string {
		if !r.Close || r.Header.Get("Connection") != "" {
			return "wrong Connection"
		}
		return ""
	}},
	{name: "short body", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc", body: "abc", bodyErr: io.ErrUnexpectedEOF},
	{name: "Content-Length twice, the same", in: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok", body: "ok"},
	{name: "Content-Length twice, differing", in: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok!", err: "multiple Content-Length headers"},
	{name: "Content-Length list", in: "HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok", err: "bad Content-Length"},
	{name: "Content-Length negative", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: "bad Content-Length"},
	{name: "Content-Length signed", in: "HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok", err: "bad Content-Length"},
	{name: "Content-Length empty", in: "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n", err: "invalid empty Content-Length"},
	{name: "Content-Length too large", in: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", err: "bad Content-Length"},
	{name: "bare LF", in: "HTTP/1.1 200 OK\nContent-Type: text/plain\nContent-Length: 2\n\nok", body: "ok"},
	{name: "folded", in: "HTTP/1.1 200 OK\r\nX-Folded: first\r\n  second\r\n\tthird\r\nContent-Length: 0\r\n\r\n", check: func(r *http.Response) string {
		if v := r.Header.Get("X-Folded"); v != "first second third" {
			return v
		}
		return ""
	}},
	{name: "folded first line", in: "HTTP/1.1 200 OK\r\n folded-first: x\r\n\r\n", err: "malformed MIME header initial line"},
	{name: "space before colon", in: "HTTP/1.1 200 OK\r\nContent-Length : 2\r\n\r\nok", err: "malformed MIME header line"},
	{name: "space in name", in: "HTTP/1.1 200 OK\r\nX Bad: 1\r\n\r\n", err: "malformed MIME header line"},
	{name: "empty name", in: "HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", err: "malformed MIME header line"},
	{name: "no colon", in: "HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n", err: "missing colon"},
	{name: "control byte", in: "HTTP/1.1 200 OK\r\nX-Ctl: a\x01b\r\n\r\n", err: "malformed MIME header line"},
	{name: "bare CR", in: "HTTP/1.1 200 OK\r\nX-Cr: a\rb\r\n\r\n", err: "malformed MIME header line"},
	{name: "obs-text", in: "HTTP/1.1 200 OK\r\nX-Obs: caf\xe9\r\n\r\n"},
	{name: "keys canonicalised", in: "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nx-ratelimit-remaining: 9\r\nRETRY-AFTER: 5\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\ncontent-length: 0\r\n\r\n", check: func(r *http.Response) string {
		if r.Header.Get("X-Ratelimit-Remaining") != "9" || r.Header.Get("Retry-After") != "5" || len(r.Header["Set-Cookie"]) != 2 {
			return "keys"
		}
		return ""
	}},
	{name: "long line", in: "HTTP/1.1 200 OK\r\nX-Huge: " + strings.Repeat("v", 10000) + "\r\nContent-Length: 0\r\n\r\n"},
	{name: "Pragma", in: "HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n", check: func(r *http.Response) string {
		if r.Header.Get("Cache-Control") != "no-cache" {
			return "no Cache-Control"
		}
		return ""
	}},
	{name: "1xx first", in: "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", body: "ok"},
	{name: "204 with a length", in: "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n", check: func(r *http.Response) string {
		if r.StatusCode != 204 || r.Body != http.NoBody || r.ContentLength != 0 {
			return "a body"
		}
		return ""
	}},
	{name: "HEAD", in: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\nok", head: true, check: func(r *http.Response) string {
		if r.Body != http.NoBody || r.ContentLength != 2 {
			return "a body"
		}
		return ""
	}},
	{name: "no reason", in: "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n"},
	{name: "signed code", in: "HTTP/1.1 +20 OK\r\nContent-Length: 0\r\n\r\n", err: "malformed HTTP status code"},
	{name: "long code", in: "HTTP/1.1 2000 OK\r\n\r\n", err: "malformed HTTP status code"},
	{name: "letters for a code", in: "HTTP/1.1 abc OK\r\n\r\n", err: "malformed HTTP status code"},
	{name: "HTTP/2.0", in: "HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n", err: "malformed HTTP version"},
	{name: "HTTP/1.2", in: "HTTP/1.2 200 OK\r\nContent-Length: 0\r\n\r\n", err: "malformed HTTP version"},
	{name: "no status", in: "HTTP/1.1\r\n\r\n", err: "malformed HTTP response"},
	{name: "not HTTP", in: "SSH-2.0-OpenSSH\r\n\r\n", err: "malformed HTTP"},
	{name: "unended head", in: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n", err: io.ErrUnexpectedEOF.Error()},
	{name: "nothing", in: "", err: io.ErrUnexpectedEOF.Error()},
	{name: "too many 1xx", in: strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", 6) + "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\nok", err: "too many 1xx"},
}

// moreHeads are more of FuzzReadHead's seeds.
var moreHeads = []string{
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Late: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 10\r\n\r\n2\r\nok\r\n0\r\n\r\n",
	"HTTP/1.0 200 OK\r\n\r\nuntil the end",
	"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX-Folded:\r\n \r\n next\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 30\r\nRateLimit-Remaining: 0\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1  200  OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 200 OK",
	"",
}

// readLikeTransport reads an answer with net/http's ReadResponse as
// roundTrip did before it had a parser of its own, and reports whether
// some head on the way had something this package refuses on purpose.
func readLikeTransport(br *bufio.Reader, req *http.Request) (resp *http.Response, deliberate bool, err error) {
	for n := 0; ; n++ {
		resp, err = http.ReadResponse(br, req)
		if err != nil {
			return nil, deliberate, err
		}
		deliberate = deliberate || refusedOnPurpose(resp, resp.Header)
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, deliberate, nil
		}
		if n == max1xx {
			return nil, deliberate, errors.New("too many 1xx")
		}
	}
}

// refusedOnPurpose reports whether net/http accepted r with what head.go
// refuses on purpose (see there): a version other than HTTP/1.0 and 1.1,
// a status code that is not three digits, a field name with a space.
func refusedOnPurpose(r *http.Response, h http.Header) bool {
	if r != nil {
		if r.Proto != "HTTP/1.0" && r.Proto != "HTTP/1.1" {
			return true
		}
		if code, _, _ := strings.Cut(r.Status, " "); len(code) != 3 || strings.Trim(code, "0123456789") != "" {
			return true
		}
	}
	for k := range h {
		if strings.ContainsAny(k, " ") {
			return true
		}
	}
	return false
}

// FuzzReadHead feeds the same bytes to this package's parser and to
// net/http's ReadResponse, as an answer to a GET or a HEAD: they must
// agree on refusing them, or on everything the transport's callers see.
func FuzzReadHead(f *testing.F) {
	for _, tc := range answerCases {
		f.Add([]byte(tc.in), tc.head)
	}
	for _, h := range moreHeads {
		f.Add([]byte(h), false)
		f.Add([]byte(h), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, head bool) {
		method := http.MethodGet
		if head {
			method = http.MethodHead
		}
		req, _ := http.NewRequest(method, "http://portal.test/", nil)
		var buf []byte
		a, err := readAnswer(bufio.NewReaderSize(bytes.NewReader(in), 4<<10), req, &buf)
		want, deliberate, werr := readLikeTransport(bufio.NewReaderSize(bytes.NewReader(in), 4<<10), req)
		switch {
		case err != nil && werr != nil:
			return
		case err != nil && deliberate:
			return
		case err != nil:
			t.Fatalf("refused what net/http accepts: %v", err)
		case werr != nil:
			t.Fatalf("accepted what net/http refuses (%v): %+v", werr, a.resp)
		}
		got := &a.resp
		if got.StatusCode != want.StatusCode || got.Status != want.Status || got.Proto != want.Proto ||
			got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor {
			t.Errorf("status %d %q %q %d.%d, net/http's %d %q %q %d.%d", got.StatusCode, got.Status, got.Proto, got.ProtoMajor, got.ProtoMinor,
				want.StatusCode, want.Status, want.Proto, want.ProtoMajor, want.ProtoMinor)
		}
		if !reflect.DeepEqual(got.Header, want.Header) {
			t.Errorf("header %q, net/http's %q", got.Header, want.Header)
		}
		if got.ContentLength != want.ContentLength || got.Close != want.Close ||
			!reflect.DeepEqual(got.TransferEncoding, want.TransferEncoding) {
			t.Errorf("length %d close %v %q, net/http's %d %v %q", got.ContentLength, got.Close, got.TransferEncoding,
				want.ContentLength, want.Close, want.TransferEncoding)
		}
		if !reflect.DeepEqual(got.Trailer, want.Trailer) {
			t.Errorf("declared trailer %q, net/http's %q", got.Trailer, want.Trailer)
		}
		if (got.Body == http.NoBody) != (want.Body == http.NoBody) {
			t.Errorf("no body %v, net/http's %v", got.Body == http.NoBody, want.Body == http.NoBody)
		}
		b, err := io.ReadAll(got.Body)
		wb, werr := io.ReadAll(want.Body)
		switch {
		case err != nil && werr != nil:
			return
		case err != nil && refusedOnPurpose(nil, want.Trailer):
			return
		case (err == nil) != (werr == nil):
			t.Fatalf("body error %v, net/http's %v", err, werr)
		}
		if !bytes.Equal(b, wb) {
			t.Errorf("body %q, net/http's %q", b, wb)
		}
		if !reflect.DeepEqual(got.Trailer, want.Trailer) {
			t.Errorf("trailer %q, net/http's %q", got.Trailer, want.Trailer)
		}
	})
}

// Every head of the seeds is taken or refused as expected, with the
// errors net/http would give, and gives the body it frames.
func TestReadAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range answerCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			method := http.MethodGet
			if tc.head {
				method = http.MethodHead
			}
			req, _ := http.NewRequest(method, "http://portal.test/", nil)
			var buf []byte
			a, err := readAnswer(bufio.NewReader(strings.NewReader(tc.in)), req, &buf)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(a.resp.Body)
			switch {
			case tc.bodyErr == errAny && err == nil, tc.bodyErr != errAny && !errors.Is(err, tc.bodyErr):
				t.Errorf("body error %v, want %v", err, tc.bodyErr)
			case string(b) != tc.body:
				t.Errorf("body %q, want %q", b, tc.body)
			}
			if tc.check != nil {
				if msg := tc.check(&a.resp); msg != "" {
					t.Errorf("%s: %+v", msg, a.resp)
				}
			}
		})
	}
}

// errAny stands for any error in TestReadAnswer's cases.
var errAny = errors.New("any error")

func closes(r *http.Response) string {
	if !r.Close {
		return "keeps the connection"
	}
	return ""
}

// A common answer's head costs four allocations: its string, the
// header's map and its slots, and the Response with its body.
func TestReadAnswerAllocs(t *testing.T) {
	in := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ndate: Wed, 02 Dec 2026 15:00:00 GMT\r\nContent-Length: 2\r\n\r\nok"
	req, _ := http.NewRequest(http.MethodGet, "http://portal.test/", nil)
	sr := strings.NewReader(in)
	br := bufio.NewReader(sr)
	var buf []byte
	allocs := testing.AllocsPerRun(100, func() {
		sr.Reset(in)
		br.Reset(sr)
		a, err := readAnswer(br, req, &buf)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, a.resp.Body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 4 {
		t.Errorf("%v allocations a head, want 4", allocs)
	}
}

// TestHeadErrorsQuoteNoValue: a refused head's error names what is wrong,
// never the portal's text, which may hold a plate (the errors are logged).
func TestHeadErrorsQuoteNoValue(t *testing.T) {
	t.Parallel()
	const plate = "AB123CD"
	for _, in := range []string{
		"HTTP/1.1\r\n\r\n" + plate,
		"HTTP/1.1 2" + plate + " OK\r\n\r\n",
		"HTTP/1.1 200 OK\r\n " + plate + "\r\n\r\n",
		"HTTP/1.1 200 OK\r\nDominio " + plate + "\r\n\r\n",
		"HTTP/1.1 200 OK\r\nDominio " + plate + ": x\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX-Dominio: " + plate + "\x01\r\n\r\n",
		plate + " 200 OK\r\n\r\n",
	} {
		req := &http.Request{Method: http.MethodGet}
		var buf []byte
		_, err := readAnswer(bufio.NewReader(strings.NewReader(in)), req, &buf)
		if err == nil || strings.Contains(err.Error(), plate) {
			t.Errorf("%q: error %v, want one that does not quote the plate", in, err)
		}
	}
}
