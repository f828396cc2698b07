package async

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator"
)

func TestMemoryStore(t *testing.T) {
	testStore(t, NewMemoryStore())
}

func TestRedisStore(t *testing.T) {
	c, prefix := testRedis(t)
	s := NewRedisStore(c, prefix)
	testStore(t, s)
	// No key holds the plate: only generated ids.
	keys, err := c.Keys(context.Background(), prefix+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) == 0 {
		t.Fatal("no keys written")
	}
	for _, k := range keys {
		if strings.Contains(k, "AB123CD") {
			t.Errorf("key %s holds the plate", k)
		}
	}
}

// testStore is the behaviour every Store must have.
func testStore(t *testing.T, s Store) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	q := &Query{ID: newID("q_"), Status: Pending, Domain: "AB123CD", CallbackURL: "https://hooks.example.com/cb",
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
		Parts: []Part{{Entry: aggregator.SourceResult{Source: "caba", Operation: aggregator.ByDomain, Status: aggregator.EntrySkipped}}}}
	if _, err := s.Query(ctx, q.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown query: %v, want ErrNotFound", err)
	}
	if err := s.CreateQuery(ctx, q, t0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	got, err := s.Query(ctx, q.ID)
	if err != nil || got.Domain != "AB123CD" || got.Status != Pending || len(got.Parts) != 1 {
		t.Fatalf("Query = %+v, %v", got, err)
	}

	// Claims: not before due; once due, leased.
	if ids, _ := s.ClaimQueries(ctx, t0, time.Minute, 10); len(ids) != 0 {
		t.Fatalf("claimed %v before due", ids)
	}
	if ids, _ := s.ClaimQueries(ctx, t0.Add(time.Second), time.Minute, 10); len(ids) != 1 || ids[0] != q.ID {
		t.Fatalf("claim at due = %v", ids)
	}
	if ids, _ := s.ClaimQueries(ctx, t0.Add(30*time.Second), time.Minute, 10); len(ids) != 0 {
		t.Fatalf("claimed %v during the lease", ids)
	}
	if ids, _ := s.ClaimQueries(ctx, t0.Add(62*time.Second), time.Minute, 10); len(ids) != 1 {
		t.Fatalf("not claimed again after the lease: %v", ids)
	}
	if at, ok, err := s.NextDue(ctx); err != nil || !ok || !at.Equal(t0.Add(122*time.Second)) {
		t.Fatalf("NextDue = %v %v %v", at, ok, err)
	}

	q.Parts[0].Tries = 3
	if ok, err := s.SaveQuery(ctx, q, t0.Add(200*time.Second)); !ok || err != nil {
		t.Fatalf("SaveQuery = %v, %v", ok, err)
	}
	if got, _ := s.Query(ctx, q.ID); got.Parts[0].Tries != 3 {
		t.Fatalf("saved tries = %d", got.Parts[0].Tries)
	}

	// Finishing: once, with its delivery scheduled.
	q.Status = Completed
	done := t0.Add(300 * time.Second)
	q.CompletedAt = &done
	d := &Delivery{ID: newID("dlv_"), MessageID: "msg_" + q.ID, QueryID: q.ID, CallbackURL: q.CallbackURL,
		Payload: json.RawMessage(`{"type":"query.completed"}`), CreatedAt: done, Due: done}
	if ok, err := s.FinishQuery(ctx, q, d, time.Hour); !ok || err != nil {
		t.Fatalf("FinishQuery = %v, %v", ok, err)
	}
	if ok, _ := s.FinishQuery(ctx, q, &Delivery{ID: newID("dlv_"), Due: done}, time.Hour); ok {
		t.Fatal("a query finished twice")
	}
	if ok, _ := s.SaveQuery(ctx, q, done); ok {
		t.Fatal("a finished query saved as pending")
	}
	if got, err := s.Query(ctx, q.ID); err != nil || got.Status != Completed {
		t.Fatalf("finished query = %+v, %v", got, err)
	}
	if ids, _ := s.ClaimQueries(ctx, done.Add(time.Hour), time.Minute, 10); len(ids) != 0 {
		t.Fatalf("a finished query claimed: %v", ids)
	}

	// Deliveries: claimed when due, leased, rescheduled, dead-lettered.
	ds, err := s.ClaimDeliveries(ctx, done, time.Minute, 10)
	if err != nil || len(ds) != 1 || ds[0].ID != d.ID || string(ds[0].Payload) != string(d.Payload) {
		t.Fatalf("ClaimDeliveries = %+v, %v", ds, err)
	}
	if ds, _ := s.ClaimDeliveries(ctx, done.Add(time.Second), time.Minute, 10); len(ds) != 0 {
		t.Fatalf("delivery claimed during its lease: %v", ds)
	}
	d.Attempts, d.Due = 1, done.Add(2*time.Second)
	if err := s.SaveDelivery(ctx, d); err != nil {
		t.Fatal(err)
	}
	ds, _ = s.ClaimDeliveries(ctx, done.Add(2*time.Second), time.Minute, 10)
	if len(ds) != 1 || ds[0].Attempts != 1 {
		t.Fatalf("rescheduled delivery = %+v", ds)
	}
	e := DLQEntry{ID: d.ID, QueryID: q.ID, CallbackURL: d.CallbackURL, Attempts: 5, LastError: "HTTP 500",
		CreatedAt: done, FailedAt: done.Add(time.Minute), Payload: d.Payload, MessageID: d.MessageID}
	if err := s.DeadLetter(ctx, d, e); err != nil {
		t.Fatal(err)
	}
	if ds, _ := s.ClaimDeliveries(ctx, done.Add(time.Hour), time.Minute, 10); len(ds) != 0 {
		t.Fatalf("dead-lettered delivery claimed: %v", ds)
	}
	entries, err := s.DLQ(ctx)
	if err != nil || len(entries) != 1 || entries[0].ID != d.ID || entries[0].MessageID != d.MessageID ||
		entries[0].Attempts != 5 || !entries[0].FailedAt.Equal(e.FailedAt) {
		t.Fatalf("DLQ = %+v, %v", entries, err)
	}
	if n, _ := s.DLQLen(ctx); n != 1 {
		t.Fatalf("DLQLen = %d", n)
	}

	// Redeliver: the entry becomes a fresh delivery of the same message.
	if err := s.Redeliver(ctx, "nope", nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Redeliver(unknown) = %v", err)
	}
	fresh := &Delivery{}
	err = s.Redeliver(ctx, d.ID, func(e DLQEntry) *Delivery {
		*fresh = Delivery{ID: newID("dlv_"), MessageID: e.MessageID, QueryID: e.QueryID, CallbackURL: e.CallbackURL,
			Payload: e.Payload, CreatedAt: done, Due: done}
		return fresh
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := s.DLQLen(ctx); n != 0 {
		t.Fatalf("DLQLen after redeliver = %d", n)
	}
	ds, _ = s.ClaimDeliveries(ctx, done.Add(time.Hour), time.Minute, 10)
	if len(ds) != 1 || ds[0].ID != fresh.ID || ds[0].MessageID != d.MessageID || ds[0].Attempts != 0 {
		t.Fatalf("redelivery = %+v", ds)
	}
	if err := s.DeleteDelivery(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.NextDue(ctx); ok {
		t.Fatal("something still scheduled")
	}

	// Delete from the DLQ.
	e2 := e
	e2.ID = newID("dlv_")
	if err := s.DeadLetter(ctx, &Delivery{ID: e2.ID}, e2); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDLQ(ctx, e2.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteDLQ(ctx, e2.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("DeleteDLQ twice = %v", err)
	}
}
