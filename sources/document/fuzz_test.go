package document

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
)

// FuzzResolve checks the in-place JSON walk against encoding/json: on any
// valid document, a pointer finds the same value as it does in the
// document decoded into maps and slices.
func FuzzResolve(f *testing.F) {
	for _, seed := range []struct{ doc, ptr string }{
		{`{"a": {"b/c": [10, {"d~e": "x"}]}}`, "/a/b~1c/1/d~0e"},
		{`{"a": 1, "a": {"b": 2}}`, "/a/b"},
		{`{"k\u00e9y": "v", "k\\\"": 1}`, "/kéy"},
		{`[[], [1, [2, "]"]]]`, "/1/1/1"},
		{`{"a": null}`, "/a/b/c"},
		{`{"\ud800": 1}`, "/\ufffd"},
		{" [ 1 , 2 ] ", "/1"},
		{`"\\\\\""`, ""},
		{`[1e400, {"a": -0.0}]`, "/0"},
	} {
		f.Add([]byte(seed.doc), seed.ptr)
	}
	f.Fuzz(func(t *testing.T, doc []byte, ptr string) {
		p, err := CompilePointer(ptr)
		if err != nil || !json.Valid(doc) {
			return
		}
		got, found := p.Resolve(doc[SkipSpace(doc, 0):])
		v, err := decodeNumbers(doc)
		if err != nil {
			t.Fatalf("valid document does not decode: %v", err)
		}
		want, wantFound := resolveDecoded(p, v)
		if found != wantFound {
			t.Fatalf("resolve(%q) in %q: found = %v, want %v", ptr, doc, found, wantFound)
		}
		if !found {
			return
		}
		gotV, err := decodeNumbers(got)
		if err != nil {
			t.Fatalf("resolve(%q) in %q = %q, not a JSON value: %v", ptr, doc, got, err)
		}
		if !reflect.DeepEqual(gotV, want) {
			t.Fatalf("resolve(%q) in %q = %q, want %v", ptr, doc, got, want)
		}
	})
}

// decodeNumbers decodes a JSON value keeping numbers as their literals,
// which never overflow.
func decodeNumbers(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// resolveDecoded is the reference walk of p over a decoded document, with
// the same treatment of null.
func resolveDecoded(p Pointer, v any) (any, bool) {
	for _, tok := range p.Tokens {
		switch node := v.(type) {
		case nil:
			return nil, true
		case map[string]any:
			next, ok := node[tok]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			i, ok := ArrayIndex(tok)
			if !ok || i >= len(node) {
				return nil, false
			}
			v = node[i]
		default:
			return nil, false
		}
	}
	return v, true
}
