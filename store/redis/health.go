package redisstore

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/breaker"
)

// The store event of SPEC 11: a replica leaving or rejoining shared state
// is an event of the admin API, in the shape of a breaker transition (see
// breaker.Event.Kind).
const (
	// Shared and Local are the From and To of a store event.
	Shared breaker.State = "shared"
	Local  breaker.State = "local"
)

// newBackoff is the wait between checks of a Redis that failed:
// exponential from HealthInterval to MaxHealthWait, each wait randomised
// by ±50% so that the replicas of a fleet do not check in step.
func (s *Stores) newBackoff() *backoff.ExponentialBackOff {
	return backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(s.opts.HealthInterval),
		backoff.WithMaxInterval(s.opts.MaxHealthWait),
		backoff.WithRandomizationFactor(0.5),
		backoff.WithMultiplier(2),
		backoff.WithMaxElapsedTime(0),
	)
}

// failed records that a Redis call failed: the stores go on locally. An
// error of the caller's own context says nothing of Redis.
func (s *Stores) failed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	s.reload()
	s.setDegraded(true, err)
}

// reload has a Cluster client read the cluster's slots again: a failed
// call may be a primary gone and a replica promoted in its place, which
// go-redis learns only from a MOVED reply or once a minute, and a call
// to a dead node ends with our timeout, not a MOVED.
func (s *Stores) reload() {
	if c, ok := s.client.(*redis.ClusterClient); ok {
		c.ReloadState(context.Background())
	}
}

// setDegraded changes between shared and local state, once each way: the
// log line, OnDegraded (aggregator_store_degraded) and a store event.
func (s *Stores) setDegraded(d bool, cause error) {
	ev, changed := s.change(d, cause)
	if changed {
		// Outside the lock: appending sends the event to Redis, whose
		// failure would degrade the stores again.
		s.Events.Append(ev)
	}
}

func (s *Stores) change(d bool, cause error) (breaker.Event, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.degraded.Load() == d {
		return breaker.Event{}, false
	}
	if d {
		// Local state starts from what this replica knows of the shared
		// one: an open breaker stays open.
		s.Breakers.toLocal()
	}
	s.degraded.Store(d)
	ev := breaker.Event{Time: time.Now(), Kind: breaker.KindStore, From: Shared, To: Local}
	if d {
		ev.Reason = "redis store unreachable: deciding on local state until it answers steadily for " + s.opts.StableFor.String()
		s.opts.Logger.Error("redis store unreachable: deciding on local state until it is back",
			"err", errString(cause))
		select {
		case s.wake <- struct{}{}:
		default:
		}
	} else {
		ev.From, ev.To = Local, Shared
		ev.Reason = "redis store answered steadily for " + s.opts.StableFor.String() + ": deciding on shared state again"
		s.opts.Logger.Info("redis store back: deciding on shared state again")
	}
	if s.opts.OnDegraded != nil {
		s.opts.OnDegraded(d)
	}
	return ev, true
}

// health waits for the stores to degrade, then checks Redis with
// exponential backoff and jitter, and returns to shared state only after
// Redis has answered every check for StableFor (no flapping): checks are
// then StableFor/5 apart, and one failure starts the count again. It
// returns only while the invalidation subscription is live, after every
// breaker was read again since it was confirmed: a replica back on shared
// state hears every change another replica makes from then on.
func (s *Stores) health(ctx context.Context) {
	defer s.done.Done()
	for {
		if !s.Degraded() {
			select {
			case <-ctx.Done():
				return
			case <-s.wake:
				continue
			}
		}
		b := s.newBackoff()
		var since time.Time // first answer of the current streak
		for s.Degraded() {
			wait := b.NextBackOff()
			if !since.IsZero() {
				wait = s.opts.StableFor / 5
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			err := s.check(ctx)
			sub := s.sub.Load()
			if err == nil && sub&1 == 0 {
				// The subscriber may be waiting out a backoff longer
				// than the outage: it tries again now.
				s.wakeSubscriber()
			}
			switch {
			case err != nil:
				s.reload()
				since = time.Time{}
			case since.IsZero():
				since = time.Now()
			case time.Since(since) < s.opts.StableFor:
			case sub&1 == 0:
				// Steady, but deaf to the other replicas: their changes
				// would not reach the views. Not back before it listens.
			case !s.recover(ctx):
				since = time.Time{}
			case s.readAgain(sub):
				s.setDegraded(false, nil)
			}
		}
	}
}

// recover brings shared state up to date before the stores use it again:
// the events logged meanwhile, and what this replica learned of its
// breakers (see BreakerStore.reconcile), read after the subscription was
// confirmed. It reports whether Redis took it.
func (s *Stores) recover(ctx context.Context) bool {
	if !s.Events.flush(ctx) {
		return false
	}
	return s.Breakers.reconcile(ctx)
}

// check asks Redis for what the stores use: the slots of their breakers,
// each routed to the node that serves it (on a Cluster, a PING goes to
// every node the client knows, a dead primary too, long after a failover
// has replaced it), or a PING before any breaker is used.
func (s *Stores) check(ctx context.Context) error {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	keys := s.Breakers.keys()
	if len(keys) == 0 {
		return s.client.Ping(cctx).Err()
	}
	pipe := s.client.Pipeline()
	for _, k := range keys {
		pipe.Exists(cctx, k)
	}
	_, err := pipe.Exec(cctx)
	return err
}
