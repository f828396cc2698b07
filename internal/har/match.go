package har

import (
	"bytes"
	"encoding/json"
	"errors"
	"mime"
	"net/url"
	"strconv"
	"strings"
)

// Wildcard is how a HAR writes a masked value (a token, a session value,
// a credential): where it stands, on either side, any text matches.
const Wildcard = "***"

// maxPairs bounds the parameters of a query or a form that are compared:
// more do not match (the comparison of two such lists is quadratic).
const maxPairs = 1000

// key is what a request is matched by: its method, its path (decoded),
// its query's parameters (decoded, in any order) and its body. Headers,
// the scheme and the host are not.
type key struct {
	method, path string
	query        []pair
	queryOK      bool // the query had at most maxPairs parameters
	body         []byte
	params       []pair // a recorded form given as parameters, not text
	mediaType    string // the body's, lower case, without parameters
}

// pair is one decoded parameter.
type pair struct{ name, value string }

// entryKey is the key of a recorded request; ok is false for one that
// cannot match anything (no method, a URL that does not parse).
func entryKey(r Request) (key, bool) {
	u, err := url.Parse(r.URL)
	if err != nil || r.Method == "" {
		return key{}, false
	}
	k := key{method: r.Method, path: decodedPath(u)}
	if u.RawQuery != "" || u.ForceQuery || len(r.QueryString) == 0 {
		k.query, k.queryOK = parsePairs(u.RawQuery)
	} else {
		// A tool that wrote the parameters apart from the URL.
		k.queryOK = len(r.QueryString) <= maxPairs
		for _, nv := range r.QueryString[:min(len(r.QueryString), maxPairs)] {
			k.query = append(k.query, pair{nv.Name, nv.Value})
		}
	}
	if pd := r.PostData; pd != nil {
		k.body, k.mediaType = []byte(pd.Text), mediaType(pd.MimeType)
		if pd.Text == "" {
			for _, nv := range pd.Params[:min(len(pd.Params), maxPairs+1)] {
				k.params = append(k.params, pair{nv.Name, nv.Value})
			}
		}
	}
	return k, true
}

// requestKey is the key of a request being made.
func requestKey(method string, u *url.URL, body []byte, contentType string) key {
	k := key{method: method, path: decodedPath(u), body: body, mediaType: mediaType(contentType)}
	k.query, k.queryOK = parsePairs(u.RawQuery)
	return k
}

// decodedPath is u's path, percent-decoded ("/" when empty).
func decodedPath(u *url.URL) string {
	p := u.EscapedPath()
	if d, err := url.PathUnescape(p); err == nil {
		p = d
	}
	if p == "" {
		p = "/"
	}
	return p
}

// mediaType is a Content-Type's media type, lower case ("" when none).
func mediaType(contentType string) string {
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		return mt
	}
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// parsePairs decodes an application/x-www-form-urlencoded text, each
// part as well as it decodes; ok is false past maxPairs parameters.
func parsePairs(raw string) ([]pair, bool) {
	if raw == "" {
		return nil, true
	}
	var out []pair
	for part := range strings.SplitSeq(raw, "&") {
		if part == "" {
			continue
		}
		if len(out) == maxPairs {
			return out, false
		}
		name, value, _ := strings.Cut(part, "=")
		out = append(out, pair{unescape(name), unescape(value)})
	}
	return out, true
}

// unescape is s query-unescaped, or s when it does not unescape.
func unescape(s string) string {
	if d, err := url.QueryUnescape(s); err == nil {
		return d
	}
	return s
}

// mismatch says what a recorded request differs from a request in: ""
// when it matches, else "method", "path", "query" or "body".
func (rec key) mismatch(req key) string {
	switch {
	case !strings.EqualFold(rec.method, req.method):
		return "method"
	case !glob(rec.path, req.path):
		return "path"
	case !rec.queryOK || !req.queryOK || !samePairs(rec.query, req.query):
		return "query"
	case !sameBody(rec, req):
		return "body"
	}
	return ""
}

