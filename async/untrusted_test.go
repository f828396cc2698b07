package async

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

// Redis contents are untrusted (SPEC 9): whatever the keys of the async
// store hold, what cannot be read is absent (listings skip it, a query or
// DLQ entry is ErrNotFound), work that cannot be read leaves the schedule,
// writes replace keys of another type, and the key's name is logged, never
// its value.

// marker is in every planted text value.
const marker = "GARBAGE"

// syncBuffer collects log lines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// garbageStore is a RedisStore under a prefix of the test's own, logging
// to the returned buffer.
func garbageStore(t *testing.T) (*RedisStore, *redis.Client, string, *syncBuffer) {
	t.Helper()
	c, prefix := testRedis(t)
	buf := &syncBuffer{}
	s := NewRedisStore(c, prefix).WithLogger(slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	return s, c, prefix, buf
}

// checkReported fails unless the log names key (as JSON would) and holds
// no planted value.
func checkReported(t *testing.T, log *syncBuffer, key string) {
	t.Helper()
	out := log.String()
	name, _ := json.Marshal(key)
	if !strings.Contains(out, `"key":`+string(name)) {
		t.Errorf("the log does not name %s:\n%s", key, out)
	}
	if strings.Contains(out, marker) {
		t.Errorf("the log holds a planted value:\n%s", out)
	}
}

var t0 = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

// goodQuery is a query as Submit stores it.
func goodQuery() *Query {
	return &Query{ID: newID("q_"), Status: Pending, Domain: "AB123CD", CallbackURL: "https://hooks.example.com/cb",
		CreatedAt: t0, ExpiresAt: t0.Add(time.Hour),
		Parts: []Part{{Entry: aggregator.SourceResult{Source: "caba", Jurisdiction: "CABA",
			Operation: aggregator.ByDomain, Status: aggregator.EntrySkipped}}}}
}

// queryDocs are documents of query id that are not queries this package
// writes.
func queryDocs(id string) map[string]string {
	doc := func(mod func(q *Query)) string {
		q := goodQuery()
		q.ID = id
		mod(q)
		b, _ := json.Marshal(q)
		return string(b)
	}
	done := t0.Add(time.Minute)
	return map[string]string{
		"not JSON":           marker + "\x00\xff{",
		"an array":           `["` + marker + `"]`,
		"another id":         doc(func(q *Query) { q.ID = newID("q_") }),
		"an unknown status":  doc(func(q *Query) { q.Status = marker }),
		"pending, completed": doc(func(q *Query) { q.CompletedAt = &done }),
		"completed, no time": doc(func(q *Query) { q.Status = Completed }),
		"no lookup":          doc(func(q *Query) { q.Domain = "" }),
		"two lookups":        doc(func(q *Query) { q.PersonID = "20314159269"; q.IDKind = aggregator.CUIT }),
		"a bad plate":        doc(func(q *Query) { q.Domain = marker }),
		"a plate not normalised": doc(func(q *Query) {
			q.Domain = "ab-123-cd"
		}),
		"a bad CUIT":            doc(func(q *Query) { q.Domain, q.PersonID, q.IDKind = "", "20314159268", aggregator.CUIT }),
		"a wrong id kind":       doc(func(q *Query) { q.Domain, q.PersonID, q.IDKind = "", "20314159269", aggregator.DNI }),
		"a callback not http":   doc(func(q *Query) { q.CallbackURL = "file:///etc/passwd" }),
		"no callback":           doc(func(q *Query) { q.CallbackURL = "" }),
		"expires before":        doc(func(q *Query) { q.ExpiresAt = t0.Add(-time.Second) }),
		"no creation time":      doc(func(q *Query) { q.CreatedAt = time.Time{} }),
		"a part status":         doc(func(q *Query) { q.Parts[0].Entry.Status = marker }),
		"a part operation":      doc(func(q *Query) { q.Parts[0].Entry.Operation = aggregator.Voucher }),
		"a part without source": doc(func(q *Query) { q.Parts[0].Entry.Source = "" }),
		"negative tries":        doc(func(q *Query) { q.Parts[0].Tries = -1 }),
		"a negative count":      doc(func(q *Query) { n := -1; q.Parts[0].Entry.Count = &n }),
		"remembered without as_of": doc(func(q *Query) {
			q.Parts[0].Entry.Remembered = &aggregator.Remembered{}
		}),
		"remembered beyond 9999": strings.Replace(doc(func(q *Query) {
			q.Parts[0].Entry.Remembered = &aggregator.Remembered{AsOf: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		}), `"as_of":"2026`, `"as_of":"12026`, 1),
		"a problem of status 200": doc(func(q *Query) {
			q.Parts[0].Entry.Problem = &problem.Problem{Status: 200}
		}),
		"an infraction of another source": doc(func(q *Query) {
			q.Parts[0].Infractions = []aggregator.Infraction{{Source: "other", Status: aggregator.Unpaid}}
		}),
		"too many parts":     doc(func(q *Query) { q.Parts = make([]Part, maxParts+1) }),
		"a year beyond 9999": strings.Replace(doc(func(*Query) {}), `"expires_at":"2026`, `"expires_at":"12026`, 1),
		// A trace context of another shape; one of the right shape that is
		// not sound is dropped alone (TestRedisStoreUnsoundTrace).
		"a trace not an object":      strings.Replace(doc(func(*Query) {}), `"parts":`, `"trace":"`+marker+`","parts":`, 1),
		"a traceparent not a string": strings.Replace(doc(func(*Query) {}), `"parts":`, `"trace":{"traceparent":7},"parts":`, 1),
	}
}

// TestRedisStoreUnreadableQuery: a query whose key holds another type, no
// document, or a document that is not a query this package writes is not
// found, and leaves the schedule at once.
func TestRedisStoreUnreadableQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, prefix, log := garbageStore(t)
	plants := map[string]func(key, id string){
		"a string":        func(k, _ string) { c.Set(ctx, k, marker, 0) },
		"a list":          func(k, _ string) { c.RPush(ctx, k, marker) },
		"a set":           func(k, _ string) { c.SAdd(ctx, k, marker) },
		"a hash, no doc":  func(k, _ string) { c.HSet(ctx, k, "status", "pending", marker, marker) },
		"no key at all":   func(string, string) {},
		"a doc, no state": func(k, id string) { c.HSet(ctx, k, "doc", queryDocs(id)["not JSON"]) },
	}
	for name, doc := range queryDocs("") {
		plants["a document: "+name] = func(k, id string) {
			c.HSet(ctx, k, "status", "pending", "doc", strings.ReplaceAll(doc, `"id":""`, `"id":"`+id+`"`))
		}
	}
	for name, plant := range plants {
		id := newID("q_")
		key := prefix + "{async}:q:" + id
		plant(key, id)
		c.ZAdd(ctx, prefix+"{async}:q:due", redis.Z{Score: float64(t0.UnixMilli()), Member: id})
		if _, err := s.Query(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: Query = %v, want ErrNotFound", name, err)
		}
		if err := c.ZScore(ctx, prefix+"{async}:q:due", id).Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("%s: still scheduled (%v)", name, err)
		}
		if name != "no key at all" {
			checkReported(t, log, key)
		}
	}
	if ids, err := s.ClaimQueries(ctx, t0.Add(time.Hour), time.Minute, 100); err != nil || len(ids) != 0 {
		t.Errorf("ClaimQueries = %v, %v; want nothing left", ids, err)
	}
	// The well-formed document of the same tests is read.
	q := goodQuery()
	if err := s.CreateQuery(ctx, q, t0); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Query(ctx, q.ID); err != nil || got.ID != q.ID {
		t.Fatalf("Query of a good document = %+v, %v", got, err)
	}
}

