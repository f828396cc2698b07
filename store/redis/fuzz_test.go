package redisstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"math"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/internal/untrusted"
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
// through Redis, as a replica reads them at start-up: never a panic;
// settings accepted are valid (what config validation accepts), and
// encode to settings decoded the same.
func FuzzSharedSettings(f *testing.F) {
	for _, seed := range []string{
		`{"window":60000000000,"min_calls":10,"failure_ratio":0.5,"consecutive_failures":0,"open_for":30000000000,"slow_call":0,"failure_statuses":[500,502,503,504],"probe_lease":3000000000}`,
		`{"window":1,"min_calls":1,"failure_ratio":1,"open_for":1}`,
		`{"window":1,"min_calls":1,"failure_ratio":1e-300,"open_for":1,"failure_statuses":[599,500]}`,
		`{"failure_statuses":null}`,
		`{"window":1e30}`,
		`{"window":-1,"min_calls":1,"failure_ratio":0.5,"open_for":1}`,
		`{"window":1,"min_calls":1,"failure_ratio":0.5,"open_for":1,"failure_statuses":[200]}`,
		`[]`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		got, ok := decodeSettings([]byte(body))
		if !ok {
			return
		}
		sh := toShared(got)
		if !sh.valid() {
			t.Errorf("settings %+v accepted, not valid", got)
		}
		enc, err := json.Marshal(sh)
		if err != nil {
			t.Fatalf("settings %+v do not encode: %v", got, err)
		}
		again, ok := decodeSettings(enc)
		if !ok || !again.Equal(got) {
			t.Errorf("settings %+v do not survive a round trip: %+v, %v", got, again, ok)
		}
	})
}

