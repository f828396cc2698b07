package async

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/client"
	"github.com/multas/aggregator/memory"
)

// The deliveries of a watch (SPEC 15), in every Store: the same message
// added twice is one delivery; cancelling the watch drops its pending
// deliveries and its dead letters, and a worker that still holds one
// cannot bring it back by saving or dead-lettering it.
func TestWatchDeliveriesInStores(t *testing.T) {
	t.Parallel()
	stores := map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemoryStore() },
		"redis": func(t *testing.T) Store {
			c, prefix := testRedis(t)
			return NewRedisStore(c, prefix)
		},
	}
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := mk(t)
			t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
			wid, other := "w_"+newID(""), "w_"+newID("")
			mk := func(wid string, version int64) *Delivery {
				id, msg := WatchMessage(wid, version)
				return &Delivery{ID: id, MessageID: msg, WatchID: wid, Signer: "fleet", CallbackURL: "https://hooks.example.com/w",
					Payload: json.RawMessage(`{"type":"infractions.changed"}`), CreatedAt: t0, Due: t0}
			}
			d1, d2, keep := mk(wid, 1), mk(wid, 2), mk(other, 1)
			for _, d := range []*Delivery{d1, d2, keep} {
				if ok, err := s.AddDelivery(ctx, d); !ok || err != nil {
					t.Fatalf("AddDelivery(%s) = %v, %v", d.MessageID, ok, err)
				}
			}
			again := *d1
			again.Attempts = 0
			if ok, err := s.AddDelivery(ctx, &again); ok || err != nil {
				t.Fatalf("the same message added twice: %v, %v", ok, err)
			}
			ds, err := s.ClaimDeliveries(ctx, t0, time.Minute, 10)
			if err != nil || len(ds) != 3 {
				t.Fatalf("ClaimDeliveries = %d deliveries, %v; want 3", len(ds), err)
			}
			for _, d := range ds {
				if d.WatchID == "" || d.QueryID != "" || d.Signer != "fleet" {
					t.Errorf("claimed %+v: want its watch id and signer, no query id", d)
				}
			}
			// d2 fails its last attempt: a dead letter of the watch's.
			e := DLQEntry{ID: d2.ID, WatchID: wid, CallbackURL: d2.CallbackURL, Attempts: 5, LastError: "HTTP 500",
				CreatedAt: t0, FailedAt: t0.Add(time.Minute), Payload: d2.Payload, MessageID: d2.MessageID, Signer: "fleet"}
			if err := s.DeadLetter(ctx, d2, e); err != nil {
				t.Fatal(err)
			}
			entries, err := s.DLQ(ctx)
			if err != nil || len(entries) != 1 || entries[0].WatchID != wid || entries[0].QueryID != "" || entries[0].Signer != "fleet" {
				t.Fatalf("DLQ = %+v, %v; want the watch's entry", entries, err)
			}
			n, err := s.CancelWatch(ctx, wid)
			if err != nil || n != 2 {
				t.Fatalf("CancelWatch = %d, %v; want its pending delivery and its dead letter", n, err)
			}
			if n, _ := s.DLQLen(ctx); n != 0 {
				t.Errorf("DLQ has %d entries after CancelWatch", n)
			}
			// A worker still holding d1 reschedules it, or dead-letters it:
			// neither brings it back.
			d1.Attempts, d1.Due = 1, t0.Add(2*time.Minute)
			if err := s.SaveDelivery(ctx, d1); err != nil {
				t.Fatal(err)
			}
			if err := s.DeadLetter(ctx, d1, DLQEntry{ID: d1.ID, WatchID: wid, CallbackURL: d1.CallbackURL, Attempts: 5,
				LastError: "HTTP 500", CreatedAt: t0, FailedAt: t0, Payload: d1.Payload}); err != nil {
				t.Fatal(err)
			}
			if n, _ := s.DLQLen(ctx); n != 0 {
				t.Errorf("a cancelled delivery was dead-lettered")
			}
			ds, _ = s.ClaimDeliveries(ctx, t0.Add(time.Hour), time.Minute, 10)
			if len(ds) != 1 || ds[0].ID != keep.ID {
				t.Fatalf("after CancelWatch claimed %d deliveries, want only the other watch's", len(ds))
			}
			if n, err := s.CancelWatch(ctx, wid); n != 0 || err != nil {
				t.Errorf("CancelWatch twice = %d, %v", n, err)
			}

			// A watch's dead letter redelivered stays the watch's: it keeps
			// its watch id and signer, and CancelWatch drops it.
			e.ID = keep.ID
			e.WatchID, e.MessageID = other, keep.MessageID
			if err := s.DeadLetter(ctx, keep, e); err != nil {
				t.Fatal(err)
			}
			var fresh *Delivery
			err = s.Redeliver(ctx, keep.ID, func(e DLQEntry) *Delivery {
				fresh = &Delivery{ID: newID("dlv_"), MessageID: e.MessageID, WatchID: e.WatchID, Signer: e.Signer,
					CallbackURL: e.CallbackURL, Payload: e.Payload, CreatedAt: t0, Due: t0}
				return fresh
			})
			if err != nil || fresh.WatchID != other || fresh.Signer != "fleet" {
				t.Fatalf("Redeliver: %v, %+v", err, fresh)
			}
			if n, err := s.CancelWatch(ctx, other); n != 1 || err != nil {
				t.Errorf("CancelWatch of the redelivered = %d, %v; want 1", n, err)
			}
			if _, ok, _ := s.NextDue(ctx); ok {
				t.Error("something still scheduled")
			}
		})
	}
}

