package async

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"time"
)

// The headers of a Standard Webhooks delivery.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// ErrSecret means a signing secret is not "whsec_" followed by base64.
var ErrSecret = errors.New(`async: webhook signing secret: want "whsec_" followed by a base64 key`)

// ParseSecret decodes a Standard Webhooks secret, "whsec_<base64 key>"
// (padded or not). The empty secret is a nil key: deliveries unsigned.
func ParseSecret(secret string) ([]byte, error) {
	if secret == "" {
		return nil, nil
	}
	enc, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, ErrSecret
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(enc)
	}
	if err != nil || len(key) == 0 {
		return nil, ErrSecret
	}
	return key, nil
}

// Sign returns the webhook-signature of a delivery: "v1," and the base64
// HMAC-SHA256, keyed with key, of "{msgID}.{unix seconds}.{body}".
func Sign(key []byte, msgID string, at time.Time, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(msgID))
	m.Write([]byte{'.'})
	m.Write([]byte(strconv.FormatInt(at.Unix(), 10)))
	m.Write([]byte{'.'})
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// delay is the wait after the n-th failed attempt (n ≥ 1):
// min(backoff · 2^(n-1), 60 s).
func delay(backoff time.Duration, n int) time.Duration {
	const ceiling = 60 * time.Second
	if backoff <= 0 {
		return 0
	}
	d := backoff
	for i := 1; i < n; i++ {
		d *= 2
		if d >= ceiling {
			return ceiling
		}
	}
	return min(d, ceiling)
}