// TestRedisStoreUnreadableSchedule: schedules of another type are empty
// and replaced by the next write; members that are not ids leave them;
// due times that are not times are claimed or ignored, never waited for.
func TestRedisStoreUnreadableSchedule(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, prefix, log := garbageStore(t)
	for _, key := range []string{"q:due", "d:due", "dlq"} {
		c.Set(ctx, prefix+"{async}:"+key, marker, 0)
	}
	if ids, err := s.ClaimQueries(ctx, t0, time.Minute, 10); err != nil || len(ids) != 0 {
		t.Errorf("ClaimQueries of a string = %v, %v", ids, err)
	}
	checkReported(t, log, prefix+"{async}:q:due")
	if ds, err := s.ClaimDeliveries(ctx, t0, time.Minute, 10); err != nil || len(ds) != 0 {
		t.Errorf("ClaimDeliveries of a string = %v, %v", ds, err)
	}
	if _, ok, err := s.NextDue(ctx); ok || err != nil {
		t.Errorf("NextDue = %v, %v; want nothing", ok, err)
	}
	c.Set(ctx, prefix+"{async}:q:due", marker, 0)
	c.Set(ctx, prefix+"{async}:d:due", marker, 0)
	q := goodQuery()
	if err := s.CreateQuery(ctx, q, t0); err != nil {
		t.Fatalf("CreateQuery over a string schedule: %v", err)
	}
	d := &Delivery{ID: newID("dlv_"), MessageID: "msg_" + q.ID, QueryID: q.ID, CallbackURL: q.CallbackURL,
		Payload: json.RawMessage(`{"type":"query.completed"}`), CreatedAt: t0, Due: t0}
	if err := s.SaveDelivery(ctx, d); err != nil {
		t.Fatalf("SaveDelivery over a string schedule: %v", err)
	}
	e := DLQEntry{ID: newID("dlv_"), QueryID: q.ID, CallbackURL: q.CallbackURL, Attempts: 5, LastError: "HTTP 500",
		CreatedAt: t0, FailedAt: t0, Payload: d.Payload, MessageID: d.MessageID}
	if err := s.DeadLetter(ctx, &Delivery{ID: newID("dlv_")}, e); err != nil {
		t.Fatalf("DeadLetter over a string DLQ: %v", err)
	}
	checkReported(t, log, prefix+"{async}:dlq")
	if entries, err := s.DLQ(ctx); err != nil || len(entries) != 1 {
		t.Errorf("DLQ = %+v, %v", entries, err)
	}

	// Members that are not ids, and due times that are not times.
	c.ZAdd(ctx, prefix+"{async}:q:due",
		redis.Z{Score: 1, Member: marker + " AB123CD"},
		redis.Z{Score: 1e300, Member: newID("q_")},
		redis.Z{Score: float64(t0.Add(48 * time.Hour).UnixMilli()), Member: newID("q_")})
	ids, err := s.ClaimQueries(ctx, t0, time.Minute, 10)
	if err != nil || len(ids) != 3 {
		// q (due at t0) and the two scheduled absurdly far ahead.
		t.Errorf("ClaimQueries = %v, %v; want 3 ids", ids, err)
	}
	for _, id := range ids {
		if strings.Contains(id, marker) {
			t.Errorf("claimed %q", id)
		}
	}
	if n, _ := c.ZCard(ctx, prefix+"{async}:q:due").Result(); n != 3 {
		t.Errorf("%d members left in q:due, want 3 (the member that is not an id gone)", n)
	}
	c.ZAdd(ctx, prefix+"{async}:d:due", redis.Z{Score: -1e300, Member: newID("dlv_")})
	if at, ok, err := s.NextDue(ctx); err != nil || ok && (at.Year() < 2000 || at.Year() > 3000) {
		t.Errorf("NextDue = %v, %v, %v", at, ok, err)
	}
	if strings.Contains(log.String(), "AB123CD") {
		t.Errorf("the log holds a member:\n%s", log.String())
	}
}

