package har

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/text/encoding/charmap"
)

// entry is a recorded GET or POST answered 200 with body.
func entry(method, rawURL, mimeType, postText, body string) Entry {
	e := Entry{Request: Request{Method: method, URL: rawURL},
		Response: Response{Status: 200, StatusText: "OK", Content: Content{MimeType: "application/json", Text: body}}}
	if mimeType != "" || postText != "" {
		e.Request.PostData = &PostData{MimeType: mimeType, Text: postText}
	}
	return e
}

// do sends a request through rt.
func do(t *testing.T, rt http.RoundTripper, method, rawURL, contentType, body string) (*http.Response, error) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, rawURL, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer whatever") // headers are not compared
	return rt.RoundTrip(req)
}

// The matching rules: method, path, query in any order, body by its media
// type; *** on either side matches anything; host, scheme and headers are
// not compared.
func TestMatch(t *testing.T) {
	t.Parallel()
	const form = "application/x-www-form-urlencoded"
	tests := []struct {
		name                        string
		rec                         Entry
		method, url, ctype, reqBody string
		want                        string // "" for a match, else Miss.Reason's start
	}{
		{"same", entry("GET", "https://p.example/actas?dominio=AB123CD", "", "", "{}"),
			"GET", "http://127.0.0.1:9/actas?dominio=AB123CD", "", "", ""},
		{"other host and scheme", entry("GET", "http://10.0.0.1:8080/actas", "", "", "{}"),
			"GET", "https://p.example/actas", "", "", ""},
		{"query in another order", entry("GET", "https://p.example/a?x=1&y=2&y=3", "", "", "{}"),
			"GET", "https://p.example/a?y=3&x=1&y=2", "", "", ""},
		{"query escaped otherwise", entry("GET", "https://p.example/a?q=a+b&c=%C3%B3", "", "", "{}"),
			"GET", "https://p.example/a?c=ó&q=a%20b", "", "", ""},
		{"query value differs", entry("GET", "https://p.example/a?d=AB123CD", "", "", "{}"),
			"GET", "https://p.example/a?d=AC456DE", "", "", "1 entry of this method and path, but the query differs"},
		{"a parameter more", entry("GET", "https://p.example/a?d=1", "", "", "{}"),
			"GET", "https://p.example/a?d=1&e=2", "", "", "1 entry of this method and path, but the query"},
		{"method", entry("POST", "https://p.example/a", "", "", "{}"),
			"GET", "https://p.example/a", "", "", "no entry has this method and path"},
		{"method case", entry("get", "https://p.example/a", "", "", "{}"),
			"GET", "https://p.example/a", "", "", ""},
		{"path", entry("GET", "https://p.example/a/b", "", "", "{}"),
			"GET", "https://p.example/a/c", "", "", "no entry has this method and path"},
		{"masked path segment", entry("GET", "https://p.example/s/***/actas", "", "", "{}"),
			"GET", "https://p.example/s/abc%2Fdef/actas", "", "", ""},
		{"masked in the request", entry("GET", "https://p.example/s/real-token/actas?k=real", "", "", "{}"),
			"GET", "https://p.example/s/%2A%2A%2A/actas?k=%2A%2A%2A", "", "", ""},
		{"masked inside a value", entry("GET", "https://p.example/a?auth=Bearer%20***", "", "", "{}"),
			"GET", "https://p.example/a?auth=Bearer%20t0k3n", "", "", ""},
		{"masked, yet the rest differs", entry("GET", "https://p.example/a?auth=Bearer%20***", "", "", "{}"),
			"GET", "https://p.example/a?auth=Basic%20t0k3n", "", "", "1 entry of this method and path, but the query"},
		{"form in another order", entry("POST", "https://p.example/c", form, "tipo=P&dominio=AB123CD", "{}"),
			"POST", "https://p.example/c", form, "dominio=AB123CD&tipo=P", ""},
		{"form as params", Entry{Request: Request{Method: "POST", URL: "https://p.example/c",
			PostData: &PostData{MimeType: form, Params: []NameValue{{"tipo", "P"}, {"dominio", "AB123CD"}}}},
			Response: Response{Status: 200}}, "POST", "https://p.example/c", form, "dominio=AB123CD&tipo=P", ""},
		{"form value differs", entry("POST", "https://p.example/c", form, "dominio=AB123CD", "{}"),
			"POST", "https://p.example/c", form, "dominio=AB999CD", "1 entry of this method and path, but the body differs"},
		{"masked form value", entry("POST", "https://p.example/t", form, "grant_type=***&scope=***", "{}"),
			"POST", "https://p.example/t", form, "scope=actas.read&grant_type=client_credentials", ""},
		{"json members in another order", entry("POST", "https://p.example/j", "application/json", `{"a": 1, "b": {"c": "x", "d": [1, 2]}}`, "{}"),
			"POST", "https://p.example/j", "application/json", `{"b":{"d":[1,2.0],"c":"x"},"a":1}`, ""},
		{"json masked value", entry("POST", "https://p.example/j", "application/json", `{"key": "***", "d": "AB123CD"}`, "{}"),
			"POST", "https://p.example/j", "application/json", `{"d":"AB123CD","key":12345}`, ""},
		{"json array order", entry("POST", "https://p.example/j", "application/json", `[1, 2]`, "{}"),
			"POST", "https://p.example/j", "application/json", `[2, 1]`, "1 entry of this method and path, but the body"},
		{"body masked whole", entry("POST", "https://p.example/s", "text/xml", "***", "{}"),
			"POST", "https://p.example/s", "text/xml; charset=utf-8", "<Envelope><token>x</token></Envelope>", ""},
		{"text body", entry("POST", "https://p.example/s", "text/xml", "<d>AB123CD</d>", "{}"),
			"POST", "https://p.example/s", "text/xml", "<d>AB123CD</d>", ""},
		{"text body differs", entry("POST", "https://p.example/s", "text/xml", "<d>AB123CD</d>", "{}"),
			"POST", "https://p.example/s", "text/xml", "<d>AC456DE</d>", "1 entry of this method and path, but the body"},
		{"no body recorded, one sent", entry("POST", "https://p.example/s", "", "", "{}"),
			"POST", "https://p.example/s", "text/plain", "x", "1 entry of this method and path, but the body"},
		{"an entry that does not parse", entry("GET", "http://[::1", "", "", "{}"),
			"GET", "https://p.example/", "", "", "no entry"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := NewReplay(&File{Log: Log{Entries: []Entry{tt.rec}}}, Options{})
			resp, err := do(t, r, tt.method, tt.url, tt.ctype, tt.reqBody)
			misses := r.Misses()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("no match: %v %+v", err, misses)
			case tt.want == "":
				resp.Body.Close()
			case err == nil:
				t.Errorf("matched, want %q", tt.want)
			case len(misses) != 1 || !strings.HasPrefix(misses[0].Reason, tt.want):
				t.Errorf("misses %+v, want one whose reason starts %q", misses, tt.want)
			default:
				var na *NoAnswerError
				if !errors.As(err, &na) {
					t.Errorf("error %v is no NoAnswerError", err)
				}
			}
		})
	}
}

