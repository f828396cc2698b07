package watch

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/multas/aggregator"
)

// The watches of a key, on each store: created up to the key's limit,
// listed in the order they were made, page by page; another key's are not
// found, not listed, not deleted.
func TestWatchesOfAKey(t *testing.T) {
	t.Parallel()
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newFleet(t, "caba")
			ws, ds := mk(t)
			r := f.replica(replicaOpts{watches: ws, deliveries: ds, maxPerKey: 5,
				jitter: func(d time.Duration) time.Duration { return d / 2 }})
			var made []string
			for i := range 5 {
				v, err := r.m.Create(ctx, Request{Owner: "fleet", Query: q, CallbackURL: f.recv.srv.URL, Interval: 2 * time.Hour})
				if err != nil {
					t.Fatal(err)
				}
				if !v.NextCheckAt.Equal(v.CreatedAt.Add(time.Hour)) {
					t.Errorf("watch %d: first check at %v, want halfway through its first interval", i, v.NextCheckAt)
				}
				made = append(made, v.WatchID)
				f.clock.Advance(time.Millisecond) // ids sort by creation time
			}
			if _, err := r.m.Create(ctx, Request{Owner: "fleet", Query: q, CallbackURL: f.recv.srv.URL}); !errors.Is(err, ErrLimit) {
				t.Fatalf("a sixth watch: %v, want ErrLimit", err)
			}
			theirs, err := r.m.Create(ctx, Request{Owner: "rental", Query: aggregator.Query{ID: "20123456786", IDKind: aggregator.CUIT},
				Sources: []string{"caba"}, CallbackURL: f.recv.srv.URL})
			if err != nil {
				t.Fatalf("another key's watch: %v", err)
			}
			if theirs.Subject != (Subject{ID: "20123456786"}) || theirs.Interval != Interval(6*time.Hour) {
				t.Errorf("created %+v", theirs)
			}

			var listed []string
			cursor := ""
			for pages := 0; ; pages++ {
				p, err := r.m.List(ctx, "fleet", cursor, 2)
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range p.Watches {
					listed = append(listed, v.WatchID)
				}
				if p.NextCursor == nil {
					if pages != 2 || len(p.Watches) != 1 {
						t.Errorf("last page %d holds %d, want the third, with one", pages, len(p.Watches))
					}
					break
				}
				cursor = *p.NextCursor
			}
			if !slices.Equal(listed, made) {
				t.Errorf("listed %v, want %v in the order made", listed, made)
			}
			if _, err := r.m.List(ctx, "fleet", "w_nope", 2); !errors.Is(err, ErrCursor) {
				t.Errorf("a bad cursor: %v, want ErrCursor", err)
			}
			if p, _ := r.m.List(ctx, "nobody", "", 50); len(p.Watches) != 0 || p.NextCursor != nil {
				t.Errorf("a key without watches lists %+v", p)
			}

			for _, tc := range []struct {
				owner, id string
				ok        bool
			}{
				{"fleet", made[0], true}, {"rental", made[0], false}, {"fleet", theirs.WatchID, false},
				{"fleet", "w_" + made[0][2:len(made[0])-1] + "a", false}, {"fleet", "../etc", false},
			} {
				v, err := r.m.Get(ctx, tc.owner, tc.id)
				if ok := err == nil; ok != tc.ok || !ok && !errors.Is(err, ErrNotFound) || ok && v.WatchID != tc.id {
					t.Errorf("Get(%s, %s) = %v, %v; want found %v", tc.owner, tc.id, v.WatchID, err, tc.ok)
				}
			}
			if err := r.m.Delete(ctx, "rental", made[0]); !errors.Is(err, ErrNotFound) {
				t.Errorf("another key deletes: %v, want ErrNotFound", err)
			}
			if err := r.m.Delete(ctx, "fleet", made[0]); err != nil {
				t.Fatal(err)
			}
			if err := r.m.Delete(ctx, "fleet", made[0]); !errors.Is(err, ErrNotFound) {
				t.Errorf("deleted twice: %v, want ErrNotFound", err)
			}
			if _, err := r.m.Create(ctx, Request{Owner: "fleet", Query: q, CallbackURL: f.recv.srv.URL}); err != nil {
				t.Errorf("a watch after one was deleted: %v", err)
			}
			if n, _ := ws.Count(ctx); n != 6 {
				t.Errorf("Count = %d, want 6", n)
			}
		})
	}
}