// TestRedisStoreUnreadableDeliveries: a pending delivery that cannot be
// read is not claimed and leaves the schedule; the others are delivered.
func TestRedisStoreUnreadableDeliveries(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, prefix, log := garbageStore(t)
	q := goodQuery()
	good := func() *Delivery {
		return &Delivery{ID: newID("dlv_"), MessageID: "msg_" + q.ID, QueryID: q.ID, CallbackURL: q.CallbackURL,
			Payload: json.RawMessage(`{"type":"query.completed"}`), CreatedAt: t0, Due: t0}
	}
	enc := func(mod func(d *Delivery)) func(id string) string {
		return func(id string) string {
			d := good()
			d.ID = id
			mod(d)
			b, _ := json.Marshal(d)
			return string(b)
		}
	}
	docs := []func(id string) string{
		func(string) string { return marker + "\x00" },
		func(string) string { return `[]` },
		enc(func(d *Delivery) { d.ID = newID("dlv_") }), // another id
		enc(func(d *Delivery) { d.MessageID = marker }),
		enc(func(d *Delivery) { d.QueryID = marker }),
		enc(func(d *Delivery) { d.CallbackURL = "gopher://" + marker }),
		enc(func(d *Delivery) { d.Payload = json.RawMessage(`"` + marker + `"`) }),
		enc(func(d *Delivery) { d.Attempts = -1 }),
		enc(func(d *Delivery) { d.Attempts = maxAttempts + 1 }),
		enc(func(d *Delivery) { d.LastError = strings.Repeat("x", maxText+1) }),
	}
	var planted []string
	for _, doc := range docs {
		id := newID("dlv_")
		c.Set(ctx, prefix+"{async}:d:"+id, doc(id), 0)
		c.ZAdd(ctx, prefix+"{async}:d:due", redis.Z{Score: float64(t0.UnixMilli()), Member: id})
		planted = append(planted, id)
	}
	// Another type.
	other := newID("dlv_")
	c.HSet(ctx, prefix+"{async}:d:"+other, "doc", marker)
	c.ZAdd(ctx, prefix+"{async}:d:due", redis.Z{Score: float64(t0.UnixMilli()), Member: other})
	planted = append(planted, other)
	ok := good()
	if err := s.SaveDelivery(ctx, ok); err != nil {
		t.Fatal(err)
	}
	ds, err := s.ClaimDeliveries(ctx, t0, time.Minute, 100)
	if err != nil || len(ds) != 1 || ds[0].ID != ok.ID {
		t.Fatalf("ClaimDeliveries = %+v, %v; want the one good delivery", ds, err)
	}
	for _, id := range planted {
		if err := c.ZScore(ctx, prefix+"{async}:d:due", id).Err(); !errors.Is(err, redis.Nil) {
			t.Errorf("delivery %s still scheduled", id)
		}
		checkReported(t, log, prefix+"{async}:d:"+id)
	}
}

