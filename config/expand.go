package config

import (
	"fmt"
	"slices"
	"strings"
)

// expand replaces ${NAME} in s by getenv(NAME), ${NAME:-default} by the
// default when the variable is empty or unset, and $$ by a literal $. Any
// other $ is kept as it is. fromEnv reports whether a variable was
// substituted, so that callers never echo a value that may be a secret.
// unset names the variables of ${NAME} references (without a default)
// that had no value, in order, each once.
func expand(s string, getenv func(string) string) (out string, fromEnv bool, unset []string, err error) {
	if !strings.Contains(s, "$") {
		return s, false, nil, nil
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
				return "", false, nil, fmt.Errorf("unterminated ${ at offset %d (write $$ for a literal $)", i)
			}
			ref := s[i+2 : i+2+end]
			name, def, hasDef := strings.Cut(ref, ":-")
			if !envName(name) {
				return "", false, nil, fmt.Errorf("invalid variable reference ${%s}: want ${NAME} or ${NAME:-default}", ref)
			}
			v := getenv(name)
			if v == "" && hasDef {
				v = def
			}
			if v == "" && !hasDef && len(unset) < maxUnset && !slices.Contains(unset, name) {
				unset = append(unset, name)
			}
			b.WriteString(v)
			fromEnv = true
			i += 2 + end + 1
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), fromEnv, unset, nil
}

// maxUnset bounds the unset variables expand names, and its work.
const maxUnset = 8

// secretKey reports whether the key path holds a secret (SPEC 10, 14, 15): the
// admin token, the webhook signing secrets (webhooks.signing_secret and each
// API key's webhook_secret), the memory keys, and every value
// under a source's headers or auth block, at any depth.
func secretKey(path string) bool {
	switch path {
	case "server.admin_token", "webhooks.signing_secret", "memory.key":
		return true
	}
	if rest, ok := strings.CutPrefix(path, "memory.previous_keys["); ok {
		return strings.HasSuffix(rest, "]") && strings.Trim(rest[:len(rest)-1], "0123456789") == "" && len(rest) > 1
	}
	if rest, ok := strings.CutPrefix(path, "server.api_keys["); ok {
		n, field, ok := strings.Cut(rest, "]")
		return ok && n != "" && strings.Trim(n, "0123456789") == "" && field == ".webhook_secret"
	}
	rest, ok := strings.CutPrefix(path, "sources[")
	if !ok {
		return false
	}
	i := strings.IndexByte(rest, ']')
	if i <= 0 || strings.Trim(rest[:i], "0123456789") != "" {
		return false
	}
	rest = rest[i+1:]
	for _, block := range []string{".headers", ".auth"} {
		if tail, ok := strings.CutPrefix(rest, block); ok && (tail == "" || tail[0] == '.' || tail[0] == '[') {
			return true
		}
	}
	return false
}

// unsetSecret is the message of a secret that references variables with
// no value and no default: a typo or a missing deployment secret, which
// would otherwise run with an empty credential. It names the variables,
// never a value.
func unsetSecret(names []string) string {
	refs := make([]string, len(names))
	for i, n := range names {
		refs[i] = "${" + n + "}"
	}
	verbs := "is not set and has"
	if len(names) > 1 {
		verbs = "are not set and have"
	}
	return fmt.Sprintf("%s %s no default; a secret is never left empty by accident (set it, or write ${%s:-} if empty is meant)",
		strings.Join(refs, ", "), verbs, names[0])
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
