package client_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/client"
)

// FuzzVerifyWebhook checks the receiver's side of a delivery with hostile
// headers and bodies: VerifyWebhook never panics, every error wraps one of
// its four sentinels, it accepts a delivery only when one v1 signature is
// the HMAC of the id, timestamp and body under the secret (computed here
// independently), and it always accepts what SignWebhook signed for now
// and rejects it once the body is altered.
func FuzzVerifyWebhook(f *testing.F) {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	ts := strconv.FormatInt(now.Unix(), 10)
	body := `{"type":"query.completed","timestamp":"2026-03-14T12:00:00Z","data":{"id":"q1","status":"completed"}}`
	good, err := client.SignWebhook(secret, "msg_1", now, []byte(body))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range []struct{ secret, id, ts, sig, body string }{
		{secret, "msg_1", ts, good, body},
		{secret, "msg_1", ts, "v1,bm90IGl0 " + good, body},
		{secret, "msg_1", ts, "v2," + good[3:], body},
		{secret, "msg_1", ts, good, body + " "},
		{secret, "msg_1", "-1", good, body},
		{secret, "msg_1", "9223372036854775807", good, body},
		{secret, "msg_1", "+" + ts, good, body},
		{secret, "msg_1", ts + "0", good, body},
		{secret, "", ts, good, body},
		{secret, "msg_1", ts, "", body},
		{secret, "msg_1", ts, "v1,", body},
		{secret, "msg_1", ts, "v1,====", body},
		{secret, "msg.1", ts, good, body},
		{"whsec_", "msg_1", ts, good, body},
		{"whsec_!!", "msg_1", ts, good, body},
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_1", ts, good, body},
		{secret, "msg_1", ts, strings.Repeat("v1,AAAA ", 50), ""},
	} {
		f.Add(s.secret, s.id, s.ts, s.sig, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, secret, id, ts, sig string, body []byte) {
		h := http.Header{}
		h.Set(client.HeaderWebhookID, id)
		h.Set(client.HeaderWebhookTimestamp, ts)
		h.Set(client.HeaderWebhookSignature, sig)
		err := client.VerifyWebhook(secret, h, body, 0, now)
		if err != nil {
			if !errors.Is(err, client.ErrWebhookSecret) && !errors.Is(err, client.ErrWebhookHeader) &&
				!errors.Is(err, client.ErrWebhookTimestamp) && !errors.Is(err, client.ErrWebhookSignature) {
				t.Errorf("error %v wraps none of the sentinels", err)
			}
		} else if !signedBy(secret, h, body) {
			t.Errorf("accepted a delivery that no v1 signature matches: id %q ts %q sig %q", h.Get(client.HeaderWebhookID), h.Get(client.HeaderWebhookTimestamp), h.Get(client.HeaderWebhookSignature))
		}

		// What the sender signs now verifies, and not once altered.
		sent, err := client.SignWebhook(secret, id, now, body)
		if err != nil {
			if !errors.Is(err, client.ErrWebhookSecret) {
				t.Errorf("SignWebhook: %v, want ErrWebhookSecret", err)
			}
			return
		}
		h.Set(client.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
		h.Set(client.HeaderWebhookSignature, sent)
		if strings.TrimSpace(id) == "" {
			return // a delivery without an id is malformed, signed or not
		}
		if err := client.VerifyWebhook(secret, h, body, 0, now); err != nil {
			t.Errorf("a delivery signed by SignWebhook is rejected: %v", err)
		}
		altered := append(append([]byte(nil), body...), 'x')
		if err := client.VerifyWebhook(secret, h, altered, 0, now); !errors.Is(err, client.ErrWebhookSignature) {
			t.Errorf("an altered body: got %v, want ErrWebhookSignature", err)
		}
	})
}

// signedBy reports whether one v1 signature of h is the HMAC-SHA256 of
// "{id}.{timestamp}.{body}" under secret's key.
func signedBy(secret string, h http.Header, body []byte) bool {
	enc := strings.TrimPrefix(secret, "whsec_")
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(enc)
	}
	if err != nil || len(key) == 0 {
		return false
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte(h.Get(client.HeaderWebhookID) + "." + h.Get(client.HeaderWebhookTimestamp) + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, s := range strings.Fields(strings.Join(h.Values(client.HeaderWebhookSignature), " ")) {
		v, value, ok := strings.Cut(s, ",")
		if !ok || v != "v1" {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(value); err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}
