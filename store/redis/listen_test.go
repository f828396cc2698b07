package redisstore_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/internal/redistest"
	redisstore "github.com/multas/aggregator/store/redis"
)

// A replica hears the fleet only through its invalidation subscription:
// these tests keep it deaf by having Redis refuse the SUBSCRIBE of the
// user it connects as (ACL), while everything else it sends is served.

// deafUser is replica 1's Redis user (redis-server's --user), with every
// permission; with "-subscribe" appended, its subscriptions are refused.
var deafUser = []string{"--user", "r1", "on", ">secret", "~*", "&*", "+@all"}

func deafURL(srv *redistest.Server) string { return "redis://r1:secret@" + srv.Addr() + "/0" }

// threeStrikes are breaker settings that open for good after three
// failures in a row.
func threeStrikes() breaker.Settings {
	s := breakertest.Settings()
	s.ConsecutiveFailures, s.OpenFor = 3, time.Hour
	return s
}

// redisCommand runs one command on srv, as its default user.
func redisCommand(t *testing.T, srv *redistest.Server, args ...any) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer c.Close()
	if err := c.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("%v: %v", args, err)
	}
}

// trip opens the breaker of r's set: three failures.
func trip(t *testing.T, r *replica) {
	t.Helper()
	for range 3 {
		call(t, r.set, fail)
	}
}

// shareMarker has r share settings for a breaker nobody calls, and waits
// until heard receives them: a replica that heard it has applied every
// change published before it (one channel, one order).
func shareMarker(t *testing.T, r *replica, heard <-chan breaker.Settings) {
	t.Helper()
	marker := breaker.ID{Key: "marker", Operation: aggregator.ByDomain}
	s := breakertest.Settings()
	s.MinCalls = 7
	if err := r.stores.Breakers.ShareSettings(context.Background(), marker, s); err != nil {
		t.Fatal(err)
	}
	select {
	case <-heard:
	case <-time.After(10 * time.Second):
		t.Fatal("replica 1 never heard settings replica 2 shared after the trip")
	}
}

