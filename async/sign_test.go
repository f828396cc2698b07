package async

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestSign(t *testing.T) {
	key := []byte("a key of the test, 24 bytes")
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	got, err := ParseSecret(secret)
	if err != nil || string(got) != string(key) {
		t.Fatalf("ParseSecret(%q) = %q, %v", secret, got, err)
	}
	at := time.Unix(1773490320, 0)
	body := []byte(`{"type":"query.completed"}`)
	// Computed independently of Sign: HMAC-SHA256 of "id.timestamp.body".
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte("msg_1.1773490320." + string(body)))
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	if s := Sign(key, "msg_1", at, body); s != want {
		t.Errorf("Sign = %s, want %s", s, want)
	}
}

func TestParseSecret(t *testing.T) {
	for _, tc := range []struct {
		secret string
		err    bool
	}{
		{"", false},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", false},
		{"whsec_c2VjcmV0", false},
		{"whsec_c2VjcmV0ZQ", false}, // unpadded
		{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", true},
		{"whsec_", true},
		{"whsec_not base64!", true},
	} {
		_, err := ParseSecret(tc.secret)
		if (err != nil) != tc.err {
			t.Errorf("ParseSecret(%q): err %v, want error %v", tc.secret, err, tc.err)
		}
		if err != nil && !errors.Is(err, ErrSecret) {
			t.Errorf("ParseSecret(%q): %v is not ErrSecret", tc.secret, err)
		}
	}
}

func TestDelay(t *testing.T) {
	for _, tc := range []struct {
		backoff time.Duration
		n       int
		want    time.Duration
	}{
		{time.Second, 1, time.Second},
		{time.Second, 2, 2 * time.Second},
		{time.Second, 4, 8 * time.Second},
		{time.Second, 6, 32 * time.Second},
		{time.Second, 7, 60 * time.Second},
		{time.Second, 40, 60 * time.Second},
		{10 * time.Second, 3, 40 * time.Second},
		{10 * time.Second, 4, 60 * time.Second},
		{2 * time.Minute, 1, 60 * time.Second},
		{0, 3, 0},
	} {
		if got := delay(tc.backoff, tc.n); got != tc.want {
			t.Errorf("delay(%v, %d) = %v, want %v", tc.backoff, tc.n, got, tc.want)
		}
	}
}

func TestPacer(t *testing.T) {
	p := newPacer(5) // one per 200ms
	t0 := time.Unix(0, 0)
	var a, b, c time.Time
	if w := p.admit("k", &a, t0); w != 0 {
		t.Fatalf("first call waits %v, want 0", w)
	}
	if w := p.admit("k", &b, t0); w != 200*time.Millisecond || !b.Equal(t0.Add(200*time.Millisecond)) {
		t.Fatalf("second call: wait %v slot %v, want 200ms", w, b)
	}
	if w := p.admit("k", &c, t0); w != 400*time.Millisecond {
		t.Fatalf("third call: wait %v, want 400ms", w)
	}
	if w := p.admit("other", &a, t0); w != 0 {
		t.Fatalf("another key waits %v, want 0", w)
	}
	// Slot b honoured on time goes; slot c honoured too early waits.
	if w := p.admit("k", &b, t0.Add(200*time.Millisecond)); w != 0 || !b.IsZero() {
		t.Fatalf("slot honoured: wait %v, slot %v", w, b)
	}
	if w := p.admit("k", &c, t0.Add(300*time.Millisecond)); w != 100*time.Millisecond {
		t.Fatalf("slot early: wait %v, want 100ms", w)
	}
	// A slot honoured late never compresses the spacing.
	late := t0.Add(250 * time.Millisecond)
	if w := p.admit("k", &late, t0.Add(260*time.Millisecond)); w == 0 {
		t.Fatal("a late slot went 60ms after the previous call")
	}
}

func TestOriginBreaker(t *testing.T) {
	b := newOriginBreakers(3, 10*time.Second, 5*time.Second)
	o := origin("https://Hooks.Example.com/cb?x=1")
	if o != "https://hooks.example.com:443" {
		t.Fatalf("origin = %s", o)
	}
	now := time.Unix(0, 0)
	for i := range 3 {
		if _, ok := b.allow(o, now); !ok {
			t.Fatalf("attempt %d refused while closed", i+1)
		}
		_, opened := b.done(o, false, false, now)
		if opened != (i == 2) {
			t.Fatalf("after %d failures opened = %v", i+1, opened)
		}
	}
	if w := b.blocked(o, now.Add(time.Second)); w != 9*time.Second {
		t.Fatalf("blocked %v, want 9s", w)
	}
	if _, ok := b.allow(o, now.Add(time.Second)); ok {
		t.Fatal("allowed while open")
	}
	after := now.Add(10 * time.Second)
	probe, ok := b.allow(o, after)
	if !probe || !ok {
		t.Fatalf("after the pause: probe %v ok %v, want the probe", probe, ok)
	}
	if _, ok := b.allow(o, after); ok {
		t.Fatal("a second attempt allowed while the probe is in flight")
	}
	if w := b.blocked(o, after); w <= 0 || w > time.Second {
		t.Fatalf("blocked by the probe for %v, want a short recheck", w)
	}
	recovered, _ := b.done(o, true, true, after)
	if !recovered {
		t.Fatal("probe success did not recover")
	}
	if w := b.blocked(o, after); w != 0 {
		t.Fatalf("blocked %v after recovery", w)
	}
	if other := origin("http://hooks.example.com/x"); other != "http://hooks.example.com:80" {
		t.Fatalf("origin = %s", other)
	}
}

func TestValidID(t *testing.T) {
	id := newID("q_")
	if !validID(id, "q_") {
		t.Errorf("validID(%s) = false", id)
	}
	for _, bad := range []string{"", "q_", "q_due", id + "a", id[:len(id)-1], "dlv_" + id[2:], "q_" + strings.ToUpper(id[2:]), "q_../../" + id[8:]} {
		if validID(bad, "q_") {
			t.Errorf("validID(%q) = true", bad)
		}
	}
}
