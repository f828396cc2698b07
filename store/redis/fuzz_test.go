package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
)

// The values read back from Redis are outside input: another replica, an
// older version, or anyone with access to Redis may have written them. The
// parsers below turn them into events, settings and invalidations; garbage
// must come out as "nothing there", never as a panic or as a value the
// admin API cannot encode.

var fuzzID = breaker.ID{Key: "caba", Operation: aggregator.ByDomain}

// checkEvent fails unless e, a parsed event, is one the admin API can
// serve: a known transition of fuzzID with finite evidence, that encodes
// to JSON.
func checkEvent(t *testing.T, e breaker.Event) {
	t.Helper()
	if e.BreakerKey != fuzzID.Key || e.Operation != fuzzID.Operation {
		t.Errorf("event of %s/%s, want %s", e.BreakerKey, e.Operation, fuzzID)
	}
	if !validState(e.From) || !validState(e.To) {
		t.Errorf("event %s → %s", e.From, e.To)
	}
	for _, f := range []float64{e.Evidence.Ratio, e.Evidence.WindowSeconds, e.Evidence.RetryAfter} {
		if math.IsNaN(f) || math.IsInf(f, 0) {
			t.Errorf("evidence %+v is not finite", e.Evidence)
		}
	}
	if _, err := json.Marshal(e); err != nil {
		t.Errorf("event %+v does not encode: %v", e, err)
	}
}

// FuzzParseLast parses the last transition kept in a breaker's hash (a
// JSON array of nine strings).
func FuzzParseLast(f *testing.F) {
	for _, seed := range []string{
		`["1773490320000000","closed","open","5 of 10 calls failed","10","5","0","0","60000000"]`,
		`["1773490320000000","open","half_open","open time elapsed","0","0","0","0","0"]`,
		`["99999999999999999999","closed","open","r","x","y","z","w","v"]`,
		`["-99999999999999999999","forced_open","closed","manual reset","-1","-1","-1","-1","-1"]`,
		`["1","open"]`,
		`["1","ajar","open","","","","","",""]`,
		`{not json`,
		`[1,2,3,4,5,6,7,8,9]`,
		`null`,
		``,
	} {
		f.Add(seed)
	}
	loc := time.FixedZone("ART", -3*3600)
	f.Fuzz(func(t *testing.T, s string) {
		e, ok := parseLast(s, fuzzID, loc)
		if ok {
			checkEvent(t, e)
		}
	})
}

// FuzzParseEvents parses the transitions a breaker script returns: a list
// of lists of strings, or whatever else a reply decodes to (go-redis gives
// strings, integers, nils and nested lists; JSON stands in for them here).
func FuzzParseEvents(f *testing.F) {
	for _, seed := range []string{
		`[["1773490320000000","closed","open","5 of 10 calls failed","10","5","0","0","60000000"]]`,
		`[["1773490320000000","open","half_open","open time elapsed","0","0","0","0","0"], ["1"], [], null, 7, "x"]`,
		`[["9223372036854775807","closed","open","r","1","2","3","9223372036854775807","9223372036854775807"]]`,
		`[[1773490320000000,"closed","open","r","1","1","1","1","1"]]`,
		`"not a list"`,
		`[]`,
		`{}`,
	} {
		f.Add(seed)
	}
	loc := time.UTC
	f.Fuzz(func(t *testing.T, s string) {
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return
		}
		for _, e := range parseEvents(reply(v), fuzzID, loc) {
			checkEvent(t, e)
		}
	})
}

// reply turns decoded JSON into the types of a go-redis reply: numbers
// become int64, objects nil.
func reply(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = reply(x)
		}
		return out
	case float64:
		if v >= math.MinInt64 && v < math.MaxInt64 {
			return int64(v)
		}
		return nil
	case string:
		return v
	}
	return nil
}

