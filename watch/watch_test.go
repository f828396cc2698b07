package watch

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/client"
)

const plate = "AB123CD"

var q = aggregator.Query{Domain: plate}

// ids are the ids of infractions, in order.
func ids(in []aggregator.Infraction) []string {
	out := []string{}
	for _, i := range in {
		out = append(out, i.ID)
	}
	return out
}

// want is what one delivery must say.
type want struct {
	baseline        bool
	baselineSources []string
	added, removed  []string
	changed         []string // ids, with their before and after statuses in changedStatus
	changedStatus   [][2]aggregator.Status
}

func (w want) check(t *testing.T, h hook, wid string, version int) {
	t.Helper()
	e := h.event
	if got, msg := h.header.Get(client.HeaderWebhookID), "msg_"+wid+"_"+strconv.Itoa(version); got != msg {
		t.Errorf("webhook-id %q, want %q (derived from the watch and the version)", got, msg)
	}
	if !slices.Equal(h.verified, []string{"fleet"}) {
		t.Errorf("verifies with the secrets %v, want only the owner's (fleet)", h.verified)
	}
	if e.Type != EventChanged || e.Data.WatchID != wid || e.Data.Subject != (Subject{Domain: plate}) || e.Data.CheckedAt.IsZero() {
		t.Errorf("envelope %+v", e)
	}
	d := e.Data
	if d.Baseline != w.baseline || !slices.Equal(d.BaselineSources, w.baselineSources) {
		t.Errorf("baseline %v %v, want %v %v", d.Baseline, d.BaselineSources, w.baseline, w.baselineSources)
	}
	if got := ids(d.Changes.Added); !slices.Equal(got, w.added) {
		t.Errorf("added %v, want %v", got, w.added)
	}
	if got := ids(d.Changes.Removed); !slices.Equal(got, w.removed) {
		t.Errorf("removed %v, want %v", got, w.removed)
	}
	var changed []string
	for i, c := range d.Changes.Changed {
		changed = append(changed, c.After.ID)
		if i < len(w.changedStatus) && (c.Before.Status != w.changedStatus[i][0] || c.After.Status != w.changedStatus[i][1]) {
			t.Errorf("changed %s: %s → %s, want %s → %s", c.After.ID, c.Before.Status, c.After.Status, w.changedStatus[i][0], w.changedStatus[i][1])
		}
	}
	if !slices.Equal(changed, w.changed) && (len(changed) > 0 || len(w.changed) > 0) {
		t.Errorf("changed %v, want %v", changed, w.changed)
	}
}