// Equal requests take the recorded answers in order; once they are used,
// the next one has none. Entries that match nothing are left alone.
func TestReplayOrder(t *testing.T) {
	t.Parallel()
	f := &File{Log: Log{Entries: []Entry{
		entry("GET", "https://analytics.example/collect?v=1", "", "", "x"),
		entry("GET", "https://p.example/a", "", "", `"first"`),
		entry("GET", "https://p.example/b", "", "", `"other"`),
		entry("GET", "https://p.example/a", "", "", `"second"`),
	}}}
	r := NewReplay(f, Options{})
	for _, want := range []string{`"first"`, `"second"`} {
		resp, err := do(t, r, "GET", "https://p.example/a", "", "")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != want {
			t.Errorf("got %s, want %s", b, want)
		}
	}
	if _, err := do(t, r, "GET", "https://p.example/a", "", ""); err == nil {
		t.Fatal("a third request was answered")
	}
	if m := r.Misses(); len(m) != 1 || m[0].Reason != "the 2 answers recorded for it were used already" || m[0].URL != "https://p.example/a" {
		t.Errorf("misses %+v", m)
	}
}

// What a replayed answer carries: the recorded status, headers and body,
// byte for byte when base64, the request's origin in place of the
// recorded one, text labelled UTF-8 (or encoded back into a configured
// charset), no transfer headers; no answer recorded fails as a connection.
func TestReplayAnswer(t *testing.T) {
	t.Parallel()
	win := []byte("<p>C\xf3rdoba</p>") // windows-1252
	tests := []struct {
		name     string
		resp     Response
		opts     Options
		wantCT   string
		wantBody string
		wantHdr  map[string]string
		wantErr  error
	}{
		{"base64 byte for byte", Response{Status: 200, Headers: []NameValue{{"Content-Type", "text/html; charset=windows-1252"}},
			Content: Body(win, "text/html", false)}, Options{}, "text/html; charset=windows-1252", string(win), nil, nil},
		{"text is UTF-8, labelled so", Response{Status: 200, Headers: []NameValue{{"content-type", "text/html; charset=windows-1252"}},
			Content: Content{Text: "<p>Córdoba</p>"}}, Options{}, "text/html; charset=utf-8", "<p>Córdoba</p>", nil, nil},
		{"ASCII text keeps its label", Response{Status: 200, Headers: []NameValue{{"Content-Type", "text/html; charset=windows-1252"}},
			Content: Content{Text: "<p>Cordoba</p>"}}, Options{}, "text/html; charset=windows-1252", "<p>Cordoba</p>", nil, nil},
		{"text encoded back", Response{Status: 200, Headers: []NameValue{{"Content-Type", "text/html"}},
			Content: Content{Text: "<p>Córdoba</p>"}}, Options{Encoding: charmap.Windows1252}, "text/html", string(win), nil, nil},
		{"mime type without a header", Response{Status: 200, Content: Content{MimeType: "application/json", Text: "{}"}},
			Options{}, "application/json", "{}", nil, nil},
		{"origin replaced", Response{Status: 302, Headers: []NameValue{{"Location", "http://rec.example:8080/next?p=2"},
			{"Link", `<http://rec.example:8080/p/3>; rel="next"`}, {"Content-Encoding", "gzip"}, {"Content-Length", "999"}, {":status", "302"}},
			Content: Content{MimeType: "application/json", Text: `{"next": "http://rec.example:8080/p/2", "esc": "http:\/\/rec.example:8080\/p"}`}},
			Options{}, "application/json", `{"next": "https://replay.example/p/2", "esc": "https:\/\/replay.example\/p"}`,
			map[string]string{"Location": "https://replay.example/next?p=2", "Link": `<https://replay.example/p/3>; rel="next"`, "Content-Encoding": "", "Content-Length": ""}, nil},
		{"cut after MaxBody+1", Response{Status: 200, Content: Content{Text: "0123456789"}}, Options{MaxBody: 4}, "", "01234", nil, nil},
		{"no answer recorded", Response{Status: 0}, Options{}, "", "", nil, ErrNoAnswer},
		{"unknown encoding", Response{Status: 200, Content: Content{Text: "x", Encoding: "quoted-printable"}}, Options{}, "", "", nil, &EncodingError{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := &File{Log: Log{Entries: []Entry{{Request: Request{Method: "GET", URL: "http://rec.example:8080/a"}, Response: tt.resp}}}}
			resp, err := do(t, NewReplay(f, tt.opts), "GET", "https://replay.example/a", "", "")
			if tt.wantErr != nil {
				var ee *EncodingError
				if !errors.Is(err, tt.wantErr) && !(errors.As(tt.wantErr, &ee) && errors.As(err, &ee)) {
					t.Errorf("error %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			if string(b) != tt.wantBody {
				t.Errorf("body %q, want %q", b, tt.wantBody)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.wantCT {
				t.Errorf("Content-Type %q, want %q", got, tt.wantCT)
			}
			for k, v := range tt.wantHdr {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s: %q, want %q", k, got, v)
				}
			}
			if resp.StatusCode != tt.resp.Status || !strings.HasPrefix(resp.Status, strconv.Itoa(tt.resp.Status)+" ") {
				t.Errorf("status %d %q", resp.StatusCode, resp.Status)
			}
		})
	}
}

// Read takes what browsers write and refuses what is not a HAR, or too
// much of one, saying why without quoting it.
func TestRead(t *testing.T) {
	t.Parallel()
	many := `{"log": {"entries": [` + strings.Repeat(`{},`, MaxEntries) + `{}]}}`
	tests := []struct {
		name, in string
		want     string // "" for success, else part of the error
		entries  int
	}{
		{"chrome", `{"log": {"version": "1.2", "creator": {"name": "WebInspector", "version": "537.36"}, "pages": [{"id": "page_1"}],
			"entries": [{"_initiator": {"type": "script"}, "_priority": "High", "startedDateTime": "2026-03-14T12:00:00.000Z", "time": 12.5,
			"request": {"method": "GET", "url": "https://p.example/a", "httpVersion": "http/2.0", "headers": [{"name": ":authority", "value": "p.example"}],
			"queryString": [], "cookies": [], "headersSize": -1, "bodySize": 0},
			"response": {"status": 200, "statusText": "", "httpVersion": "http/2.0", "headers": [], "cookies": [],
			"content": {"size": 2, "mimeType": "application/json", "text": "{}"}, "redirectURL": "", "headersSize": -1, "bodySize": -1,
			"_transferSize": 120, "_error": null}, "cache": {}, "timings": {"blocked": 1.2, "dns": -1, "ssl": -1, "connect": -1, "send": 0.1, "wait": 10, "receive": 1.2}}]}}`,
			"", 1},
		{"empty entries", `{"log": {"entries": []}}`, "", 0},
		{"no entries", `{"log": {"version": "1.2"}}`, "no log.entries", 0},
		{"an array", `[]`, "not a HAR", 0},
		{"cut short", `{"log": {"entries": [{"request": `, "ends early", 0},
		{"trailing data", `{"log": {"entries": []}} {}`, "data after", 0},
		{"a wrong type", `{"log": {"entries": [{"response": {"status": "200"}}]}}`, "entry 0: response.status is a JSON string", 0},
		{"a key that is no string", `{"log": {1: 2}}`, "not a HAR", 0},
		{"too many entries", many, "more than 20000 entries", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f, err := Read(strings.NewReader(tt.in))
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Read: %v", err)
			case tt.want == "":
				if len(f.Log.Entries) != tt.entries {
					t.Errorf("%d entries, want %d", len(f.Log.Entries), tt.entries)
				}
			case err == nil || !strings.Contains(err.Error(), tt.want):
				t.Errorf("error %v, want one with %q", err, tt.want)
			}
		})
	}
}

