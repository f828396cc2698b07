package watch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/problem"
)

// goodWatch is a watch as Create writes it, with a check in progress.
func goodWatch() *Watch {
	last := t0.Add(-time.Hour)
	retry := 3
	return &Watch{ID: newID(t0), Owner: "fleet", SubjectHash: strings.Repeat("ab", 16), Sources: []string{"caba"},
		CallbackURL: "https://hooks.example.com/w", Interval: 6 * time.Hour, CreatedAt: t0, NextCheckAt: t0.Add(time.Hour),
		LastCheckAt: &last, Status: []SourceStatus{{Source: "caba", LastSuccessAt: &last,
			Problem: &problem.Problem{Type: "https://e.test/problems/circuit-open", Title: "t", Status: 503, RetryAfter: &retry}}},
		Check: &Check{Due: t0, Started: t0, Until: t0.Add(time.Hour), Parts: []Part{{Source: "caba", Tries: 2, LastTry: t0, NextTry: t0.Add(time.Minute)}}}}
}

// FuzzDecode feeds bytes to the decoders of what RedisStore reads back
// (kind picks one: a watch's document, its sealed infractions, its sealed
// subject, its sealed delivery). Never a panic; a value accepted encodes
// again to one decoded the same, and its view encodes.
func FuzzDecode(f *testing.F) {
	keys := testKeys(f)
	w := goodWatch()
	doc, _ := json.Marshal(w)
	in := Infractions{"caba": {AsOf: t0, Infractions: []aggregator.Infraction{{Source: "caba", ID: "Q-1", Status: aggregator.Unpaid}}}}
	plain, _ := json.Marshal(in)
	for _, seed := range []struct {
		kind uint8
		doc  []byte
	}{
		{0, doc}, {0, []byte(`{}`)}, {0, []byte(`null`)}, {0, bytes.Replace(doc, []byte(`"interval":21600000000000`), []byte(`"interval":-1`), 1)},
		{0, bytes.Replace(doc, []byte(`"owner":"fleet"`), []byte(`"owner":""`), 1)},
		{0, bytes.Replace(doc, []byte(`"status":503`), []byte(`"status":200`), 1)},
		{1, plain}, {1, []byte(`{"caba":{"as_of":"2026-03-14T09:00:00Z","infractions":[{"source":"cordoba","id":"x","status":"paid"}]}}`)},
		{1, []byte(`{"caba":{"as_of":"2026-03-14T09:00:00Z","infractions":null}}`)},
		{2, []byte("domain:AB123CD")}, {2, []byte("domain:ab123cd")}, {2, []byte("id:20123456786")}, {2, []byte("id:20-12345678-6")},
		{3, []byte(`{"version":1,"payload":{"type":"infractions.changed"}}`)}, {3, []byte(`{"version":0,"payload":{}}`)},
	} {
		f.Add(seed.kind, seed.doc)
	}
	f.Fuzz(func(t *testing.T, kind uint8, b []byte) {
		id := w.ID
		switch kind % 4 {
		case 0:
			got, ok := decodeWatch(b, id)
			if !ok {
				return
			}
			enc, err := json.Marshal(got)
			if err != nil {
				t.Fatalf("%s accepted, does not encode: %v", b, err)
			}
			again, ok := decodeWatch(enc, id)
			if !ok {
				t.Fatalf("%s accepted, encoded as %s, which is not", b, enc)
			}
			if enc2, _ := json.Marshal(again); !bytes.Equal(enc, enc2) {
				t.Errorf("no round trip:\n%s\n%s", enc, enc2)
			}
		case 1:
			sealed, _ := keys.Seal(associated(id, partKnown), b)
			got, err := openInfractions(keys, id, partKnown, sealed)
			if err != nil {
				return
			}
			if _, err := openInfractions(keys, id, partHeld, sealed); err == nil {
				t.Errorf("known infractions opened as held ones")
			}
			for source, r := range got {
				for _, i := range r.Infractions {
					if i.Source != source || i.ID == "" || !i.Status.Valid() {
						t.Errorf("accepted %+v under %s", i, source)
					}
				}
			}
		case 2:
			sealed, _ := keys.Seal(associated(id, partSubject), b)
			q, err := openSubject(keys, id, sealed)
			if err != nil {
				return
			}
			if _, bad := aggregator.NewQuery(q.Domain, q.ID, q.Domain != "", q.ID != ""); len(bad) > 0 || subject(q) != string(b) {
				t.Errorf("subject %q accepted as %+v", b, q)
			}
		case 3:
			sealed, _ := keys.Seal(associated(id, partOut), b)
			o, err := openOut(keys, id, sealed)
			if err == nil && (o.Version < 1 || !json.Valid(o.Payload)) {
				t.Errorf("delivery %s accepted as %+v", b, o)
			}
		}
	})
}