// TestNotBackUntilListening (issue 23): a replica back from degraded mode
// decides on shared state only once it hears the fleet. Redis is kept
// down until every backoff is at its longest (the health check's, the
// subscriber's, the client's dialer), and comes back refusing replica 1's
// subscription: replica 1 answers steadily yet stays degraded, for as long
// as it is deaf. Once it may subscribe it returns, and a breaker replica 2
// trips then is skipped by replica 1's very next call.
func TestNotBackUntilListening(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, deafUser...)
	s := threeStrikes()
	const (
		maxWait = 200 * time.Millisecond
		stable  = 200 * time.Millisecond
	)
	heard := make(chan breaker.Settings, 10)
	r1 := newReplica(t, deafURL(srv), time.Now, s, redisstore.Options{
		Prefix: "agg:", Timeout: time.Second, HealthInterval: 10 * time.Millisecond, MaxHealthWait: maxWait, StableFor: stable,
		OnSettings: func(_ breaker.ID, s breaker.Settings) { heard <- s },
	})
	waitListening(t, r1)
	if !call(t, r1.set, succeed) {
		t.Fatal("refused with the breaker closed")
	}

	srv.Stop()
	_ = r1.stores.Ping(context.Background())
	if !r1.stores.Degraded() {
		t.Fatal("not degraded with Redis stopped")
	}
	// A precondition, not a wait for luck: the backoffs grow to their
	// longest (maxWait; a second for the client's dialer).
	time.Sleep(10*maxWait + time.Second)

	srv.Start(append(deafUser, "-subscribe")...)
	back := time.Now()
	// Without its subscription the replica would be back within
	// maxWait·1.5 + stable of Redis answering; it must not be.
	for time.Since(back) < 5*(maxWait*3/2+stable) {
		if !r1.stores.Degraded() {
			t.Fatalf("back on shared state %v after Redis returned, while its subscription is refused", time.Since(back))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if r1.stores.Listening() {
		t.Fatal("Listening() = true with the subscription refused")
	}

	redisCommand(t, srv, "ACL", "SETUSER", "r1", "+subscribe")
	deadline := time.Now().Add(10 * time.Second)
	for r1.stores.Degraded() {
		if time.Now().After(deadline) {
			t.Fatal("still degraded 10s after its subscription was allowed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !r1.stores.Listening() {
		t.Fatal("back on shared state without listening")
	}

	// Right then, replica 2 trips the breaker.
	r2 := newReplica(t, srv.URL(), time.Now, s, redisstore.Options{Prefix: "agg:", Timeout: time.Second})
	trip(t, r2)
	shareMarker(t, r2, heard)
	if call(t, r1.set, fail) {
		t.Error("replica 1 called the portal whose breaker replica 2 opened")
	}
}

// TestDeafReplicaAsksRedis: a replica on shared state whose subscription
// is lost (and refused again) decides by asking Redis, not from a view no
// change reaches; once it listens again, its view decides without a round
// trip.
func TestDeafReplicaAsksRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, deafUser...)
	s := threeStrikes()
	// No refresh of its own: a round trip counted below is a decision's.
	opts := redisstore.Options{Prefix: "agg:", Timeout: time.Second, RefreshInterval: time.Hour}
	r1 := newReplica(t, deafURL(srv), time.Now, s, opts)
	r2 := newReplica(t, srv.URL(), time.Now, s, opts)
	waitListening(t, r1, r2)
	if !call(t, r1.set, succeed) {
		t.Fatal("refused with the breaker closed")
	}

	redisCommand(t, srv, "ACL", "SETUSER", "r1", "-subscribe")
	redisCommand(t, srv, "CLIENT", "KILL", "USER", "r1", "TYPE", "pubsub")
	deadline := time.Now().Add(10 * time.Second)
	for r1.stores.Listening() {
		if time.Now().After(deadline) {
			t.Fatal("replica 1 still listens 10s after its subscription was killed")
		}
		time.Sleep(5 * time.Millisecond)
	}

	trip(t, r2)
	if call(t, r1.set, fail) {
		t.Error("a replica deaf to the fleet called the portal whose breaker another replica opened")
	}
	if r1.stores.Degraded() {
		t.Error("degraded, with Redis answering everything but the subscription")
	}

	redisCommand(t, srv, "ACL", "SETUSER", "r1", "+subscribe")
	waitListening(t, r1)
	before := r1.commands.n.Load()
	if call(t, r1.set, fail) {
		t.Error("a call went through the open breaker")
	}
	if n := r1.commands.n.Load() - before; n != 0 {
		t.Errorf("%d round trips for a call refused by a breaker known open, listening again, want 0", n)
	}
}

// TestSettingsSharedWhileDeaf: breaker settings another replica shares
// while this one's subscription is down are adopted once it listens again,
// not lost until its restart.
func TestSettingsSharedWhileDeaf(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t, deafUser...)
	heard := make(chan breaker.Settings, 8)
	var built atomic.Pointer[replica]
	opts1 := redisstore.Options{Prefix: "agg:", Timeout: time.Second,
		// As the app does: read what was shared, every time it listens.
		OnListening: func(ctx context.Context) bool {
			r1 := built.Load()
			if r1 == nil {
				return false
			}
			all, err := r1.stores.Breakers.LoadSettings(ctx, []breaker.ID{caba})
			if s, ok := all[caba]; ok {
				heard <- s
			}
			return err == nil
		}}
	r1 := newReplica(t, deafURL(srv), time.Now, breakertest.Settings(), opts1)
	built.Store(r1)
	r2 := newReplica(t, srv.URL(), time.Now, breakertest.Settings(), redisstore.Options{Prefix: "agg:", Timeout: time.Second})
	waitListening(t, r1, r2)
	for len(heard) > 0 { // what the first subscription read
		<-heard
	}

	redisCommand(t, srv, "ACL", "SETUSER", "r1", "-subscribe")
	redisCommand(t, srv, "CLIENT", "KILL", "USER", "r1", "TYPE", "pubsub")
	deadline := time.Now().Add(10 * time.Second)
	for r1.stores.Listening() {
		if time.Now().After(deadline) {
			t.Fatal("replica 1 still listens 10s after its subscription was killed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	shared := threeStrikes()
	if err := r2.stores.Breakers.ShareSettings(context.Background(), caba, shared); err != nil {
		t.Fatal(err)
	}
	redisCommand(t, srv, "ACL", "SETUSER", "r1", "+subscribe")
	waitListening(t, r1)
	select {
	case s := <-heard:
		if s.ConsecutiveFailures != shared.ConsecutiveFailures || s.OpenFor != shared.OpenFor {
			t.Errorf("adopted %+v, want %+v", s, shared)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("replica 1 never adopted the settings shared while it was deaf")
	}
}
