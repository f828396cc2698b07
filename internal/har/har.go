// Package har reads and writes HTTP Archives (HAR 1.2, the format of
// browsers' developer tools: "Save all as HAR") and replays them (SPEC 13).
// Replay is a RoundTripper that answers each request with the answer a
// HAR recorded for it and never opens a connection, so that a source's
// mapping can be tested offline against what its portal really sent.
//
// A HAR is foreign input (a file exported from a browser): Read bounds
// what it reads and keeps, and nothing in it can make the package panic.
package har

import (
	"encoding/base64"
	"io"
	"strconv"
	"strings"
)

// Version is the HAR version written.
const Version = "1.2"

// File is a whole HAR document.
type File struct {
	Log Log `json:"log"`
}

// Log is a HAR's log: who wrote it and its entries, in the order the
// requests were sent. Comment is free text; `aggregator sources check
// -record` writes there what it looked up.
type Log struct {
	Version string  `json:"version"`
	Creator Creator `json:"creator"`
	Entries []Entry `json:"entries"`
	Comment string  `json:"comment,omitempty"`
}

// Creator names the program that wrote a HAR.
type Creator struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Entry is one request and its answer.
type Entry struct {
	// StartedDateTime is when the request started, ISO 8601.
	StartedDateTime string `json:"startedDateTime"`
	// Time is the entry's duration in milliseconds.
	Time     float64  `json:"time"`
	Request  Request  `json:"request"`
	Response Response `json:"response"`
	Cache    struct{} `json:"cache"`
	Timings  Timings  `json:"timings"`
	Comment  string   `json:"comment,omitempty"`
}

// Request is a request as sent.
type Request struct {
	Method      string      `json:"method"`
	URL         string      `json:"url"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []Cookie    `json:"cookies"`
	Headers     []NameValue `json:"headers"`
	QueryString []NameValue `json:"queryString"`
	PostData    *PostData   `json:"postData,omitempty"`
	HeadersSize float64     `json:"headersSize"`
	BodySize    float64     `json:"bodySize"`
}

// PostData is a request's body: Text, or, as some browsers write a form,
// only its Params.
type PostData struct {
	MimeType string      `json:"mimeType"`
	Params   []NameValue `json:"params,omitempty"`
	Text     string      `json:"text"`
}

// Response is an answer as received. A Status of 0 is a request that got
// no answer (a browser's blocked or failed request, or a connection that
// failed while recording).
type Response struct {
	Status      int         `json:"status"`
	StatusText  string      `json:"statusText"`
	HTTPVersion string      `json:"httpVersion"`
	Cookies     []Cookie    `json:"cookies"`
	Headers     []NameValue `json:"headers"`
	Content     Content     `json:"content"`
	RedirectURL string      `json:"redirectURL"`
	HeadersSize float64     `json:"headersSize"`
	BodySize    float64     `json:"bodySize"`
	Comment     string      `json:"comment,omitempty"`
}

// Content is an answer's body. As HAR 1.2 says, Text is the body
// decompressed and transcoded to UTF-8, unless Encoding is "base64": then
// it is the body's very bytes, in base64.
type Content struct {
	Size     float64 `json:"size"`
	MimeType string  `json:"mimeType"`
	Text     string  `json:"text,omitempty"`
	Encoding string  `json:"encoding,omitempty"`
	Comment  string  `json:"comment,omitempty"`
}

// NameValue is a header, a query parameter or a form field.
type NameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Cookie is a cookie sent or set.
type Cookie struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Timings are an entry's phases in milliseconds; -1 is "does not apply".
type Timings struct {
	Blocked float64 `json:"blocked"`
	DNS     float64 `json:"dns"`
	Connect float64 `json:"connect"`
	Send    float64 `json:"send"`
	Wait    float64 `json:"wait"`
	Receive float64 `json:"receive"`
	SSL     float64 `json:"ssl"`
}

// Body is the Content of a body: its text when text says the body is UTF-8
// that reads as it is (its charset is UTF-8, or it is plain ASCII), else
// its bytes in base64, so that any other charset replays byte for byte.
func Body(b []byte, mimeType string, text bool) Content {
	c := Content{Size: float64(len(b)), MimeType: mimeType}
	switch {
	case len(b) == 0:
	case text:
		c.Text = string(b)
	default:
		c.Text, c.Encoding = base64.StdEncoding.EncodeToString(b), "base64"
	}
	return c
}

// Reader yields the body c holds, at most max bytes of it: base64 is
// decoded as it is read, so a large recorded body never sits decoded in
// memory whole. The error is for an encoding other than base64.
func (c Content) Reader(max int64) (io.Reader, error) {
	var r io.Reader = strings.NewReader(c.Text)
	switch {
	case c.Encoding == "":
	case strings.EqualFold(c.Encoding, "base64"):
		r = base64.NewDecoder(base64.StdEncoding, strings.NewReader(strings.TrimSpace(c.Text)))
	default:
		return nil, &EncodingError{c.Encoding}
	}
	return io.LimitReader(r, max), nil
}

// EncodingError is a content encoding that the package does not know.
type EncodingError struct{ Encoding string }

func (e *EncodingError) Error() string {
	return "content encoding " + quote(e.Encoding) + " is not base64"
}

// quote is s for a message: quoted, and cut when long.
func quote(s string) string {
	const max = 60
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "") + "…"
	}
	return strconv.Quote(s)
}
