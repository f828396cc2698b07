package async

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
)

// lower is RFC 4648 base32 in lower case, without padding: ids that read
// well in URLs and logs.
var lower = base32.NewEncoding(strings.ToLower("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")).WithPadding(base32.NoPadding)

// newID returns prefix followed by 128 random bits: unguessable, so that a
// query id is enough to read the query.
func newID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return prefix + lower.EncodeToString(b[:])
}

// validID reports whether id could have been made by newID(prefix): the
// ids a client sends are checked before they go near a store key.
func validID(id, prefix string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok || len(rest) != lower.EncodedLen(16) {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
			return false
		}
	}
	return true
}