// Every delivery is signed with the secret of the API key that owns its
// work (SPEC 15): a query's and a watch's alike, each verifiable with the
// client package's verifier under that key's secret only; work of no key,
// or of a key without a secret of its own, is signed with
// webhooks.signing_secret.
func TestSignedWithTheKeysSecret(t *testing.T) {
	t.Parallel()
	secret := func(s string) string { return "whsec_" + base64.StdEncoding.EncodeToString([]byte(s)) }
	def, fleet, rental := secret("default-key-0123456789abcdef0123"), secret("fleet-key-0123456789abcdef012345"), secret("rental-key-0123456789abcdef01234")
	r := newRig(t, Options{AllowPrivate: true, Secret: def,
		Secrets: map[string]string{"fleet": fleet, "rental": rental, "plain": ""}})
	recv := newReceiver(t, r.clock, 200)
	q := aggregator.Query{Domain: "AB123CD"}
	set, _ := r.eng.Select(q, nil)
	for _, signer := range []string{"fleet", "", "plain"} {
		if _, err := r.m.Submit(context.Background(), Request{Query: q, Sources: set, CallbackURL: recv.srv.URL + "/q", Signer: signer}); err != nil {
			t.Fatal(err)
		}
	}
	wid := "w_" + newID("")
	id, msg := WatchMessage(wid, 1)
	d := Delivery{ID: id, MessageID: msg, WatchID: wid, Signer: "rental", CallbackURL: recv.srv.URL + "/w",
		Payload: json.RawMessage(`{"type":"infractions.changed","data":{}}`)}
	for range 2 {
		if err := r.m.Send(context.Background(), d); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.m.Send(context.Background(), Delivery{ID: newID("dlv_"), MessageID: "msg_x", CallbackURL: recv.srv.URL}); !errors.Is(err, ErrInvalidDelivery) {
		t.Errorf("Send of a delivery of no watch = %v, want ErrInvalidDelivery", err)
	}
	eventually(t, "four deliveries", func() bool { return r.counts.get(OutcomeDelivered) == 4 })
	time.Sleep(20 * time.Millisecond)
	hooks := recv.hooks()
	if len(hooks) != 4 {
		t.Fatalf("%d deliveries, want 4: the watch's message, sent twice, is one", len(hooks))
	}
	want := map[string]string{"fleet": fleet, "": def, "plain": def, "rental": rental}
	for _, h := range hooks {
		signer := "rental"
		if m := h.header.Get(HeaderID); m != msg {
			qq, err := r.store.Query(context.Background(), m[len("msg_"):])
			if err != nil {
				t.Fatal(err)
			}
			signer = qq.Signer
		}
		for name, s := range map[string]string{"default": def, "fleet": fleet, "rental": rental} {
			err := client.VerifyWebhook(s, h.header, h.body, 0, h.at)
			if ok := s == want[signer]; ok != (err == nil) {
				t.Errorf("delivery of %q verified with the %s secret: %v", signer, name, err)
			}
		}
	}
}

// CancelWatch stops a watch's deliveries that have not gone: those held
// back by the origin's breaker, or waiting for their retry.
func TestCancelWatchStopsItsDeliveries(t *testing.T) {
	t.Parallel()
	r := newRig(t, Options{AllowPrivate: true, Backoff: time.Minute, MaxAttempts: 5})
	recv := newReceiver(t, r.clock, 500)
	wid := "w_" + newID("")
	id, msg := WatchMessage(wid, 7)
	if err := r.m.Send(context.Background(), Delivery{ID: id, MessageID: msg, WatchID: wid, CallbackURL: recv.srv.URL,
		Payload: json.RawMessage(`{"type":"infractions.changed"}`)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "first attempt", func() bool { return r.counts.get(OutcomeFailed) == 1 })
	if err := r.m.CancelWatch(context.Background(), wid); err != nil {
		t.Fatal(err)
	}
	r.clock.Advance(time.Hour)
	time.Sleep(50 * time.Millisecond)
	if got := len(recv.hooks()); got != 1 {
		t.Errorf("%d attempts, want the one before CancelWatch", got)
	}
	if ds := r.store.pending(t); len(ds) != 0 {
		t.Errorf("pending after CancelWatch: %+v", ds)
	}
}

// With the memory's keys, a watch's payload is sealed wherever it is
// stored, pending or dead-lettered, and opened only to be sent (the same
// bytes, signed as sent) or listed for the operators.
func TestWatchPayloadSealed(t *testing.T) {
	t.Parallel()
	keys, err := memory.NewKeys([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	key := []byte("0123456789abcdef0123456789abcdef")
	r := newRig(t, Options{AllowPrivate: true, Keys: keys, MaxAttempts: 2, Backoff: time.Second,
		Secret: "whsec_" + base64.StdEncoding.EncodeToString(key)})
	recv := newReceiver(t, r.clock, 500)
	wid := "w_" + newID("")
	id, msg := WatchMessage(wid, 1)
	payload := `{"type":"infractions.changed","data":{"subject":{"domain":"AB123CD"}}}`
	if err := r.m.Send(context.Background(), Delivery{ID: id, MessageID: msg, WatchID: wid, CallbackURL: recv.srv.URL,
		Payload: json.RawMessage(payload)}); err != nil {
		t.Fatal(err)
	}
	inClear := func() bool {
		r.store.mu.Lock()
		defer r.store.mu.Unlock()
		for _, b := range r.store.deliveries {
			if strings.Contains(string(b), "AB123CD") {
				return true
			}
		}
		for _, e := range r.store.dlq {
			if b, _ := json.Marshal(e); strings.Contains(string(b), "AB123CD") {
				return true
			}
		}
		return false
	}
	if inClear() {
		t.Error("a pending watch delivery holds its payload in clear")
	}
	eventually(t, "first attempt", func() bool { return len(recv.hooks()) == 1 })
	advanceIdle(t, r.m, r.clock, time.Second)
	eventually(t, "dead-lettered", func() bool { n, _ := r.store.DLQLen(context.Background()); return n == 1 })
	for _, h := range recv.hooks() {
		if string(h.body) != payload || h.header.Get(HeaderSignature) != Sign(key, msg, h.at, h.body) {
			t.Errorf("sent %s signed %s: want the payload as given, signed", h.body, h.header.Get(HeaderSignature))
		}
	}
	if inClear() {
		t.Error("a watch's dead letter holds its payload in clear")
	}
	entries, err := r.m.DLQ(context.Background())
	if err != nil || len(entries) != 1 || string(entries[0].Payload) != payload || entries[0].WatchID != wid {
		t.Errorf("DLQ = %+v, %v; want the payload opened for the operators", entries, err)
	}
}
