package document

import (
	"bytes"
	"encoding/json"
	"unicode/utf8"
)

// The functions of this file walk a JSON text in place, without decoding
// it into maps and interfaces: only the values the mapping asks for are
// ever turned into Go strings. They assume valid JSON (json.Valid has
// checked the whole document first) and take a value as the bytes from
// its first byte to its last, without surrounding white space.

// Resolve walks the JSON value v along p. found is false when a member or
// element does not exist. A JSON null met on the way ends the walk with
// that null: a portal that answers {"result": null} has nothing there,
// which is not the same as a shape the configuration does not describe.
func (p Pointer) Resolve(v []byte) (value []byte, found bool) {
	for _, tok := range p.Tokens {
		switch v[0] {
		case 'n':
			return v, true
		case '{':
			if v, found = member(v, tok); !found {
				return nil, false
			}
		case '[':
			i, ok := ArrayIndex(tok)
			if !ok {
				return nil, false
			}
			if v, found = element(v, i); !found {
				return nil, false
			}
		default:
			return nil, false
		}
	}
	return v, true
}

// IsNull reports whether v is the JSON null.
func IsNull(v []byte) bool { return len(v) > 0 && v[0] == 'n' }

// member returns the value of the member named key of object obj; like
// encoding/json, the last of duplicate members wins.
func member(obj []byte, key string) (value []byte, found bool) {
	for it := (Iterator{B: obj, I: 1}); ; {
		k, ok := it.Next()
		if !ok {
			return value, found
		}
		it.I = SkipSpace(obj, it.I) + 1 // ':'
		v, _ := it.Next()
		if keyEquals(k, key) {
			value, found = v, true
		}
	}
}

// element returns the element at index i of array arr.
func element(arr []byte, i int) ([]byte, bool) {
	it := Iterator{B: arr, I: 1}
	for n := 0; ; n++ {
		v, ok := it.Next()
		if !ok {
			return nil, false
		}
		if n == i {
			return v, true
		}
	}
}

// Iterator steps through the members or elements of an object or array,
// one value (for objects, a key or a value) at a time.
type Iterator struct {
	B []byte
	I int // next byte to read
}

// Next returns the next value, skipping one separating ',' before it;
// ok is false at the closing '}' or ']'.
func (it *Iterator) Next() (value []byte, ok bool) {
	i := SkipSpace(it.B, it.I)
	if it.B[i] == ',' {
		i = SkipSpace(it.B, i+1)
	}
	if c := it.B[i]; c == '}' || c == ']' {
		it.I = i
		return nil, false
	}
	end := valueEnd(it.B, i)
	it.I = end
	return it.B[i:end], true
}

// valueEnd returns the index just past the value that starts at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = stringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
		j++
	}
	return j
}

// stringEnd returns the index just past the string that starts at b[i]:
// after the first quote not escaped by an odd run of backslashes.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		q := j + k
		slashes := 0
		for q-1-slashes > i && b[q-1-slashes] == '\\' {
			slashes++
		}
		if slashes%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return len(b)
}

// SkipSpace returns the index of the first byte at or after i that is not
// JSON white space.
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// keyEquals reports whether the JSON string k names key.
func keyEquals(k []byte, key string) bool {
	return string(KeyText(k)) == key
}

// KeyText is the decoded text of the JSON string k, in place when it needs
// no decoding.
func KeyText(k []byte) []byte {
	if inner, plain := plainString(k); plain {
		return inner
	}
	return []byte(unquote(k))
}

// plainString returns the bytes between the quotes of the JSON string s
// when they need no decoding: no escapes, and valid UTF-8 (encoding/json
// replaces invalid bytes).
func plainString(s []byte) (inner []byte, plain bool) {
	inner = s[1 : len(s)-1]
	return inner, bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner)
}

// unquote decodes the JSON string s, escapes and all.
func unquote(s []byte) string {
	var out string
	if err := json.Unmarshal(s, &out); err != nil {
		return ""
	}
	return out
}

// StringBytes returns the text of the JSON string s, trimmed of white
// space: in place when it needs no decoding.
func StringBytes(s []byte) []byte {
	if inner, plain := plainString(s); plain {
		return bytes.TrimSpace(inner)
	}
	return bytes.TrimSpace([]byte(unquote(s)))
}