// sameBody compares bodies as the request's media type reads them: forms
// parameter by parameter in any order, JSON value by value (members in
// any order), anything else as text. A recorded body that is the
// Wildcard alone (a body masked whole) matches any body.
func sameBody(rec, req key) bool {
	text := string(rec.body)
	if strings.TrimSpace(text) == Wildcard {
		return true
	}
	mt := req.mediaType
	if mt == "" {
		mt = rec.mediaType
	}
	switch {
	case mt == "application/x-www-form-urlencoded":
		recPairs, ok := rec.params, len(rec.params) <= maxPairs
		if text != "" || len(rec.params) == 0 {
			recPairs, ok = parsePairs(text)
		}
		reqPairs, ok2 := parsePairs(string(req.body))
		return ok && ok2 && samePairs(recPairs, reqPairs)
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		a, errA := decodeJSON(rec.body)
		b, errB := decodeJSON(req.body)
		if errA == nil && errB == nil {
			return sameJSON(a, b)
		}
	}
	return glob(text, string(req.body))
}

// samePairs reports whether two lists of parameters hold the same ones,
// in any order: those equal as they are first, then those a Wildcard
// matches.
func samePairs(rec, req []pair) bool {
	if len(rec) != len(req) {
		return false
	}
	used := make([]bool, len(rec))
	var rest []pair
	for _, p := range req {
		i := indexPair(rec, used, func(r pair) bool { return r == p })
		if i < 0 {
			rest = append(rest, p)
			continue
		}
		used[i] = true
	}
	for _, p := range rest {
		i := indexPair(rec, used, func(r pair) bool { return glob(r.name, p.name) && glob(r.value, p.value) })
		if i < 0 {
			return false
		}
		used[i] = true
	}
	return true
}

// indexPair is the index of the first unused pair of ps that ok accepts,
// or -1.
func indexPair(ps []pair, used []bool, ok func(pair) bool) int {
	for i, p := range ps {
		if !used[i] && ok(p) {
			return i
		}
	}
	return -1
}

// decodeJSON decodes one JSON document, numbers kept as written.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errTrailing
	}
	return v, nil
}

// errTrailing is a JSON document followed by more.
var errTrailing = errors.New("data after the JSON document")

// sameJSON compares two decoded JSON values: objects by their members,
// arrays element by element, strings as glob does, numbers by value.
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, va := range a {
			vb, ok := b[k]
			if !ok || !sameJSON(va, vb) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], b[i]) {
				return false
			}
		}
		return true
	case string:
		if a == Wildcard {
			return true // a masked value, whatever it was
		}
		if b, ok := b.(string); ok {
			return glob(a, b)
		}
		return false
	case json.Number:
		switch b := b.(type) {
		case json.Number:
			return a == b || sameNumber(string(a), string(b))
		case string:
			return b == Wildcard
		}
		return false
	}
	if s, ok := b.(string); ok && s == Wildcard {
		return true
	}
	return a == b // bool, nil
}

// sameNumber reports whether two JSON numbers have the same float value.
func sameNumber(a, b string) bool {
	x, errX := strconv.ParseFloat(a, 64)
	y, errY := strconv.ParseFloat(b, 64)
	return errX == nil && errY == nil && x == y
}

// glob reports whether a and b are equal, where a Wildcard in either
// stands for any text.
func glob(a, b string) bool {
	return a == b ||
		strings.Contains(a, Wildcard) && wildMatch(a, b) ||
		strings.Contains(b, Wildcard) && wildMatch(b, a)
}

// wildMatch reports whether s matches pattern, each Wildcard in which
// stands for any text (the empty text included).
func wildMatch(pattern, s string) bool {
	parts := strings.Split(pattern, Wildcard)
	if len(parts) == 1 {
		return pattern == s
	}
	first, last := parts[0], parts[len(parts)-1]
	if len(s) < len(first)+len(last) || !strings.HasPrefix(s, first) || !strings.HasSuffix(s, last) {
		return false
	}
	s = s[len(first) : len(s)-len(last)]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return true
}
