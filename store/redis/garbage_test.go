package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/ratelimit"
	redisstore "github.com/multas/aggregator/store/redis"
)

// Redis contents that do not parse are treated as absent, never a panic nor
// a degradation.
func TestGarbageIsAbsent(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	ctx := context.Background()
	now := breakertest.NewClock().Now

	breakerKey := func(prefix string) string { return prefix + "{caba/by_domain}:breaker" }
	tests := []struct {
		name  string
		plant func(prefix string)
		want  breaker.State
	}{
		{"a string", func(p string) { c.Set(ctx, breakerKey(p), "garbage", 0) }, breaker.Closed},
		{"a list", func(p string) { c.RPush(ctx, breakerKey(p), "a", "b") }, breaker.Closed},
		{"an unknown state", func(p string) { c.HSet(ctx, breakerKey(p), "st", "ajar", "gen", "7") }, breaker.Closed},
		{"garbage fields", func(p string) {
			c.HSet(ctx, breakerKey(p), "st", "closed", "gen", "x", "since", "yesterday", "ot", "nan",
				"cf", "inf", "bp", "-inf", "b0", "1:2", "b1", "::", "b3", "9999999999999999999999:1:1",
				"last", "{not json", "ver", "1e400")
		}, breaker.Closed},
		// An unreadable state is no state (SPEC 9): closed, not what
		// the readable fields say (untrusted_test.go has more).
		{"an open breaker with a garbage end", func(p string) {
			c.HSet(ctx, breakerKey(p), "st", "open", "ou", "soon", "since", "0x1p70", "last", `["1","open"]`)
		}, breaker.Closed},
		{"huge numbers", func(p string) {
			c.HSet(ctx, breakerKey(p), "st", "forced_open", "since", "1e300", "ot", "-1e300", "gen", "1e20",
				"last", `["99999999999999999999","closed","open","r","x","y","z","w","v"]`)
		}, breaker.Closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := testPrefix(t, c)
			tt.plant(prefix)
			st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
			set := breaker.NewSet(st.Breakers, breaker.Options{Now: now, Events: st.Events})
			set.Add(caba, "caba", breakertest.Settings())
			if got := state(t, set); got != tt.want {
				t.Errorf("state = %s, want %s", got, tt.want)
			}
			for range 3 {
				if c, err := set.Allow(ctx, caba); err == nil {
					c.Done(ctx, fail)
				}
			}
			if err := set.Reset(ctx, caba); err != nil {
				t.Fatal(err)
			}
			if got := state(t, set); got != breaker.Closed {
				t.Errorf("state after reset = %s, want closed", got)
			}
			if st.Degraded() {
				t.Error("garbage made the store degrade")
			}
		})
	}

	t.Run("rate limits", func(t *testing.T) {
		s := ratelimit.Settings{RPS: 1, Burst: 1}
		at := now()
		for _, plant := range []func(prefix string){
			func(prefix string) {
				c.Set(ctx, prefix+"{ratelimit/a}:tat", "garbage", 0)
				c.Set(ctx, prefix+"{ratelimit/a}:pause", "later", 0)
			},
			func(prefix string) {
				c.HSet(ctx, prefix+"{ratelimit/a}:tat", "x", "y")
				c.SAdd(ctx, prefix+"{ratelimit/a}:pause", "z")
			},
			func(prefix string) {
				c.Set(ctx, prefix+"{ratelimit/a}:tat", "nan", 0)
				c.Set(ctx, prefix+"{ratelimit/a}:pause", "1e999", 0)
			},
		} {
			prefix := testPrefix(t, c)
			plant(prefix)
			st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
			if until, err := st.Limits.PausedUntil(ctx, "a", at); err != nil || !until.IsZero() {
				t.Errorf("PausedUntil = %v, %v; want no pause", until, err)
			}
			if wait, ok, err := st.Limits.Reserve(ctx, "a", s, 0, at); err != nil || !ok || wait != 0 {
				t.Errorf("Reserve = %v, %v, %v; want a token now", wait, ok, err)
			}
			if err := st.Limits.SetPause(ctx, "a", at.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
			if until, err := st.Limits.PausedUntil(ctx, "a", at); err != nil || !until.Equal(at.Add(time.Second)) {
				t.Errorf("PausedUntil after SetPause = %v, %v; want %v", until, err, at.Add(time.Second))
			}
			if st.Degraded() {
				t.Error("garbage made the store degrade")
			}
		}
	})

	t.Run("event log", func(t *testing.T) {
		prefix := testPrefix(t, c)
		st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
		c.HSet(ctx, prefix+"events:log", "not", "a list")
		if got := st.Events.Latest(10); len(got) != 0 {
			t.Errorf("Latest on a hash = %+v, want none", got)
		}
		e := breaker.Event{Time: now(), BreakerKey: "caba", Operation: aggregator.ByDomain, From: breaker.Closed, To: breaker.Open}
		st.Events.Append(e)
		c.RPush(ctx, prefix+"events:log", "{garbage", `{"time": 3}`, "[]", `{"from":"closed"}`)
		if got := st.Events.Latest(10); len(got) != 1 || got[0].To != breaker.Open {
			t.Errorf("Latest = %+v, want the one event that parses", got)
		}
		if got := st.Events.Since(time.Time{}); len(got) != 1 {
			t.Errorf("Since = %+v, want the one event that parses", got)
		}
		if st.Degraded() {
			t.Error("garbage made the store degrade")
		}
	})

	t.Run("messages and settings", func(t *testing.T) {
		prefix := testPrefix(t, c)
		got := make(chan breaker.Settings, 8)
		st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout,
			OnSettings: func(_ breaker.ID, s breaker.Settings) { got <- s }})
		for _, m := range []string{"garbage", "{}", `{"k": 3}`, `{"k":"caba","o":"by_domain","v":"x"}`,
			`{"k":"caba","o":"by_domain","s":7}`, `[1,2]`} {
			c.Publish(ctx, prefix+"events", m)
		}
		c.Set(ctx, prefix+"{caba/by_domain}:settings", "{not json", 0)
		if _, ok, err := st.Breakers.SharedSettings(ctx, caba); ok || err != nil {
			t.Errorf("SharedSettings of garbage = %v, %v; want none", ok, err)
		}
		c.HSet(ctx, prefix+"{caba/by_domain}:settings", "a", "b")
		if _, ok, err := st.Breakers.SharedSettings(ctx, caba); ok || err != nil {
			t.Errorf("SharedSettings of a hash = %v, %v; want none", ok, err)
		}
		time.Sleep(20 * time.Millisecond)
		select {
		case s := <-got:
			t.Errorf("garbage delivered as settings: %+v", s)
		default:
		}
	})
}