// TestRedisStoreUnreadableDLQ: DLQ entries that cannot be read are left
// out of the listing, cannot be redelivered (not found), and can be
// deleted; a DLQ of another type is an empty one.
func TestRedisStoreUnreadableDLQ(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, prefix, log := garbageStore(t)
	q := goodQuery()
	entry := func(id string) DLQEntry {
		return DLQEntry{ID: id, QueryID: q.ID, CallbackURL: q.CallbackURL, Attempts: 5, LastError: "HTTP 500",
			CreatedAt: t0, FailedAt: t0.Add(time.Minute), Payload: json.RawMessage(`{"type":"query.completed"}`),
			MessageID: "msg_" + q.ID}
	}
	good := entry(newID("dlv_"))
	if err := s.DeadLetter(ctx, &Delivery{ID: good.ID}, good); err != nil {
		t.Fatal(err)
	}
	record := func(e DLQEntry) string {
		b, _ := json.Marshal(dlqRecord{Entry: e, MessageID: e.MessageID})
		return string(b)
	}
	bad := map[string]func(id string) string{
		"not JSON":          func(string) string { return marker + "\x00" },
		"an entry of null":  func(string) string { return `{"entry": null}` },
		"another id":        func(string) string { return record(entry(newID("dlv_"))) },
		"no query":          func(id string) string { e := entry(id); e.QueryID = ""; return record(e) },
		"a callback":        func(id string) string { e := entry(id); e.CallbackURL = marker; return record(e) },
		"no payload":        func(id string) string { e := entry(id); e.Payload = nil; return record(e) },
		"negative attempts": func(id string) string { e := entry(id); e.Attempts = -3; return record(e) },
		"no failure time":   func(id string) string { e := entry(id); e.FailedAt = time.Time{}; return record(e) },
		"a message id":      func(id string) string { e := entry(id); e.MessageID = marker; return record(e) },
	}
	var ids []string
	for _, v := range bad {
		id := newID("dlv_")
		c.HSet(ctx, prefix+"{async}:dlq", id, v(id))
		ids = append(ids, id)
	}
	c.HSet(ctx, prefix+"{async}:dlq", marker+" AB123CD", record(entry(newID("dlv_"))))
	entries, err := s.DLQ(ctx)
	if err != nil || len(entries) != 1 || entries[0].ID != good.ID {
		t.Fatalf("DLQ = %+v, %v; want the one entry that is one", entries, err)
	}
	for _, id := range ids {
		if !strings.Contains(log.String(), "field "+id) {
			t.Errorf("the log does not name entry %s", id)
		}
		err := s.Redeliver(ctx, id, func(DLQEntry) *Delivery { t.Fatal("redelivering garbage"); return nil })
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("Redeliver(%s) = %v, want ErrNotFound", id, err)
		}
		if err := s.DeleteDLQ(ctx, id); err != nil {
			t.Errorf("DeleteDLQ(%s) = %v, want it deleted", id, err)
		}
		if n, _ := c.HExists(ctx, prefix+"{async}:dlq", id).Result(); n {
			t.Errorf("entry %s still there after DeleteDLQ", id)
		}
	}
	checkReported(t, log, prefix+"{async}:dlq")
	if out := log.String(); strings.Contains(out, "AB123CD") {
		t.Errorf("the log holds a field name read from Redis:\n%s", out)
	}

	// Another type.
	c.Del(ctx, prefix+"{async}:dlq")
	c.RPush(ctx, prefix+"{async}:dlq", marker)
	if entries, err := s.DLQ(ctx); err != nil || len(entries) != 0 {
		t.Errorf("DLQ of a list = %+v, %v", entries, err)
	}
	if n, err := s.DLQLen(ctx); err != nil || n != 0 {
		t.Errorf("DLQLen of a list = %d, %v", n, err)
	}
	if err := s.Redeliver(ctx, good.ID, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("Redeliver in a list = %v", err)
	}
	if err := s.DeleteDLQ(ctx, good.ID); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteDLQ in a list = %v", err)
	}
}

