package config

import (
	"fmt"
	"strings"
)

// expand replaces ${NAME} in s by getenv(NAME), ${NAME:-default} by the
// default when the variable is empty or unset, and $$ by a literal $. Any
// other $ is kept as it is. fromEnv reports whether a variable was
// substituted, so that callers never echo a value that may be a secret.
func expand(s string, getenv func(string) string) (out string, fromEnv bool, err error) {
	if !strings.Contains(s, "$") {
		return s, false, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '$' || i+1 == len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i += 2
		case '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", false, fmt.Errorf("unterminated ${ at offset %d (write $$ for a literal $)", i)
			}
			ref := s[i+2 : i+2+end]
			name, def, hasDef := strings.Cut(ref, ":-")
			if !envName(name) {
				return "", false, fmt.Errorf("invalid variable reference ${%s}: want ${NAME} or ${NAME:-default}", ref)
			}
			v := getenv(name)
			if v == "" && hasDef {
				v = def
			}
			b.WriteString(v)
			fromEnv = true
			i += 2 + end + 1
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), fromEnv, nil
}

// envName reports whether name is a valid environment variable name.
func envName(name string) bool {
	if name == "" {
		return false
	}
	for i, r := range name {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