// A file over MaxFileBytes is refused once that much is read.
func TestReadTooLarge(t *testing.T) {
	t.Parallel()
	r := io.MultiReader(strings.NewReader(`{"log": {"entries": [], "comment": "`), endless('a'))
	if _, err := Read(r); !errors.Is(err, ErrTooLarge) {
		t.Errorf("error %v, want ErrTooLarge", err)
	}
}

// endless yields c for ever.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// What Write writes, Read reads back, bodies byte for byte.
func TestWriteRead(t *testing.T) {
	t.Parallel()
	body := []byte("\xff\xfe binary <&>")
	f := &File{Log: Log{Version: Version, Creator: Creator{Name: "aggregator", Version: "test"}, Comment: "c",
		Entries: []Entry{{Request: Request{Method: "GET", URL: "https://p.example/a?b=<c>"}, Response: Response{Status: 200, Content: Body(body, "application/octet-stream", false)}}}}}
	var buf bytes.Buffer
	if err := Write(&buf, f); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"cookies": []`, `"headers": []`, `"queryString": []`, `"encoding": "base64"`, `b=<c>`} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("written HAR lacks %s:\n%s", want, buf.String())
		}
	}
	g, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	rd, err := g.Log.Entries[0].Response.Content.Reader(100)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := io.ReadAll(rd); !bytes.Equal(got, body) || g.Log.Comment != "c" {
		t.Errorf("read back %q, comment %q", got, g.Log.Comment)
	}
}