// TestRetainDropsUnreadableQuery: the worker finds a scheduled query it
// cannot read once, logs its key once, and never picks it up again; the
// work that can be read goes on.
func TestRetainDropsUnreadableQuery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, c, prefix, log := garbageStore(t)
	p := newPortal(t)
	clock := newFakeClock()
	p.clock = clock
	eng, set := testEngine(t, p, clock.Now, nil)
	recv := newReceiver(t, clock, 0)
	m, err := New(Options{Engine: eng, Breakers: set, Store: s, Clock: clock, Resolver: resolver{}, AllowPrivate: true})
	if err != nil {
		t.Fatal(err)
	}
	id := newID("q_")
	key := prefix + "{async}:q:" + id
	c.HSet(ctx, key, "status", "pending", "doc", `{"id":"`+id+`","status":"pending","domain":"`+marker+`"}`)
	c.ZAdd(ctx, prefix+"{async}:q:due", redis.Z{Score: float64(clock.Now().UnixMilli()), Member: id})
	m.Start()
	t.Cleanup(func() { _ = m.Close() })
	eventually(t, "the unreadable query off the schedule", func() bool {
		return errors.Is(c.ZScore(ctx, prefix+"{async}:q:due", id).Err(), redis.Nil)
	})
	// Leases run out, polls come: it is not picked up again.
	for range 10 {
		clock.Advance(m.opts.Lease)
		time.Sleep(5 * time.Millisecond)
	}
	name, _ := json.Marshal(key)
	if n := strings.Count(log.String(), `"key":`+string(name)); n != 1 {
		t.Errorf("the key logged %d times, want once:\n%s", n, log.String())
	}
	checkReported(t, log, key)
	if _, err := m.Get(ctx, id); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get = %v, want ErrNotFound", err)
	}

	// A query that can be read is worked on and delivered.
	q := aggregator.Query{Domain: "AB123CD"}
	srcs, _ := eng.Select(q, nil)
	v, err := m.Submit(ctx, Request{Query: q, Sources: srcs, CallbackURL: recv.srv.URL + "/hook"})
	if err != nil || v.Status != Completed {
		t.Fatalf("Submit = %+v, %v", v, err)
	}
	eventually(t, "the delivery", func() bool { return len(recv.hooks()) == 1 })
}

