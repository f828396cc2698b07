package async

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"strconv"
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

// DerivedID returns prefix followed by 128 bits of SHA-256 of seed: an id
// with the shape of newID's that the same seed always gives, for a message
// that may be sent twice (a watch's, SPEC 15) and must then be one delivery.
func DerivedID(prefix, seed string) string {
	sum := sha256.Sum256([]byte("aggregator/async/v1/id\x00" + seed))
	return prefix + lower.EncodeToString(sum[:16])
}

// WatchMessage is the delivery id and the webhook-id of the message of
// watch wid whose last known infractions became version: derived from
// both, so that a check run twice sends one message receivers can tell
// apart, whichever replica sends it.
func WatchMessage(wid string, version int64) (deliveryID, messageID string) {
	v := strconv.FormatInt(version, 10)
	return DerivedID("dlv_", wid+"\x00"+v), "msg_" + wid + "_" + v
}
