package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
)

// recover waits, with every portal healthy, for every breaker of every
// replica to close, asking each open or half-open one for its probe, and
// returns how long it took. A breaker still not closed after the bound is
// a violation; so is an incomplete answer once every breaker is closed.
func (r *run) recover(rng *rand.Rand) time.Duration {
	healed := time.Now()
	deadline := healed.Add(r.opts.RecoveryBound)
	var recovered time.Duration
	for round := 0; ; round++ {
		stuck := r.notClosed()
		if len(stuck) == 0 {
			recovered = time.Since(healed)
			break
		}
		if time.Now().After(deadline) {
			for _, s := range stuck {
				r.tally.violate(Violation{Kind: KindRecovery, Detail: fmt.Sprintf(
					"%s still %s on replica %d %s after every portal recovered", s.id, s.state, s.replica+1, r.opts.RecoveryBound)})
			}
			return time.Since(healed)
		}
		var wg sync.WaitGroup
		for _, q := range r.probesFor(stuck, rng, round) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r.send(q)
			}()
		}
		wg.Wait()
		time.Sleep(200 * time.Millisecond)
	}
	// Every pause a portal asked for has ended by now (a Retry-After as an
	// HTTP date is rounded up to the next second): every answer must be
	// complete.
	if wait := time.Until(healed.Add(maxRetryAfter + 2*time.Second)); wait > 0 {
		time.Sleep(wait)
	}
	for i := range r.replicas {
		for _, q := range []request{r.domainRequest(rng, i, "recovery"), r.idRequest(rng, i, "recovery")} {
			doc := r.send(q)
			if doc == nil || doc.Complete == nil || !*doc.Complete {
				var missing, sources []string
				if doc != nil {
					for _, s := range doc.Sources {
						if s.Status != aggregator.EntrySucceeded && s.Problem != nil {
							sl, _ := slug(s.Problem.Type)
							ra := ""
							if s.Problem.RetryAfter != nil {
								ra = fmt.Sprintf(", retry_after %d", *s.Problem.RetryAfter)
							}
							missing = append(missing, fmt.Sprintf("%s %s (%s%s: %s)", s.Source, s.Status, sl, ra, s.Problem.Detail))
							sources = append(sources, s.Source)
						}
					}
				}
				r.tally.violate(Violation{Kind: KindRecovery, Detail: fmt.Sprintf(
					"%s query to replica %d incomplete with every portal healthy and every breaker closed: %s; %s",
					q.op, i+1, strings.Join(missing, ", "), r.breakerStates(q.op, sources))})
			}
		}
	}
	return recovered
}

// stuckBreaker is a breaker not closed on one replica.
type stuckBreaker struct {
	replica int
	id      breaker.ID
	state   breaker.State
}

// notClosed lists the breakers that are not closed, replica by replica,
// as each replica reads them.
func (r *run) notClosed() []stuckBreaker {
	var out []stuckBreaker
	for i, rp := range r.replicas {
		for _, id := range rp.app.Breakers.IDs() {
			st, err := rp.app.Breakers.Status(context.Background(), id)
			if err != nil {
				out = append(out, stuckBreaker{replica: i, id: id, state: breaker.State("unreadable: " + err.Error())})
				continue
			}
			if st.State != breaker.Closed {
				out = append(out, stuckBreaker{replica: i, id: id, state: st.State})
			}
		}
	}
	return out
}

// probesFor is one request per replica and operation that has a breaker
// not closed (with Redis, any replica will do: they go round-robin), and a
// voucher of each source whose voucher breaker is not closed.
func (r *run) probesFor(stuck []stuckBreaker, rng *rand.Rand, round int) []request {
	type key struct {
		replica int
		op      aggregator.Operation
		source  string
	}
	seen := map[key]bool{}
	var qs []request
	for _, s := range stuck {
		rep := s.replica
		if r.opts.Variant == Redis {
			rep = round % len(r.replicas)
		}
		k := key{replica: rep, op: s.id.Operation}
		if s.id.Operation == aggregator.Voucher {
			k.source = s.id.Key
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		switch s.id.Operation {
		case aggregator.ByDomain:
			qs = append(qs, r.domainRequest(rng, rep, "recovery"))
		case aggregator.ByID:
			qs = append(qs, r.idRequest(rng, rep, "recovery"))
		case aggregator.Voucher:
			for _, v := range r.people.vouchers {
				if v.source == s.id.Key {
					qs = append(qs, r.voucherRequest(v, rep, "recovery"))
					break
				}
			}
		}
	}
	return qs
}

// breakerStates describes the breakers of op for srcs as every replica
// reads them now, and which replicas' Redis stores were degraded lately,
// for the detail of a recovery violation.
func (r *run) breakerStates(op aggregator.Operation, srcs []string) string {
	var parts []string
	for _, src := range srcs {
		id := breaker.ID{Key: src, Operation: op}
		var states []string
		for i, rp := range r.replicas {
			st, err := rp.app.Breakers.Status(context.Background(), id)
			if err != nil {
				states = append(states, fmt.Sprintf("replica %d: %v", i+1, err))
				continue
			}
			states = append(states, fmt.Sprintf("replica %d: %s since %s", i+1, st.State, clock(st.Since)))
		}
		parts = append(parts, fmt.Sprintf("%s (%s; last transitions: %s)", id, strings.Join(states, ", "), r.lastTransitions(id, 3)))
	}
	now := time.Now()
	var degraded []string
	for rep, ps := range r.episodes.degradedPeriods() {
		for _, p := range ps {
			if p.overlaps(now.Add(-10*time.Second), now) {
				degraded = append(degraded, fmt.Sprintf("replica %d from %s", rep+1, clock(p.from)))
			}
		}
	}
	sort.Strings(degraded)
	return fmt.Sprintf("breakers now: %s; Redis degraded in the last 10s: %s", strings.Join(parts, "; "), orNone(strings.Join(degraded, ", ")))
}

// lastTransitions describes the last n transitions of breaker id, on any
// replica, oldest first.
func (r *run) lastTransitions(id breaker.ID, n int) string {
	r.episodes.mu.Lock()
	var ts []transition
	for s, evs := range r.episodes.events {
		if s.id == id {
			ts = append(ts, evs...)
		}
	}
	r.episodes.mu.Unlock()
	sort.Slice(ts, func(i, j int) bool { return ts[i].at.Before(ts[j].at) })
	var parts []string
	for _, t := range ts[max(0, len(ts)-n):] {
		parts = append(parts, fmt.Sprintf("%s %s→%s on replica %d (%s)", clock(t.at), t.from, t.to, t.replica+1, t.reason))
	}
	return orNone(strings.Join(parts, ", "))
}