// FuzzReceive feeds invalidation messages (the payloads of the stores'
// pub/sub channel) to a replica's stores wired, as the app wires them, to
// a breaker.Set: no payload makes it panic, not even when the breaker then
// decides with the settings a message carried, and settings are handed on
// only when another replica sent them for a breaker.
func FuzzReceive(f *testing.F) {
	for _, seed := range []string{
		`{"k":"caba","o":"by_domain","v":"7"}`,
		`{"k":"caba","o":"by_domain","v":"7","st":"closed","g":"3","sn":"1","ou":"0","pu":"0","ot":"0"}`,
		`{"k":"caba","o":"by_domain","v":"8","st":"open","g":"4","sn":"1773490320000000","ou":"99999999999999999999","pu":"x","ot":"-5"}`,
		`{"k":"caba","o":"by_domain","v":"9","st":"forced_open","g":"9007199254740993"}`,
		`{"k":"caba","o":"by_domain","v":"9","st":"half_open","g":"5","pu":"1773490320000000"}`,
		`{"k":"caba","o":"by_domain","v":"9","st":"ajar","g":"5"}`,
		`{"p":"caba","k":"","o":""}`,
		`{"k":"caba","o":"by_domain","s":{"window":60000000000,"min_calls":10,"failure_ratio":0.5,"open_for":30000000000,"failure_statuses":[500]},"r":"other"}`,
		`{"k":"caba","o":"by_domain","s":{"window":-1,"min_calls":-1,"failure_ratio":-1,"open_for":-1,"slow_call":-1},"r":"other"}`,
		`{"k":"caba","o":"by_domain","s":{"window":8640000000000000000,"min_calls":1,"failure_ratio":0.5,"open_for":1000000000},"r":"other"}`,
		`{"k":"caba","o":"by_domain","s":{},"r":"me"}`,
		`{"k":"caba","o":"by_domain","s":null}`,
		`{"k":"caba","o":"by_domain","v":"99999999999999999999"}`,
		`{"k":1}`,
		`not json`,
		``,
	} {
		f.Add(seed)
	}
	now := time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, payload string) {
		set := breaker.NewSet(breaker.NewMemoryStore(), breaker.Options{Now: func() time.Time { return now }})
		set.Add(fuzzID, "caba", breaker.Settings{Window: time.Minute, MinCalls: 1, FailureRatio: 0.5,
			OpenFor: time.Second, FailureStatuses: []int{503}})
		var got []breaker.ID
		s := &Stores{opts: Options{Prefix: DefaultPrefix, OnSettings: func(id breaker.ID, st breaker.Settings) {
			got = append(got, id)
			set.SetSettings(id, st)
		}}, replica: "me"}
		s.Breakers = newBreakerStore(s)
		s.Limits = newLimitStore(s)
		s.Breakers.entry(fuzzID) // a breaker this replica uses
		s.receive(&redis.Message{Channel: DefaultPrefix + "events", Payload: payload})
		if len(got) > 1 {
			t.Errorf("one message handed on %d settings", len(got))
		}
		var msg message
		if len(got) == 1 && (json.Unmarshal([]byte(payload), &msg) != nil || msg.Replica == "me" || msg.Key == "") {
			t.Errorf("settings handed on from %q", payload)
		}
		for _, r := range []breaker.Report{{Outcome: aggregator.Succeeded}, {Outcome: aggregator.Unavailable, Status: 503}} {
			if c, err := set.Allow(ctx, fuzzID); err == nil {
				c.Done(ctx, r)
			}
			if _, err := set.Status(ctx, fuzzID); err != nil {
				t.Errorf("status: %v", err)
			}
		}
	})
}

