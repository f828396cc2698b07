package watch

import (
	"crypto/rand"
	"encoding/base32"
	"strings"
	"time"
)

// sortable is RFC 4648 base32 with its alphabet in ASCII order, without
// padding: ids that sort as the bytes they encode. Its characters are
// those of package async's ids, so a watch id has their shape.
var sortable = base32.NewEncoding("234567abcdefghijklmnopqrstuvwxyz").WithPadding(base32.NoPadding)

// idLen is the length of an id after its "w_" prefix.
var idLen = sortable.EncodedLen(16)

// newID returns "w_" followed by 128 bits: the creation time in
// milliseconds (48 bits), so that ids sort in the order the watches were
// made (listings page through them in that order), then 80 random bits,
// so that an id is not guessed.
func newID(now time.Time) string {
	var b [16]byte
	ms := uint64(max(now.UnixMilli(), 0))
	for i := range 6 {
		b[i] = byte(ms >> (8 * (5 - i)))
	}
	_, _ = rand.Read(b[6:]) // never fails (crypto/rand)
	return "w_" + sortable.EncodeToString(b[:])
}

// ValidID reports whether id could have been made by newID: the ids a
// client sends are checked before they go near a store key.
func ValidID(id string) bool {
	rest, ok := strings.CutPrefix(id, "w_")
	if !ok || len(rest) != idLen {
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
