package document

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/theory/jsonpath"
)

// A JSON document is kept as its text (valid JSON, UTF-8), walked in
// place by pointers (rawjson.go), and decoded into Go values (with
// json.Number for numbers, so that literals survive) only when a JSONPath
// or a node of it is needed. JSON nodes are those decoded values.

// ValidJSON checks that doc is one JSON document.
func ValidJSON(doc []byte) error {
	if json.Valid(doc) {
		return nil
	}
	if len(bytes.TrimSpace(doc)) == 0 {
		return errors.New("empty answer")
	}
	var raw json.RawMessage
	return fmt.Errorf("invalid JSON: %w", json.Unmarshal(doc, &raw))
}

// decodeJSON decodes valid JSON into Go values, numbers as json.Number.
func decodeJSON(doc []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	return v, nil
}

// compileJSONPath compiles an RFC 9535 JSONPath.
func compileJSONPath(text string) (*jsonpath.Path, error) {
	p, err := jsonpath.Parse(text)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), jsonpath.ErrPathParse.Error()+": ")
		return nil, fmt.Errorf("not an RFC 9535 JSONPath: %s", msg)
	}
	return p, nil
}

// jsonResolve walks the decoded value v along the pointer's tokens; a
// null met on the way ends the walk with that null, as Pointer.Resolve
// does on the text.
func jsonResolve(v any, p Pointer) (any, bool) {
	for _, tok := range p.Tokens {
		switch x := v.(type) {
		case nil:
			return nil, true
		case map[string]any:
			var ok bool
			if v, ok = x[tok]; !ok {
				return nil, false
			}
		case []any:
			i, ok := ArrayIndex(tok)
			if !ok || i >= len(x) {
				return nil, false
			}
			v = x[i]
		default:
			return nil, false
		}
	}
	return v, true
}

// jsonValue is a decoded JSON value as a Value; ok is false for null.
func jsonValue(v any) (Value, bool) {
	switch x := v.(type) {
	case nil:
		return Value{}, false
	case string:
		return Value{Text: strings.TrimSpace(x)}, true
	case json.Number:
		return Value{Text: string(x), Number: true}, true
	case bool:
		return Value{Text: strconv.FormatBool(x), Bool: true}, true
	}
	return Value{NotText: true}, true
}

// jsonTruthy reports whether the decoded value v is something: not null,
// false, 0, "" (after trimming), [] or {}.
func jsonTruthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return strings.TrimSpace(x) != ""
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0 // a number too large to parse is not 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// Truthy reports whether the JSON text v is something, as jsonTruthy.
func Truthy(v []byte) bool {
	switch v[0] {
	case 'n', 'f':
		return false
	case '"':
		return len(StringBytes(v)) > 0
	case '[', '{':
		it := Iterator{B: v, I: 1}
		_, ok := it.Next()
		return ok
	case 't':
		return true
	}
	f, err := strconv.ParseFloat(string(v), 64)
	return err != nil || f != 0
}

// TextOf is the JSON text v as a Value: strings as their trimmed text,
// numbers as their literal, booleans as true or false; ok is false for
// null. The bytes of the text may alias v.
func TextOf(v []byte) (text []byte, val Value, ok bool) {
	switch v[0] {
	case 'n':
		return nil, Value{}, false
	case '"':
		return StringBytes(v), Value{}, true
	case '{', '[':
		return nil, Value{NotText: true}, true
	case 't', 'f':
		return v, Value{Bool: true}, true
	}
	return v, Value{Number: true}, true
}