// FuzzSharedSettings decodes the run-time settings an operator shared
// through Redis, as a replica reads them at start-up: never a panic.
func FuzzSharedSettings(f *testing.F) {
	for _, seed := range []string{
		`{"window":60000000000,"min_calls":10,"failure_ratio":0.5,"consecutive_failures":0,"open_for":30000000000,"slow_call":0,"failure_statuses":[500,502,503,504],"probe_lease":3000000000}`,
		`{"failure_statuses":null}`,
		`{"window":1e30}`,
		`[]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var s sharedSettings
		if json.Unmarshal([]byte(body), &s) != nil {
			return
		}
		got := s.settings()
		if again := toShared(got).settings(); !again.Equal(got) {
			t.Errorf("settings %+v do not survive a round trip: %+v", got, again)
		}
	})
}

// FuzzView applies a published breaker state (anyone with access to Redis
// may publish on the channel) to a replica's view, then decides a call from
// it: garbage is no view, never a panic, and a refusal never asks to retry
// in the past.
func FuzzView(f *testing.F) {
	for _, seed := range []string{
		`{"k":"caba","o":"by_domain","v":"7","st":"closed","g":"3","sn":"1","ou":"0","pu":"0","ot":"0"}`,
		`{"k":"caba","o":"by_domain","v":"8","st":"open","g":"4","sn":"1773490320000000","ou":"1773490380000000"}`,
		`{"k":"caba","o":"by_domain","v":"8","st":"open","g":"4","ou":"99999999999999999999","pu":"x","ot":"-5"}`,
		`{"k":"caba","o":"by_domain","v":"9","st":"forced_open","g":"9007199254740993"}`,
		`{"k":"caba","o":"by_domain","v":"9","st":"half_open","g":"5","pu":"1773490320000000"}`,
		`{"k":"caba","o":"by_domain","v":"9","st":"ajar","g":"5"}`,
		`{"k":"caba","o":"by_domain","v":"10"}`,
		`not json`,
	} {
		f.Add(seed, int64(0))
	}
	settings := breaker.Settings{Window: time.Minute, MinCalls: 2, FailureRatio: 0.5, ConsecutiveFailures: 3,
		OpenFor: time.Second, FailureStatuses: []int{503}}
	f.Fuzz(func(t *testing.T, payload string, at int64) {
		s := &Stores{opts: Options{Prefix: DefaultPrefix}, replica: "me"}
		s.Breakers = newBreakerStore(s)
		s.Limits = newLimitStore(s)
		e := s.Breakers.entry(fuzzID)
		e.mu.Lock()
		e.configure(settings, "events")
		e.mu.Unlock()
		s.receive(&redis.Message{Channel: DefaultPrefix + "events", Payload: payload})
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.known && !e.v.valid() {
			t.Errorf("view %+v kept from %q", e.v, payload)
		}
		now := time.UnixMicro(at % maxExact)
		_, err, _ := e.decide(settings, now)
		var oe *breaker.OpenError
		if errors.As(err, &oe) && oe.RetryAfter < 0 {
			t.Errorf("refusal %v asks to retry in the past", oe)
		}
		e.p.add(e.v.gen, now.UnixMicro(), breaker.Failure, time.Second)
		_ = e.wouldTrip(settings)
		_ = e.flushArgs(e.take())
	})
}

// FuzzParseView reads the view in a breaker script's reply, as go-redis
// decodes it (JSON stands in for it): out of range is no view.
func FuzzParseView(f *testing.F) {
	for _, seed := range []string{
		`[[], "closed", "3", "7", "1773490320000000", "0", "0", "0", "0", "12", "3", "0", "0"]`,
		`[[], "open", 4, 9, "1", "1773490380000000", "0", "5", "0", "-1", "-1"]`,
		`[[], "open", "-4", "9", "1", "1e30", "0", "5", "0", "-1", "-1"]`,
		`[[], "ajar"]`,
		`[]`,
		`"x"`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v any
		if json.Unmarshal([]byte(s), &v) != nil {
			return
		}
		res, _ := reply(v).([]any)
		view, ok := parseView(res)
		if ok && !view.valid() {
			t.Errorf("view %+v accepted", view)
		}
	})
}
