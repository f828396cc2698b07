package document

import (
	"errors"
	"strconv"
	"strings"
)

// Pointer is a compiled RFC 6901 JSON pointer: the reference tokens,
// already unescaped. The empty pointer (no tokens) is the whole value.
type Pointer struct {
	text string
	// Tokens are the reference tokens, unescaped.
	Tokens []string
}

// CompilePointer parses an RFC 6901 pointer in its string form ("" or
// "/a/b~1c/0"). Only the escapes ~0 and ~1 are accepted after '~'.
func CompilePointer(text string) (Pointer, error) {
	if text == "" {
		return Pointer{}, nil
	}
	if text[0] != '/' {
		return Pointer{}, errors.New("a JSON pointer must be empty or start with '/'")
	}
	raw := strings.Split(text[1:], "/")
	tokens := make([]string, len(raw))
	for i, tok := range raw {
		if !strings.Contains(tok, "~") {
			tokens[i] = tok
			continue
		}
		var b strings.Builder
		for j := 0; j < len(tok); j++ {
			if tok[j] != '~' {
				b.WriteByte(tok[j])
				continue
			}
			if j+1 == len(tok) || (tok[j+1] != '0' && tok[j+1] != '1') {
				return Pointer{}, errors.New("'~' must be followed by '0' or '1' in a JSON pointer")
			}
			if tok[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		tokens[i] = b.String()
	}
	return Pointer{text: text, Tokens: tokens}, nil
}

// String returns the pointer as configured.
func (p Pointer) String() string { return p.text }

// ArrayIndex parses an RFC 6901 array index: "0" or a decimal number
// without leading zeros. "-" (past the end) never exists when reading.
func ArrayIndex(tok string) (int, bool) {
	if tok == "" || len(tok) > 9 || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(tok); i++ {
		if tok[i] < '0' || tok[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(tok)
	return n, err == nil
}