// TestRedisPaceUnreadable: a pace key of another type, or whose times a
// pacer does not write (not integers, a last call ahead of the clocks, a
// next slot a century away), is no pace: the call goes, the key is
// written afresh, its name logged.
func TestRedisPaceUnreadable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c, prefix := testRedis(t)
	now := time.Unix(1_700_000_000, 0)
	const key = "source\x00caba"
	plants := map[string]func(k string){
		"a string":        func(k string) { c.Set(ctx, k, marker, 0) },
		"a list":          func(k string) { c.RPush(ctx, k, marker) },
		"not integers":    func(k string) { c.HSet(ctx, k, "next", marker, "last", "1e300") },
		"a century ahead": func(k string) { c.HSet(ctx, k, "next", now.Add(century).UnixMicro()) },
		"a last call ahead": func(k string) {
			c.HSet(ctx, k, "last", now.Add(time.Hour).UnixMicro())
		},
	}
	for name, plant := range plants {
		t.Run(name, func(t *testing.T) {
			buf := &syncBuffer{}
			p := newRedisPace(c, prefix+name+":", 5)
			p.bad = NewRedisStore(c, "").WithLogger(slog.New(slog.NewJSONHandler(buf, nil))).bad
			p.onError = func(err error) { t.Errorf("Redis error: %v", err) }
			k := p.key(key)
			plant(k)
			var slot time.Time
			if w := p.admit(key, &slot, now); w != 0 {
				t.Errorf("admit = %v, want the call to go now", w)
			}
			if last, err := c.HGet(ctx, k, "last").Int64(); err != nil || last != now.UnixMicro() {
				t.Errorf("last = %v, %v; want %v", last, err, now.UnixMicro())
			}
			checkReported(t, buf, k)
			p.reset(key)
		})
	}
	// reset on a key of another type.
	p := newRedisPace(c, prefix+"reset:", 5)
	p.onError = func(err error) { t.Errorf("Redis error: %v", err) }
	c.Set(ctx, p.key(key), marker, 0)
	p.reset(key)
	if n, _ := c.Exists(ctx, p.key(key)).Result(); n != 0 {
		t.Error("reset left a key of another type")
	}
}

const century = 100 * 365 * 24 * time.Hour

// TestRetainCapsStoredExpiry: a stored query that reads well but expires
// further ahead than max_wait (garbage, or a max_wait since lowered) is
// not retried for ever: it expires max_wait after it was created.
func TestRetainCapsStoredExpiry(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _, _, _ := garbageStore(t)
	p := newPortal(t)
	p.setDown(503)
	clock := newFakeClock()
	eng, set := testEngine(t, p, clock.Now, nil)
	recv := newReceiver(t, clock, 0)
	m, err := New(Options{Engine: eng, Breakers: set, Store: s, Clock: clock, Resolver: resolver{}, AllowPrivate: true,
		MaxWait: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	q := goodQuery()
	q.CallbackURL = recv.srv.URL + "/hook"
	q.CreatedAt, q.ExpiresAt = clock.Now(), clock.Now().Add(century)
	if err := s.CreateQuery(ctx, q, clock.Now()); err != nil {
		t.Fatal(err)
	}
	m.Start()
	t.Cleanup(func() { _ = m.Close() })
	for i := 0; len(recv.hooks()) == 0; i++ {
		if i == 200 {
			t.Fatal("the query is not delivered as expired 200 minutes after it was created")
		}
		advanceIdle(t, m, clock, time.Minute)
	}
	var ev Event
	if err := json.Unmarshal(recv.hooks()[0].body, &ev); err != nil || ev.Type != EventExpired {
		t.Errorf("delivery %s, %v; want query.expired", recv.hooks()[0].body, err)
	}
	// A minute a step, each once the manager is at rest: the delivery is
	// stamped within a few steps of max_wait, never a century on.
	if at := recv.hooks()[0].at; at.After(q.CreatedAt.Add(time.Hour + 5*time.Minute)) {
		t.Errorf("expired at %v, want about an hour after %v", at, q.CreatedAt)
	}
}
