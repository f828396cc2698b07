package client_test

import (
	"errors"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/multas/aggregator/client"
)

// The test vector published with the Standard Webhooks reference
// implementations: a receiver's library must accept what we sign.
const (
	vectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	vectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	vectorTimestamp = 1614265330
	vectorBody      = `{"test": 2432232314}`
	vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignWebhook(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, secret, want string
		err                error
	}{
		{"reference vector", vectorSecret, vectorSignature, nil},
		{"prefix optional", vectorSecret[len("whsec_"):], vectorSignature, nil},
		{"unpadded key", "whsec_YWJj", "", nil}, // "abc"
		{"not base64", "whsec_not base64!", "", client.ErrWebhookSecret},
		{"empty key", "whsec_", "", client.ErrWebhookSecret},
	}
	for _, tt := range tests {
		got, err := client.SignWebhook(tt.secret, vectorID, time.Unix(vectorTimestamp, 0), []byte(vectorBody))
		if !errors.Is(err, tt.err) || tt.want != "" && got != tt.want {
			t.Errorf("%s: SignWebhook = %q, %v; want %q, %v", tt.name, got, err, tt.want, tt.err)
		}
	}
}

func TestVerifyWebhook(t *testing.T) {
	t.Parallel()
	sent := time.Unix(vectorTimestamp, 0)
	headers := func(id, ts string, sigs ...string) http.Header {
		h := http.Header{}
		if id != "" {
			h.Set(client.HeaderWebhookID, id)
		}
		if ts != "" {
			h.Set(client.HeaderWebhookTimestamp, ts)
		}
		for _, s := range sigs {
			h.Add(client.HeaderWebhookSignature, s)
		}
		return h
	}
	ts := strconv.Itoa(vectorTimestamp)
	tests := []struct {
		name      string
		secret    string
		header    http.Header
		body      string
		tolerance time.Duration
		now       time.Time
		want      error
	}{
		{name: "reference vector", header: headers(vectorID, ts, vectorSignature)},
		{name: "one of several, rotated key first", header: headers(vectorID, ts, "v1,Zm9yZ2Vk "+vectorSignature)},
		{name: "several header lines", header: headers(vectorID, ts, "v1,Zm9yZ2Vk", vectorSignature)},
		{name: "other versions ignored", header: headers(vectorID, ts, "v1a,"+vectorSignature[3:]+" "+vectorSignature)},
		{name: "only another version", header: headers(vectorID, ts, "v1a,"+vectorSignature[3:]), want: client.ErrWebhookSignature},
		{name: "body changed", header: headers(vectorID, ts, vectorSignature), body: `{"test": 2432232315}`, want: client.ErrWebhookSignature},
		{name: "id changed", header: headers("msg_other", ts, vectorSignature), want: client.ErrWebhookSignature},
		{name: "timestamp changed", header: headers(vectorID, strconv.Itoa(vectorTimestamp+1), vectorSignature), now: sent.Add(time.Second), want: client.ErrWebhookSignature},
		{name: "wrong secret", secret: "whsec_c2VjcmV0", header: headers(vectorID, ts, vectorSignature), want: client.ErrWebhookSignature},
		{name: "signature not base64", header: headers(vectorID, ts, "v1,!!!"), want: client.ErrWebhookSignature},
		{name: "truncated signature", header: headers(vectorID, ts, vectorSignature[:20]), want: client.ErrWebhookSignature},
		{name: "within the default tolerance", header: headers(vectorID, ts, vectorSignature), now: sent.Add(4 * time.Minute)},
		{name: "too old", header: headers(vectorID, ts, vectorSignature), now: sent.Add(6 * time.Minute), want: client.ErrWebhookTimestamp},
		{name: "too new", header: headers(vectorID, ts, vectorSignature), now: sent.Add(-6 * time.Minute), want: client.ErrWebhookTimestamp},
		{name: "own tolerance", header: headers(vectorID, ts, vectorSignature), tolerance: 10 * time.Second, now: sent.Add(11 * time.Second), want: client.ErrWebhookTimestamp},
		{name: "no id", header: headers("", ts, vectorSignature), want: client.ErrWebhookHeader},
		{name: "no timestamp", header: headers(vectorID, "", vectorSignature), want: client.ErrWebhookHeader},
		{name: "no signature", header: headers(vectorID, ts), want: client.ErrWebhookHeader},
		{name: "timestamp not a number", header: headers(vectorID, "2021-02-25T15:02:10Z", vectorSignature), want: client.ErrWebhookHeader},
		{name: "bad secret", secret: "whsec_???", header: headers(vectorID, ts, vectorSignature), want: client.ErrWebhookSecret},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.secret == "" {
				tt.secret = vectorSecret
			}
			if tt.body == "" {
				tt.body = vectorBody
			}
			if tt.now.IsZero() {
				tt.now = sent
			}
			err := client.VerifyWebhook(tt.secret, tt.header, []byte(tt.body), tt.tolerance, tt.now)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Errorf("VerifyWebhook = %v, want %v", err, tt.want)
			}
		})
	}
}

// TestWebhookRoundTrip signs with SignWebhook and verifies with
// VerifyWebhook, as the server and a receiver do.
func TestWebhookRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 20, 13, 0, 0, 0, time.UTC)
	body := []byte(`{"type":"query.completed"}`)
	sig, err := client.SignWebhook(vectorSecret, "msg_1", now, body)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	h.Set(client.HeaderWebhookID, "msg_1")
	h.Set(client.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(client.HeaderWebhookSignature, sig)
	if err := client.VerifyWebhook(vectorSecret, h, body, 0, now.Add(time.Minute)); err != nil {
		t.Errorf("VerifyWebhook of SignWebhook's signature: %v", err)
	}
}