// A watch's life over real receivers, on each store: the baseline of
// every source, a new infraction, one paid, each delivered once and
// signed with the owner's secret (not verifiable with another key's);
// nothing when nothing changed; a portal failing during a check never
// produces `removed` (the check is partial, and nothing is sent); once it
// answers again, what is really gone is removed.
func TestWatchDeliversWhatChanged(t *testing.T) {
	t.Parallel()
	for name, mk := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			f := newFleet(t, "caba", "cordoba")
			ws, ds := mk(t)
			r := f.replica(replicaOpts{watches: ws, deliveries: ds})
			caba, cba := f.portals[0], f.portals[1]
			q1 := acta{Nro: "Q-1", Fecha: "2026-03-01T10:00:00", Monto: "1000.00", Moneda: "ARS", Estado: "IMPAGA"}
			q2 := acta{Nro: "Q-2", Fecha: "2026-03-10T18:30:00", Monto: "2500.50", Moneda: "ARS", Estado: "IMPAGA"}
			caba.set(plate, q1)
			cba.set(plate) // nothing there: its baseline is empty, and still sent

			v, err := r.m.Create(ctx, Request{Owner: "fleet", Query: q, CallbackURL: f.recv.srv.URL + "/hook", Interval: 6 * time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			if v.Interval != Interval(6*time.Hour) || len(v.Sources) != 2 || v.LastCheckAt != nil {
				t.Fatalf("created %+v", v)
			}
			wid := v.WatchID
			step := func(n int, w want) {
				t.Helper()
				eventually(t, "delivery "+strconv.Itoa(n), func() bool { return len(f.recv.hooks()) >= n })
				time.Sleep(20 * time.Millisecond)
				hooks := f.recv.hooks()
				if len(hooks) != n {
					t.Fatalf("%d deliveries, want %d", len(hooks), n)
				}
				w.check(t, hooks[n-1], wid, n)
			}
			step(1, want{baseline: true, baselineSources: []string{"caba", "cordoba"}, added: []string{"Q-1"}, removed: []string{}})

			caba.set(plate, q1, q2)
			f.clock.Advance(6 * time.Hour)
			step(2, want{baselineSources: []string{}, added: []string{"Q-2"}, removed: []string{}})

			q2.Estado = "PAGADA"
			caba.set(plate, q1, q2)
			f.clock.Advance(6 * time.Hour)
			step(3, want{baselineSources: []string{}, added: []string{}, removed: []string{},
				changed: []string{"Q-2"}, changedStatus: [][2]aggregator.Status{{aggregator.Unpaid, aggregator.Paid}}})

			// Nothing changed: nothing is sent.
			f.clock.Advance(6 * time.Hour)
			eventually(t, "unchanged check", func() bool { return r.counts.outcome(OutcomeUnchanged) == 1 })
			time.Sleep(30 * time.Millisecond)
			if n := len(f.recv.hooks()); n != 3 {
				t.Fatalf("%d deliveries after a check with no change, want 3", n)
			}

			// caba fails for the whole check while cordoba answers: the
			// check is partial, caba's infractions are not "removed".
			caba.setDown(503)
			f.clock.Advance(6 * time.Hour)
			eventually(t, "caba tried and retained", func() bool {
				r, err := ws.Get(ctx, wid)
				return err == nil && r.Watch.Check != nil && slices.ContainsFunc(r.Watch.Check.Parts, func(p Part) bool {
					return p.Source == "caba" && p.Tries == 1 && !p.Done
				})
			})
			f.clock.Advance(61 * time.Minute) // past min(max_wait, interval)
			eventually(t, "partial check", func() bool { return r.counts.outcome(OutcomePartial) == 1 })
			time.Sleep(30 * time.Millisecond)
			if n := len(f.recv.hooks()); n != 3 {
				t.Fatalf("%d deliveries after a check where a portal failed, want 3", n)
			}
			got, err := r.m.Get(ctx, "fleet", wid)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range got.Sources {
				switch {
				case s.LastSuccessAt == nil:
					t.Errorf("%s: no last_success_at", s.Source)
				case s.Source == "caba" && (s.Problem == nil || s.Problem.Status != 502):
					t.Errorf("caba: problem %+v, want its last failure", s.Problem)
				case s.Source == "cordoba" && s.Problem != nil:
					t.Errorf("cordoba: problem %+v, want none", s.Problem)
				}
			}
			if got.LastCheckAt == nil {
				t.Error("no last_check_at after checks")
			}

			// caba answers again, Q-1 really gone: removed.
			caba.setDown(0)
			caba.set(plate, q2)
			f.clock.Set(got.NextCheckAt)
			step(4, want{baselineSources: []string{}, added: []string{}, removed: []string{"Q-1"}})
			if n := r.counts.outcome(OutcomeChanged); n != 4 {
				t.Errorf("%d changed checks, want 4", n)
			}
			if r.counts.changes != 3 {
				t.Errorf("%d changes counted, want 3 (a baseline's infractions are none)", r.counts.changes)
			}
		})
	}
}

// Deliveries are signed with the secret of the key that owns the watch:
// the rental company's receiver verifies its watch's messages with its own
// secret, and no other key's secret (the fleet's, the default) verifies
// them.
func TestSignedWithTheOwnersSecret(t *testing.T) {
	t.Parallel()
	f := newFleet(t, "caba")
	r := f.replica(replicaOpts{})
	f.portals[0].set(plate, acta{Nro: "Q-1", Estado: "IMPAGA"})
	ctx := context.Background()
	for _, owner := range []string{"rental", "fleet", "nobody"} {
		if _, err := r.m.Create(ctx, Request{Owner: owner, Query: q, CallbackURL: f.recv.srv.URL + "/" + owner}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "three baselines", func() bool { return len(f.recv.hooks()) == 3 })
	want := map[string][]string{"rental": {"rental"}, "fleet": {"fleet"}, "nobody": {"default"}}
	for _, h := range f.recv.hooks() {
		v, err := r.m.store.Get(ctx, h.event.Data.WatchID)
		if err != nil {
			t.Fatal(err)
		}
		if owner := v.Watch.Owner; !slices.Equal(h.verified, want[owner]) {
			t.Errorf("the watch of %s: verifies with %v, want %v", owner, h.verified, want[owner])
		}
	}
}