// Deleting a watch cancels its deliveries that have not gone: a receiver
// failing its first attempt gets no retry once the watch is gone.
func TestDeleteCancelsDeliveries(t *testing.T) {
	t.Parallel()
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newFleet(t, "caba")
			ws, ds := mk(t)
			r := f.replica(replicaOpts{watches: ws, deliveries: ds})
			var attempts atomic.Int32
			failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				attempts.Add(1)
				w.WriteHeader(http.StatusInternalServerError)
			}))
			t.Cleanup(failing.Close)
			v, err := r.m.Create(ctx, Request{Owner: "fleet", Query: q, CallbackURL: failing.URL})
			if err != nil {
				t.Fatal(err)
			}
			eventually(t, "first attempt", func() bool { return attempts.Load() == 1 })
			if err := r.m.Delete(ctx, "fleet", v.WatchID); err != nil {
				t.Fatal(err)
			}
			for range 5 {
				f.clock.Advance(time.Minute)
				time.Sleep(10 * time.Millisecond)
			}
			if n := attempts.Load(); n != 1 {
				t.Errorf("%d attempts, want the one before the watch was deleted", n)
			}
			if n, _ := ds.DLQLen(ctx); n != 0 {
				t.Errorf("%d dead letters of a deleted watch", n)
			}
		})
	}
}

// Forgetting a subject (SPEC 14's erasure) deletes its watches, every
// key's, with their last known infractions and their deliveries not gone
// yet; a person is forgotten under each id they are known by (a CUIT and
// the DNI in it). Other subjects' watches stay.
func TestForgetSubject(t *testing.T) {
	t.Parallel()
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newFleet(t, "caba")
			ws, ds := mk(t)
			r := f.replica(replicaOpts{watches: ws, deliveries: ds, jitter: func(d time.Duration) time.Duration { return d / 2 }})
			cuit := aggregator.Query{ID: "20123456786", IDKind: aggregator.CUIT}
			other := aggregator.Query{Domain: "AC456DE"}
			var gone, kept []string
			for _, c := range []struct {
				owner string
				q     aggregator.Query
				keep  bool
			}{{"fleet", q, false}, {"rental", q, false}, {"fleet", cuit, false}, {"fleet", other, true}} {
				v, err := r.m.Create(ctx, Request{Owner: c.owner, Query: c.q, CallbackURL: f.recv.srv.URL})
				if err != nil {
					t.Fatal(err)
				}
				if c.keep {
					kept = append(kept, v.WatchID)
				} else {
					gone = append(gone, v.WatchID)
				}
			}
			if err := r.m.Forget(ctx, q); err != nil {
				t.Fatal(err)
			}
			if err := r.m.Forget(ctx, aggregator.Query{ID: "12345678", IDKind: aggregator.DNI}); err != nil {
				t.Fatal(err)
			}
			for _, id := range gone {
				if _, err := ws.Get(ctx, id); !errors.Is(err, ErrNotFound) {
					t.Errorf("watch %s of a forgotten subject: %v, want gone", id, err)
				}
			}
			for _, id := range kept {
				if _, err := ws.Get(ctx, id); err != nil {
					t.Errorf("another subject's watch %s: %v", id, err)
				}
			}
			for _, h := range append(subjectHashes(f.keys, q), subjectHashes(f.keys, cuit)...) {
				if ids, _ := ws.BySubject(ctx, h); len(ids) != 0 {
					t.Errorf("the index of a forgotten subject still names %v", ids)
				}
			}
			if n, _ := ws.Count(ctx); n != 1 {
				t.Errorf("Count = %d, want 1", n)
			}
		})
	}
}