// FuzzDecodeEvent decodes entries of the shared event log: never a panic;
// an event accepted is one the admin API can serve (a breaker's
// transition, or a store event as health.go writes it), and encodes to an
// entry decoded the same.
func FuzzDecodeEvent(f *testing.F) {
	good, _ := json.Marshal(breaker.Event{Time: time.Date(2026, 3, 14, 9, 0, 0, 0, time.FixedZone("ART", -3*3600)),
		BreakerKey: "caba", Operation: aggregator.ByDomain, From: breaker.Closed, To: breaker.Open,
		Reason: "4 of 4 calls failed", Evidence: breaker.Evidence{Calls: 4, Failures: 4, Ratio: 1, WindowSeconds: 60}})
	for _, seed := range []string{
		string(good),
		`{"time":"2026-03-14T09:00:00Z","breaker_key":"k","operation":"voucher","from":"open","to":"half_open","reason":"","evidence":{}}`,
		`{"time":"2026-03-14T09:00:00Z","breaker_key":"k","operation":"voucher","from":"open","to":"ajar"}`,
		`{"time":"2026-03-14T09:00:00Z","breaker_key":"k","operation":"by_id","from":"open","to":"closed","evidence":{"calls":1,"failures":2}}`,
		`{"time":"0000-01-01T00:00:00+23:59","breaker_key":"k","operation":"by_id","from":"open","to":"closed"}`,
		`{"time": 3}`,
		`null`,
		"\x00\xff",
		`{"time":"2026-03-14T09:00:00Z","breaker_key":"","operation":"","from":"shared","to":"local","reason":"redis store unreachable","evidence":{},"kind":"store"}`,
		`{"time":"2026-03-14T09:00:00Z","breaker_key":"k","operation":"by_id","from":"local","to":"shared","kind":"store"}`,
		`{"time":"2026-03-14T09:00:00Z","breaker_key":"k","operation":"by_id","from":"open","to":"closed","kind":"other"}`,
		`{"time":"2026-03-14T09:00:00Z","breaker_key":"k","operation":"by_domain","from":"","to":"","reason":"shape","kind":"mapping","source":"caba","added":["/importe"],"removed":["/monto"],"unmapped":{"amount":{"missing":3}},"evidence":{"window_seconds":3600}}`,
		`{"time":"2026-03-14T09:00:00Z","breaker_key":"k","operation":"by_domain","from":"","to":"","reason":"shape","kind":"mapping","source":"caba","added":["/AB123CD"]}`,
		`{"time":"2026-03-14T09:00:00Z","breaker_key":"k","operation":"by_domain","from":"open","to":"closed","source":"caba"}`,
		`{"time":"2026-03-14T09:00:00Z","breaker_key":"k","operation":"voucher","kind":"mapping","source":"caba","unmapped":{"amount":{"missing":-1}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, ok := decodeEvent(b)
		if !ok {
			return
		}
		switch e.Kind {
		case breaker.KindStore:
			if e.BreakerKey != "" || e.Operation != "" || !(e.From == Shared && e.To == Local || e.From == Local && e.To == Shared) {
				t.Errorf("store event %+v accepted", e)
			}
		case "":
			if e.BreakerKey == "" || !e.Operation.Valid() || !validState(e.From) || !validState(e.To) || e.Source != "" {
				t.Errorf("event %+v accepted", e)
			}
		case breaker.KindMapping:
			if e.Source == "" || e.From != "" || e.To != "" || e.Operation == aggregator.Voucher || len(e.Added) > 200 {
				t.Errorf("mapping event %+v accepted", e)
			}
			for _, n := range append(append([]string(nil), e.Added...), e.Removed...) {
				if strings.ContainsAny(n, "0123456789") {
					t.Errorf("mapping event with the name %q accepted", n)
				}
			}
		default:
			t.Errorf("event of kind %q accepted", e.Kind)
		}
		enc, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("event %+v does not encode: %v", e, err)
		}
		again, ok := decodeEvent(enc)
		if !ok || !again.Time.Equal(e.Time) || again.Evidence != e.Evidence || again.Reason != e.Reason ||
			again.BreakerKey != e.BreakerKey || again.From != e.From || again.To != e.To || again.Kind != e.Kind ||
			again.Source != e.Source || !reflect.DeepEqual(again.Added, e.Added) || !reflect.DeepEqual(again.Unmapped, e.Unmapped) {
			t.Errorf("event %+v does not survive a round trip: %+v, %v", e, again, ok)
		}
	})
}

// FuzzParsePause reads the end of a pause: never a panic; a pause
// accepted ends no further ahead than MaxPause (and clocks' skew), and is
// written back the same.
func FuzzParsePause(f *testing.F) {
	now := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	for _, seed := range []string{
		strconv.FormatInt(now.Add(time.Minute).UnixMicro(), 10),
		strconv.FormatInt(now.Add(-time.Minute).UnixMicro(), 10),
		strconv.FormatInt(now.Add(time.Hour).UnixMicro(), 10),
		"-1", "0", "007", "1e99", "9223372036854775807", "nan", "", " 1",
	} {
		f.Add(seed)
	}
	s := &Stores{opts: Options{MaxPause: 10 * time.Minute}}
	l := newLimitStore(s)
	f.Fuzz(func(t *testing.T, v string) {
		us := l.parsePause("k", v, now)
		if us == 0 {
			return
		}
		if us > now.Add(10*time.Minute+skew).UnixMicro() {
			t.Errorf("pause %q accepted: ends at %v", v, time.UnixMicro(us))
		}
		if again := l.parsePause("k", strconv.FormatInt(us, 10), now); again != us {
			t.Errorf("pause %q read as %d, then as %d", v, us, again)
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

// TestReceiveUnreadable: a breaker message that is not what a script
// publishes (a version or a field that is not an integer, a state that is
// not one) changes nothing this replica knows, and is logged by channel,
// never by contents; the message a script publishes is applied.
func TestReceiveUnreadable(t *testing.T) {
	t.Parallel()
	const channel = DefaultPrefix + "events"
	closed := `{"k":"caba","o":"by_domain","v":"7","st":"closed","g":"3","sn":"1","ou":"0","pu":"0","ot":"0"}`
	tests := []struct {
		payload string
		bad     bool
	}{
		{`{"k":"caba","o":"by_domain","v":"8","st":"open","g":"4","sn":"1","ou":"2","pu":"0","ot":"0"}`, false},
		{`{"k":"caba","o":"by_domain","v":"GARBAGE"}`, true},
		{`{"k":"caba","o":"by_domain","v":"-8"}`, true},
		{`{"k":"caba","o":"by_domain","v":"99999999999999999999"}`, true},
		{`{"k":"caba","o":"by_domain","v":"8","st":"open","g":"GARBAGE","sn":"1","ou":"2","pu":"0","ot":"0"}`, true},
		{`{"k":"caba","o":"by_domain","v":"8","st":"open","g":"4","sn":"1","ou":"2.5","pu":"0","ot":"0"}`, true},
		{`{"k":"caba","o":"by_domain","v":"8","st":"open","g":"4","sn":"1","pu":"0","ot":"0"}`, true},
		{`{"k":"caba","o":"by_domain","v":"8","st":"GARBAGE","g":"4","sn":"1","ou":"2","pu":"0","ot":"0"}`, true},
		{`{"k":"caba","o":"by_domain","v":"8","st":"open","g":"4","sn":"1","ou":"-2","pu":"0","ot":"0"}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.payload, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			var mu sync.Mutex
			logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
			s := &Stores{opts: Options{Prefix: DefaultPrefix}, replica: "me", channel: channel, bad: untrusted.New(logger)}
			s.Breakers = newBreakerStore(s)
			s.Limits = newLimitStore(s)
			e := s.Breakers.entry(fuzzID)
			s.receive(&redis.Message{Channel: channel, Payload: closed})
			s.receive(&redis.Message{Channel: channel, Payload: tt.payload})
			e.mu.Lock()
			known, v := e.known, e.v
			e.mu.Unlock()
			mu.Lock()
			logged := buf.String()
			mu.Unlock()
			want := breaker.Open
			if tt.bad {
				want = breaker.Closed
			}
			if !known || v.st != want {
				t.Errorf("view = %+v (known %v), want %s", v, known, want)
			}
			if got := strings.Contains(logged, channel); got != tt.bad {
				t.Errorf("channel logged = %v, want %v: %q", got, tt.bad, logged)
			}
			if strings.Contains(logged, "GARBAGE") {
				t.Errorf("contents logged: %q", logged)
			}
		})
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
