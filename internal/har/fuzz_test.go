package har

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A HAR is foreign input: whatever it holds, reading it and replaying
// requests against it never panics, and no body served is longer than
// Options.MaxBody+1.
func FuzzReplay(f *testing.F) {
	f.Add(`{"log": {"entries": [{"request": {"method": "GET", "url": "https://p.example/a?x=1"}, "response": {"status": 200, "content": {"text": "{}"}}}]}}`)
	f.Add(`{"log": {"entries": [{"request": {"method": "POST", "url": "/a", "postData": {"mimeType": "application/json", "text": "{\"k\": \"***\"}"}},
		"response": {"status": 302, "headers": [{"name": "Location", "value": "https://p.example/b"}], "content": {"text": "AAAA", "encoding": "base64"}}}]}}`)
	f.Add(`{"log": {"entries": [{"request": {"method": "POST", "url": "https://p.example/f", "postData": {"mimeType": "application/x-www-form-urlencoded", "params": [{"name": "a", "value": "***"}]}},
		"response": {"status": 200, "content": {"text": "!!!", "encoding": "BASE64"}}}]}, "comment": "x"}`)
	f.Add(`{"log": {"entries": [{"request": {"method": "GET", "url": "https://p.example/***/***?***=***"}, "response": {"status": 0}}]}}`)
	f.Fuzz(func(t *testing.T, doc string) {
		h, err := Read(strings.NewReader(doc))
		if err != nil {
			return
		}
		const maxBody = 64
		r := NewReplay(h, Options{MaxBody: maxBody})
		for _, req := range []struct{ method, url, ctype, body string }{
			{"GET", "https://p.example/a?x=1", "", ""},
			{"POST", "https://p.example/a", "application/json", `{"k": "v"}`},
			{"POST", "https://p.example/f", "application/x-www-form-urlencoded", "a=1&b=2"},
			{"GET", "https://p.example/s/%2A%2A%2A/x?y=%2A%2A%2A", "", ""},
		} {
			var body io.Reader
			if req.body != "" {
				body = strings.NewReader(req.body)
			}
			hr, err := http.NewRequest(req.method, req.url, body)
			if err != nil {
				t.Fatal(err)
			}
			hr.Header.Set("Content-Type", req.ctype)
			resp, err := r.RoundTrip(hr)
			if err != nil {
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			if len(b) > maxBody+1 {
				t.Fatalf("a body of %d bytes served, over %d", len(b), maxBody+1)
			}
		}
	})
}