// logs collects log lines.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Redis contents are untrusted (SPEC 9): watches whose stored values are
// not what the store writes, and keys of another type, are skipped and
// reported by key name, never a panic, an error or a value in a log; a
// good watch beside them is checked as usual.
func TestRedisStoreUnreadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := testRedis(t)
	var lines logs
	s := NewRedisStore(c, prefix).WithLogger(slog.New(slog.NewTextHandler(&lines, nil)))
	keys := testKeys(t)
	good := goodWatch()
	good.Check = nil
	sealed, _ := sealSubject(keys, good.ID, q)
	if err := s.Create(ctx, &Record{Watch: *good, Subject: sealed}, t0, 10); err != nil {
		t.Fatal(err)
	}
	doc, _ := json.Marshal(good)
	bad := map[string]func(key, id string){
		"not a hash":     func(key, _ string) { c.Set(ctx, key, "x", 0) },
		"doc not JSON":   func(key, _ string) { c.HSet(ctx, key, "doc", "{", "subject", sealed, "ver", 0, "token", 0) },
		"doc of another": func(key, _ string) { c.HSet(ctx, key, "doc", doc, "subject", sealed, "ver", 0, "token", 0) },
		"no doc":         func(key, _ string) { c.HSet(ctx, key, "subject", sealed) },
		"bad version": func(key, id string) {
			c.HSet(ctx, key, "doc", docOf(good, id), "subject", sealed, "ver", "-1", "token", 0)
		},
		"version, no known": func(key, id string) {
			c.HSet(ctx, key, "doc", docOf(good, id), "subject", sealed, "ver", "3", "token", 0)
		},
	}
	var ids []string
	for _, mk := range bad {
		id := newID(t0)
		mk(s.watch(id), id)
		c.ZAdd(ctx, s.due(), redisZ(t0, id))
		c.ZAdd(ctx, s.owner("fleet"), redisZ(time.Time{}, id))
		ids = append(ids, id)
	}
	// A token that is not one is rewritten by the next claim: the watch
	// is otherwise sound, and is claimed.
	repaired := newID(t0)
	c.HSet(ctx, s.watch(repaired), "doc", docOf(good, repaired), "subject", sealed, "ver", 0, "token", "x")
	c.ZAdd(ctx, s.due(), redisZ(t0, repaired))
	c.ZAdd(ctx, s.due(), redisZ(t0, "not-an-id"))
	c.ZAdd(ctx, s.owner("fleet"), redisZ(time.Time{}, "not-an-id"))

	for _, id := range ids {
		if _, err := s.Get(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get of an unreadable watch: %v, want ErrNotFound", err)
		}
	}
	records, _, err := s.List(ctx, "fleet", "", 100)
	if err != nil || len(records) != 1 || records[0].Watch.ID != good.ID {
		t.Errorf("List = %d records, %v; want only the good one", len(records), err)
	}
	claims, err := s.Claim(ctx, t0, time.Minute, 100)
	if err != nil || len(claims) != 2 {
		t.Fatalf("Claim = %d, %v; want the good one and the repaired one", len(claims), err)
	}
	if claims[0].Watch.ID != good.ID {
		claims[0], claims[1] = claims[1], claims[0]
	}
	if claims[0].Watch.ID != good.ID || claims[1].Watch.ID != repaired || claims[1].Token != 1 {
		t.Fatalf("claimed %s (token %d) and %s (token %d)", claims[0].Watch.ID, claims[0].Token, claims[1].Watch.ID, claims[1].Token)
	}
	if n, _ := s.Count(ctx); n != 2 {
		t.Errorf("Count = %d: the unreadable ones left the schedule, the good ones stay", n)
	}
	// A "token" a worker read before the claim that renewed it is refused.
	if ok, _ := s.Save(ctx, good.ID, claims[0].Token-1, &Update{Watch: *good, Due: t0}); ok {
		t.Error("a stale token's write was accepted")
	}
	if ok, err := s.Save(ctx, good.ID, claims[0].Token, &Update{Watch: *good, Due: t0}); !ok || err != nil {
		t.Errorf("the claim's write: %v, %v", ok, err)
	}
	for _, id := range ids {
		if !strings.Contains(lines.String(), s.watch(id)) {
			t.Errorf("the unreadable %s was not reported by name", s.watch(id))
		}
	}
	if strings.Contains(lines.String(), plate) || strings.Contains(lines.String(), "hooks.example.com") {
		t.Errorf("a log line holds a value: %s", lines.String())
	}

	// Keys of another type: empty, never an error.
	for _, k := range []string{s.due(), s.owner("fleet"), s.subject(good.SubjectHash)} {
		c.Del(ctx, k)
		c.Set(ctx, k, "x", 0)
	}
	if _, err := s.Claim(ctx, t0, time.Minute, 10); err != nil {
		t.Errorf("Claim over a due key of another type: %v", err)
	}
	if _, _, err := s.List(ctx, "fleet", "", 10); err != nil {
		t.Errorf("List over an index of another type: %v", err)
	}
	if _, err := s.BySubject(ctx, good.SubjectHash); err != nil {
		t.Errorf("BySubject over a key of another type: %v", err)
	}
	if _, _, err := s.NextDue(ctx); err != nil {
		t.Errorf("NextDue over a key of another type: %v", err)
	}
	if err := s.Delete(ctx, good.ID); err != nil {
		t.Errorf("Delete beside index keys of another type: %v", err)
	}
}

// docOf is w's document under id.
func docOf(w *Watch, id string) []byte {
	c := *w
	c.ID = id
	b, _ := json.Marshal(&c)
	return b
}

func redisZ(at time.Time, id string) redis.Z {
	if at.IsZero() {
		return redis.Z{Member: id}
	}
	return redis.Z{Score: float64(at.UnixMilli()), Member: id}
}
