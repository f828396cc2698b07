package client

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/multas/aggregator"
)

// The headers of a Standard Webhooks delivery (https://www.standardwebhooks.com).
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// DefaultWebhookTolerance is how far a delivery's timestamp may be from
// the receiver's clock, either way, when VerifyWebhook is given none.
const DefaultWebhookTolerance = 5 * time.Minute

// The errors of VerifyWebhook and SignWebhook, for errors.Is. A receiver
// answers every one but ErrWebhookSecret (its own configuration) with a
// 4xx, so that a forged delivery is never taken for a good one.
var (
	// ErrWebhookSecret: the secret is not "whsec_" followed by base64.
	ErrWebhookSecret = errors.New("invalid webhook secret")
	// ErrWebhookHeader: a Standard Webhooks header is missing or malformed.
	ErrWebhookHeader = errors.New("invalid webhook headers")
	// ErrWebhookTimestamp: the delivery is older, or further in the
	// future, than the tolerance allows (a replay, or a skewed clock).
	ErrWebhookTimestamp = errors.New("webhook timestamp outside the tolerance")
	// ErrWebhookSignature: no v1 signature matches the body.
	ErrWebhookSignature = errors.New("no matching webhook signature")
)

// The event types of a delivered asynchronous query.
const (
	EventQueryCompleted = "query.completed"
	EventQueryExpired   = "query.expired"
)

// WebhookEvent is the body of a delivery: the Standard Webhooks envelope of
// an asynchronous query that completed or expired.
type WebhookEvent struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      WebhookData `json:"data"`
}

// WebhookData is the data member of a WebhookEvent.
type WebhookData struct {
	ID     string            `json:"id"`
	Status QueryStatus       `json:"status"`
	Result aggregator.Result `json:"result"`
}

// SignWebhook returns the webhook-signature value of a delivery:
// "v1,<base64 HMAC-SHA256 of {msgID}.{unix timestamp}.{body}>", keyed with
// the decoded secret ("whsec_<base64 key>", padded or not; the prefix is
// optional, as in the reference implementations). The delivery's webhook-timestamp header
// must be strconv.FormatInt(timestamp.Unix(), 10).
func SignWebhook(secret, msgID string, timestamp time.Time, body []byte) (string, error) {
	key, err := webhookKey(secret)
	if err != nil {
		return "", err
	}
	mac := webhookMAC(key, msgID, strconv.FormatInt(timestamp.Unix(), 10), body)
	return "v1," + base64.StdEncoding.EncodeToString(mac), nil
}

// VerifyWebhook checks a delivery per the Standard Webhooks convention:
// its webhook-timestamp is within tolerance of now (either way;
// DefaultWebhookTolerance when tolerance is not positive), and one of the
// space-separated signatures of webhook-signature is the v1 HMAC-SHA256 of
// "{webhook-id}.{webhook-timestamp}.{body}" keyed with the secret,
// compared in constant time. Signatures of other versions are ignored.
//
// body must be the raw bytes received, before any decoding. The error
// wraps one of ErrWebhookSecret, ErrWebhookHeader, ErrWebhookTimestamp and
// ErrWebhookSignature.
func VerifyWebhook(secret string, header http.Header, body []byte, tolerance time.Duration, now time.Time) error {
	key, err := webhookKey(secret)
	if err != nil {
		return err
	}
	id := header.Get(HeaderWebhookID)
	ts := header.Get(HeaderWebhookTimestamp)
	sigs := strings.Join(header.Values(HeaderWebhookSignature), " ")
	for _, h := range [...]struct{ name, value string }{
		{HeaderWebhookID, id}, {HeaderWebhookTimestamp, ts}, {HeaderWebhookSignature, sigs},
	} {
		if strings.TrimSpace(h.value) == "" {
			return fmt.Errorf("%w: %s is missing", ErrWebhookHeader, h.name)
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || unix < 0 {
		return fmt.Errorf("%w: %s is not a Unix time in seconds", ErrWebhookHeader, HeaderWebhookTimestamp)
	}
	if tolerance <= 0 {
		tolerance = DefaultWebhookTolerance
	}
	sent := time.Unix(unix, 0)
	switch {
	case now.Sub(sent) > tolerance:
		return fmt.Errorf("%w: sent %s before now", ErrWebhookTimestamp, now.Sub(sent).Truncate(time.Second))
	case sent.Sub(now) > tolerance:
		return fmt.Errorf("%w: sent %s in the future", ErrWebhookTimestamp, sent.Sub(now).Truncate(time.Second))
	}
	want := webhookMAC(key, id, ts, body)
	for _, sig := range strings.Fields(sigs) {
		version, value, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(value)
		if err != nil {
			continue
		}
		if hmac.Equal(got, want) {
			return nil
		}
	}
	return ErrWebhookSignature
}

// webhookKey decodes a "whsec_<base64>" secret, padded or not.
func webhookKey(secret string) ([]byte, error) {
	enc := strings.TrimPrefix(secret, "whsec_")
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(enc)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the key after whsec_ is not base64", ErrWebhookSecret)
	}
	if len(key) == 0 {
		return nil, fmt.Errorf("%w: empty key", ErrWebhookSecret)
	}
	return key, nil
}

func webhookMAC(key []byte, id, timestamp string, body []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id))
	m.Write([]byte{'.'})
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}
