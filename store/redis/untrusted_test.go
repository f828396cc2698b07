package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/breaker"
	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/ratelimit"
	redisstore "github.com/multas/aggregator/store/redis"
)

// Redis contents are untrusted (SPEC 9): whatever a key holds, the stores
// treat what they cannot read as absent, log the key's name (never the
// value), and go on; a breaker whose state is unreadable starts closed and
// is written back, readable.

// marker is in every planted value that is text, so that a log line or an
// answer carrying one is easy to find.
const marker = "GARBAGE"

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// newLog returns a logger that writes JSON lines, debug level included, to
// a buffer.
func newLog() (*slog.Logger, *logBuffer) {
	buf := &logBuffer{}
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// checkLog fails unless the log names key as unreadable, and holds none of
// the planted values (those long enough to be told apart from other text).
func checkLog(t *testing.T, log *logBuffer, key string, planted ...string) {
	t.Helper()
	out := log.String()
	name, _ := json.Marshal(key)
	if !strings.Contains(out, `"key":`+string(name)) || !strings.Contains(out, "unreadable") {
		t.Errorf("the log does not name %s as unreadable:\n%s", key, out)
	}
	for _, v := range append(planted, marker) {
		if len(v) >= 6 && strings.Contains(out, v) {
			t.Errorf("the log holds the planted value %q:\n%s", v, out)
		}
	}
}

var integer = regexp.MustCompile(`^\d+$`)

// checkBreakerHash fails unless the breaker's hash holds a state the
// scripts write: a known state, every state and window field a
// non-negative integer, a last transition (if any) that decodes, and no
// planted value.
func checkBreakerHash(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	h, err := c.HGetAll(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("reading %s back: %v", key, err)
	}
	switch breaker.State(h["st"]) {
	case breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.ForcedOpen:
	default:
		t.Errorf("%s: state %q after the store read it", key, h["st"])
	}
	for _, f := range []string{"since", "gen", "ver", "ou", "pu", "ot", "cf", "bp", "wi", "wc", "wf"} {
		if !integer.MatchString(h[f]) {
			t.Errorf("%s: field %s = %q after the store read it, want an integer", key, f, h[f])
		}
	}
	if last, ok := h["last"]; ok {
		var strs []string
		if json.Unmarshal([]byte(last), &strs) != nil || len(strs) != 9 {
			t.Errorf("%s: last = %q", key, last)
		}
	}
	for f, v := range h {
		if strings.Contains(v, marker) || strings.Contains(f, marker) {
			t.Errorf("%s: %s = %q still there", key, f, v)
		}
	}
}

// us formats a time as the scripts write it.
func us(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

const century = 100 * 365 * 24 * time.Hour

// breakerPlants are the unreadable breakers of the tests: each writes at
// key (on the clock at now) and returns the values it planted.
var breakerPlants = []struct {
	name  string
	plant func(c *redis.Client, key string, now time.Time) []string
	// kept: the hash is readable but for one window bucket, which counts
	// as empty and is overwritten in its turn (not at once).
	kept bool
	// overwritten: the garbage is in fields a reset writes without
	// reading them (the window, the last transition): after a reset
	// there is nothing left to report.
	overwritten bool
}{
	{name: "a string", plant: func(c *redis.Client, key string, _ time.Time) []string {
		v := marker + "-string\x00\xff\xfe"
		c.Set(context.Background(), key, v, 0)
		return []string{v}
	}},
	{name: "a list", plant: func(c *redis.Client, key string, _ time.Time) []string {
		c.RPush(context.Background(), key, marker+"-list", "closed")
		return nil
	}},
	{name: "a set", plant: func(c *redis.Client, key string, _ time.Time) []string {
		c.SAdd(context.Background(), key, marker+"-set")
		return nil
	}},
	{name: "a sorted set", plant: func(c *redis.Client, key string, _ time.Time) []string {
		c.ZAdd(context.Background(), key, redis.Z{Score: 1, Member: marker + "-zset"})
		return nil
	}},
	{name: "a hash of other fields", plant: func(c *redis.Client, key string, _ time.Time) []string {
		c.HSet(context.Background(), key, marker+"-field", marker+"-value")
		return nil
	}},
	{name: "an unknown state", plant: func(c *redis.Client, key string, _ time.Time) []string {
		c.HSet(context.Background(), key, "st", marker+"-ajar", "gen", "7")
		return nil
	}},
	{name: "numbers that are not integers", plant: func(c *redis.Client, key string, now time.Time) []string {
		c.HSet(context.Background(), key, "st", "closed", "since", "0x1p40", "gen", "1.5", "ver", "1e400",
			"ou", "0", "pu", "0", "ot", "nan", "cf", "inf")
		return []string{"0x1p40", "1e400"}
	}},
	{name: "numbers beyond 2^53", plant: func(c *redis.Client, key string, now time.Time) []string {
		c.HSet(context.Background(), key, "st", "forced_open", "since", us(now), "gen", "9007199254740993",
			"ver", "99999999999999999999", "ou", "0", "pu", "0", "ot", "0", "cf", "0")
		return []string{"9007199254740993", "99999999999999999999"}
	}},
	{name: "open for a century", plant: func(c *redis.Client, key string, now time.Time) []string {
		ou := us(now.Add(century))
		c.HSet(context.Background(), key, "st", "open", "since", us(now.Add(-time.Second)), "gen", "3", "ver", "3",
			"ou", ou, "pu", "0", "ot", "0", "cf", "0")
		return []string{ou}
	}},
	{name: "a probe lease of a century", plant: func(c *redis.Client, key string, now time.Time) []string {
		pu := us(now.Add(century))
		c.HSet(context.Background(), key, "st", "half_open", "since", us(now.Add(-time.Second)), "gen", "3", "ver", "3",
			"ou", "0", "pu", pu, "ot", "0", "cf", "0")
		return []string{pu}
	}},
	{name: "open since a year from now", plant: func(c *redis.Client, key string, now time.Time) []string {
		since := us(now.Add(365 * 24 * time.Hour))
		c.HSet(context.Background(), key, "st", "open", "since", since, "gen", "1", "ver", "1",
			"ou", us(now.Add(365*24*time.Hour+time.Second)), "pu", "0", "ot", "0", "cf", "0")
		return []string{since}
	}},
	{name: "open until before it opened", plant: func(c *redis.Client, key string, now time.Time) []string {
		c.HSet(context.Background(), key, "st", "open", "since", us(now), "gen", "1", "ver", "1",
			"ou", us(now.Add(-time.Hour)), "pu", "0", "ot", "0", "cf", "0")
		return nil
	}},
	{name: "negative counts", plant: func(c *redis.Client, key string, now time.Time) []string {
		c.HSet(context.Background(), key, "st", "closed", "since", us(now), "gen", "-4", "ver", "1",
			"ou", "0", "pu", "0", "ot", "-123456789", "cf", "-5")
		return []string{"-123456789"}
	}},
	{name: "more failures than calls", overwritten: true, plant: func(c *redis.Client, key string, now time.Time) []string {
		bp := (6 * time.Second).Microseconds()
		c.HSet(context.Background(), key, "st", "closed", "since", us(now), "gen", "1", "ver", "1",
			"ou", "0", "pu", "0", "ot", "0", "cf", "0", "bp", bp, "wi", now.UnixMicro()/bp, "wc", "1", "wf", "9")
		return nil
	}},
	{name: "a window ahead of the clocks", overwritten: true, plant: func(c *redis.Client, key string, now time.Time) []string {
		bp := (6 * time.Second).Microseconds()
		c.HSet(context.Background(), key, "st", "closed", "since", us(now), "gen", "1", "ver", "1",
			"ou", "0", "pu", "0", "ot", "0", "cf", "0", "bp", bp, "wi", "1000000000000", "wc", "5", "wf", "5")
		return []string{"1000000000000"}
	}},
	{name: "a last transition that does not decode", overwritten: true, plant: func(c *redis.Client, key string, now time.Time) []string {
		c.HSet(context.Background(), key, "st", "closed", "since", us(now), "gen", "1", "ver", "1",
			"ou", "0", "pu", "0", "ot", "0", "cf", "0", "last", `["`+marker+`", {`)
		return nil
	}},
	{name: "a last transition of another shape", overwritten: true, plant: func(c *redis.Client, key string, now time.Time) []string {
		c.HSet(context.Background(), key, "st", "closed", "since", us(now), "gen", "1", "ver", "1",
			"ou", "0", "pu", "0", "ot", "0", "cf", "0",
			"last", `["`+us(now)+`","closed","`+marker+`","r","1","1","0","0","0"]`)
		return nil
	}},
	{name: "a last transition from a year ahead", overwritten: true, plant: func(c *redis.Client, key string, now time.Time) []string {
		at := us(now.Add(365 * 24 * time.Hour))
		c.HSet(context.Background(), key, "st", "closed", "since", us(now), "gen", "1", "ver", "1",
			"ou", "0", "pu", "0", "ot", "0", "cf", "0",
			"last", `["`+at+`","closed","open","r","1","1","0","0","0"]`)
		return []string{at}
	}},
	{name: "a bucket that does not parse", kept: true, overwritten: true, plant: func(c *redis.Client, key string, now time.Time) []string {
		bp := (6 * time.Second).Microseconds()
		wi := now.UnixMicro() / bp
		// The bucket that leaves the window next: read by the next call.
		c.HSet(context.Background(), key, "st", "closed", "since", us(now), "gen", "1", "ver", "1",
			"ou", "0", "pu", "0", "ot", "0", "cf", "0", "bp", bp, "wi", wi-1, "wc", "0", "wf", "0",
			fmt.Sprintf("b%d", (wi-10)%10), marker+":1:1")
		return nil
	}},
}

// TestUnreadableBreakerStartsClosed: whatever a breaker's key holds that
// the scripts do not write, the first call of any kind (a status read, a
// permit, a reset) finds the breaker closed, the key is written back
// readable, its name (only) is logged, the store does not degrade, and the
// breaker works: it trips on failures and resets.
func TestUnreadableBreakerStartsClosed(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	ctx := context.Background()
	for _, first := range []string{"status", "allow", "reset"} {
		for _, tt := range breakerPlants {
			t.Run(first+"/"+tt.name, func(t *testing.T) {
				clock := breakertest.NewClock()
				prefix := testPrefix(t, c)
				key := prefix + "{caba/by_domain}:breaker"
				planted := tt.plant(c, key, clock.Now())
				logger, log := newLog()
				st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, Logger: logger})
				set := breaker.NewSet(st.Breakers, breaker.Options{Now: clock.Now, Events: st.Events})
				set.Add(caba, "caba", breakertest.Settings())

				switch first {
				case "status":
					if got := state(t, set); got != breaker.Closed {
						t.Errorf("state = %s, want closed", got)
					}
				case "allow":
					call, err := set.Allow(ctx, caba)
					if err != nil {
						t.Fatalf("Allow = %v, want a permit of a closed breaker", err)
					}
					call.Done(ctx, succeed)
				case "reset":
					if err := set.Reset(ctx, caba); err != nil {
						t.Fatalf("Reset: %v", err)
					}
				}
				if got := state(t, set); got != breaker.Closed {
					t.Errorf("state read again = %s, want closed", got)
				}
				if !tt.kept {
					checkBreakerHash(t, c, key)
				}
				if !tt.overwritten || first != "reset" {
					checkLog(t, log, key, planted...)
				}

				// It works: ten failures trip it (min_calls 10, ratio
				// 0.5), a reset closes it.
				for range 10 {
					call(t, set, fail)
				}
				if got := state(t, set); got != breaker.Open {
					t.Errorf("after 10 failures: %s, want open", got)
				}
				checkBreakerHash(t, c, key)
				if err := set.Reset(ctx, caba); err != nil {
					t.Fatal(err)
				}
				if got := state(t, set); got != breaker.Closed {
					t.Errorf("after reset: %s, want closed", got)
				}
				if st.Degraded() {
					t.Error("garbage made the store degrade")
				}
			})
		}
	}
}

// TestUnreadableDoneVerdict: garbage that appears while a call is in
// flight (the permit's generation no longer there) makes the verdict
// stale when it is flushed, and the breaker is written back closed.
func TestUnreadableDoneVerdict(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	ctx := context.Background()
	clock := breakertest.NewClock()
	prefix := testPrefix(t, c)
	key := prefix + "{caba/by_domain}:breaker"
	logger, log := newLog()
	st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, Logger: logger})
	set := breaker.NewSet(st.Breakers, breaker.Options{Now: clock.Now, Events: st.Events})
	set.Add(caba, "caba", breakertest.Settings())
	call, err := set.Allow(ctx, caba)
	if err != nil {
		t.Fatal(err)
	}
	c.Del(ctx, key)
	c.HSet(ctx, key, "st", "half_open", "gen", marker, "ver", "1")
	call.Done(ctx, fail)
	// The verdict of a closed breaker's call goes to Redis with the next
	// flush (SPEC 11), which Status sends before it reads.
	if got := state(t, set); got != breaker.Closed {
		t.Errorf("state = %s, want closed", got)
	}
	checkBreakerHash(t, c, key)
	checkLog(t, log, key)
}

// TestUnreadableLimits: a budget or a pause that cannot be read (another
// type, not a number, or a time further ahead than the store could have
// written) is no budget spent and no pause; the next pause set replaces
// it, and what is then stored reads back.
func TestUnreadableLimits(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	ctx := context.Background()
	now := breakertest.NewClock().Now()
	// One token a flush interval is reserved (limit_reserve.lua); more are
	// leased a flush interval at a time (limit_lease.lua).
	budgets := []struct {
		name string
		s    ratelimit.Settings
	}{
		{"reserved", ratelimit.Settings{RPS: 1, Burst: 1}},
		{"leased", ratelimit.Settings{RPS: 1000, Burst: 10}},
	}
	tests := []struct {
		name       string
		tat, pause func(key string) string
	}{
		{"strings",
			func(k string) string { c.Set(ctx, k, marker+"-tat", 0); return "" },
			func(k string) string { c.Set(ctx, k, marker+"-pause", 0); return "" }},
		{"other types",
			func(k string) string { c.HSet(ctx, k, "x", marker); return "" },
			func(k string) string { c.SAdd(ctx, k, marker); return "" }},
		{"numbers that are not integers",
			func(k string) string { c.Set(ctx, k, "nan", 0); return "" },
			func(k string) string { c.Set(ctx, k, "1e999", 0); return "1e999" }},
		{"a century ahead",
			func(k string) string { v := us(now.Add(century)); c.Set(ctx, k, v, 0); return v },
			func(k string) string { v := us(now.Add(century)); c.Set(ctx, k, v, 0); return v }},
		{"beyond max_pause",
			func(k string) string { return "" },
			func(k string) string { v := us(now.Add(2 * time.Hour)); c.Set(ctx, k, v, 0); return v }},
	}
	for _, b := range budgets {
		for _, tt := range tests {
			s := b.s
			t.Run(b.name+"/"+tt.name, func(t *testing.T) {
				prefix := testPrefix(t, c)
				tatKey, pauseKey := prefix+"{ratelimit/a}:tat", prefix+"{ratelimit/a}:pause"
				planted := []string{tt.tat(tatKey), tt.pause(pauseKey)}
				logger, log := newLog()
				st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, Logger: logger,
					MaxPause: time.Hour})
				if until, err := st.Limits.PausedUntil(ctx, "a", now); err != nil || !until.IsZero() {
					t.Errorf("PausedUntil = %v, %v; want no pause", until, err)
				}
				checkLog(t, log, pauseKey, planted...)
				if wait, ok, err := st.Limits.Reserve(ctx, "a", s, 0, now); err != nil || !ok || wait != 0 {
					t.Errorf("Reserve = %v, %v, %v; want a token now", wait, ok, err)
				}
				if tt.name != "beyond max_pause" {
					checkLog(t, log, tatKey, planted...)
				}
				if tat, err := c.Get(ctx, tatKey).Result(); err != nil || strings.Contains(tat, marker) {
					t.Errorf("budget read back: %q, %v", tat, err)
				}
				if err := st.Limits.SetPause(ctx, "a", now.Add(time.Second)); err != nil {
					t.Fatal(err)
				}
				if got, err := c.Get(ctx, pauseKey).Result(); err != nil || got != us(now.Add(time.Second)) {
					t.Errorf("pause read back: %q, %v; want %s", got, err, us(now.Add(time.Second)))
				}
				// A fresh store, so that nothing is remembered.
				st2 := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, MaxPause: time.Hour})
				if until, err := st2.Limits.PausedUntil(ctx, "a", now); err != nil || !until.Equal(now.Add(time.Second)) {
					t.Errorf("PausedUntil after SetPause = %v, %v; want %v", until, err, now.Add(time.Second))
				}
				if st.Degraded() || st2.Degraded() {
					t.Error("garbage made the store degrade")
				}
			})
		}
	}
}

// TestUnreadableEvents: entries of the shared log that are not events the
// stores write (garbage, or JSON of another shape) are left out of every
// listing, and a log of another type is an empty one, replaced at the next
// append.
func TestUnreadableEvents(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	ctx := context.Background()
	now := breakertest.NewClock().Now()
	prefix := testPrefix(t, c)
	key := prefix + "events:log"
	logger, log := newLog()
	st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, Logger: logger})

	c.Set(ctx, key, marker+"-not a list", 0)
	if got := st.Events.Latest(10); len(got) != 0 {
		t.Errorf("Latest of a string = %+v, want none", got)
	}
	checkLog(t, log, key)
	good := breaker.Event{Time: now, BreakerKey: "caba", Operation: aggregator.ByDomain, From: breaker.Closed,
		To: breaker.Open, Reason: "4 of 4 calls failed", Evidence: breaker.Evidence{Calls: 4, Failures: 4, Ratio: 1}}
	st.Events.Append(good)
	if n, err := c.LLen(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("after Append: %d entries, %v; want the list replaced, with one entry", n, err)
	}
	event := func(mod func(m map[string]any)) string {
		b, _ := json.Marshal(good)
		var m map[string]any
		_ = json.Unmarshal(b, &m)
		mod(m)
		b, _ = json.Marshal(m)
		return string(b)
	}
	bad := []string{
		marker + "\x00\xff",
		`{"time": 3}`,
		`[]`,
		`null`,
		event(func(m map[string]any) { delete(m, "time") }),
		event(func(m map[string]any) { m["time"] = "10000-01-01T00:00:00Z" }),
		event(func(m map[string]any) { m["from"] = marker }),
		event(func(m map[string]any) { m["to"] = "" }),
		event(func(m map[string]any) { m["operation"] = marker }),
		event(func(m map[string]any) { m["breaker_key"] = "" }),
		event(func(m map[string]any) { m["reason"] = strings.Repeat(marker, 1000) }),
		event(func(m map[string]any) { m["evidence"] = map[string]any{"calls": -1} }),
		event(func(m map[string]any) { m["evidence"] = map[string]any{"calls": 1, "failures": 2} }),
		event(func(m map[string]any) { m["evidence"] = map[string]any{"ratio": 7} }),
		event(func(m map[string]any) { m["evidence"] = map[string]any{"retry_after": -3} }),
		event(func(m map[string]any) { m["evidence"] = map[string]any{"calls": 1e30} }),
		event(func(m map[string]any) { m["evidence"] = marker }),
		// Store events (a replica leaving shared state or coming back)
		// have no breaker, and only shared and local as states.
		event(func(m map[string]any) { m["kind"] = breaker.KindStore }),
		event(func(m map[string]any) { m["kind"] = marker; m["from"], m["to"] = "shared", "local" }),
		event(func(m map[string]any) {
			m["kind"], m["breaker_key"], m["operation"], m["from"], m["to"] = breaker.KindStore, "", "", "shared", "open"
		}),
	}
	for _, b := range bad {
		c.RPush(ctx, key, b)
	}
	store := breaker.Event{Time: now.Add(time.Second), Kind: breaker.KindStore, From: redisstore.Shared,
		To: redisstore.Local, Reason: "redis store unreachable"}
	b, _ := json.Marshal(store)
	c.RPush(ctx, key, string(b))
	for name, got := range map[string][]breaker.Event{
		"Latest": st.Events.Latest(100), "Since": st.Events.Since(time.Time{}),
	} {
		if len(got) != 2 || got[0].To != breaker.Open || got[0].Reason != good.Reason ||
			got[1].Kind != breaker.KindStore || got[1].To != redisstore.Local {
			t.Errorf("%s = %+v, want the two events that are ones (a breaker's, the store's)", name, got)
		}
	}
	checkLog(t, log, key)
	if st.Degraded() {
		t.Error("garbage made the store degrade")
	}
}

// TestUnreadableSettings: shared breaker settings that do not decode, or
// that config validation would refuse, are no settings, read at start-up
// or received from another replica; the next share replaces them.
func TestUnreadableSettings(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	ctx := context.Background()
	valid := breakertest.Settings()
	body := func(mod func(m map[string]any)) string {
		m := map[string]any{"window": int64(time.Minute), "min_calls": 10, "failure_ratio": 0.5,
			"consecutive_failures": 0, "open_for": int64(time.Second), "slow_call": 0,
			"failure_statuses": []int{503}, "probe_lease": int64(time.Second)}
		mod(m)
		b, _ := json.Marshal(m)
		return string(b)
	}
	bad := []string{
		marker + "\x00\xff",
		`{"window": "1m"}`,
		`[]`,
		`null`,
		body(func(m map[string]any) { m["window"] = 0 }),
		body(func(m map[string]any) { m["min_calls"] = 0 }),
		body(func(m map[string]any) { m["failure_ratio"] = 0 }),
		body(func(m map[string]any) { m["failure_ratio"] = 1.5 }),
		body(func(m map[string]any) { m["consecutive_failures"] = -1 }),
		body(func(m map[string]any) { m["open_for"] = -1 }),
		body(func(m map[string]any) { m["slow_call"] = -1 }),
		body(func(m map[string]any) { m["probe_lease"] = -1 }),
		body(func(m map[string]any) { m["failure_statuses"] = []int{200} }),
		body(func(m map[string]any) { m["failure_statuses"] = make([]int, 101) }),
		body(func(m map[string]any) { m["min_calls"] = marker }),
	}
	for i, b := range bad {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			t.Parallel()
			prefix := testPrefix(t, c)
			key := prefix + "{caba/by_domain}:settings"
			got := make(chan breaker.Settings, 1)
			logger, log := newLog()
			st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, Logger: logger,
				OnSettings: func(_ breaker.ID, s breaker.Settings) { got <- s }})
			c.Set(ctx, key, b, 0)
			if s, ok, err := st.Breakers.SharedSettings(ctx, caba); ok || err != nil {
				t.Errorf("SharedSettings of %s = %+v, %v, %v; want none", b, s, ok, err)
			}
			checkLog(t, log, key, b)
			// The same, published by "another replica" (after the
			// subscription is up: a valid message goes through).
			deliver := func(settings string) bool {
				msg := `{"k":"caba","o":"by_domain","r":"other","s":` + settings + `}`
				if !json.Valid([]byte(msg)) {
					msg = `{"k":"caba","o":"by_domain","r":"other","s":"` + marker + `"}`
				}
				c.Publish(ctx, prefix+"events", msg)
				select {
				case <-got:
					return true
				case <-time.After(300 * time.Millisecond):
					return false
				}
			}
			for n := 0; !deliver(body(func(map[string]any) {})); n++ {
				if n == 20 {
					t.Fatal("valid settings published are not handed on")
				}
			}
			if deliver(b) {
				t.Errorf("settings %s handed on from a message", b)
			}
			checkLog(t, log, prefix+"events", b)
			if err := st.Breakers.ShareSettings(ctx, caba, valid); err != nil {
				t.Fatal(err)
			}
			if s, ok, err := st.Breakers.SharedSettings(ctx, caba); !ok || err != nil || !s.Equal(valid) {
				t.Errorf("SharedSettings after a share = %+v, %v, %v; want %+v", s, ok, err, valid)
			}
		})
	}
	t.Run("another type", func(t *testing.T) {
		prefix := testPrefix(t, c)
		key := prefix + "{caba/by_domain}:settings"
		logger, log := newLog()
		st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, Logger: logger})
		c.HSet(ctx, key, "window", marker)
		if _, ok, err := st.Breakers.SharedSettings(ctx, caba); ok || err != nil {
			t.Errorf("SharedSettings of a hash = %v, %v; want none", ok, err)
		}
		checkLog(t, log, key)
		if err := st.Breakers.ShareSettings(ctx, caba, valid); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := st.Breakers.SharedSettings(ctx, caba); !ok || err != nil {
			t.Errorf("SharedSettings after a share = %v, %v", ok, err)
		}
	})
}

// FuzzStoredValues plants one fuzzed value where the stores read one — a
// field of a breaker's hash (over a closed, open, half-open or forced-open
// breaker), a budget, a pause, an entry of the event log, shared settings
// — and then uses the stores, through the scripts that read it. Whatever
// the value: no error and no degradation; every state read is a known
// one; nothing is wedged (a day later an open breaker has let a probe
// through, a pause has ended, a budget has a token); a reset closes the
// breaker and leaves its hash readable; events and settings accepted are
// valid.
func FuzzStoredValues(f *testing.F) {
	fields := []string{"st", "since", "gen", "ver", "ou", "pu", "ot", "cf", "bp", "wi", "wc", "wf", "last", "b0", "b5", "x"}
	for _, seed := range []struct {
		target, field uint8
		value         string
	}{
		{0, 0, "open"}, {0, 0, marker}, {0, 16 + 4, "9007199254740991"}, {0, 32 + 5, "99999999999999"},
		{0, 4, "-1"}, {0, 16 + 1, "1e15"}, {0, 12, `["1","closed","open","r","1","1","1","1","1"]`},
		{0, 48 + 13, "1:2:3"}, {0, 9, "0"}, {0, 16 + 10, "18446744073709551616"},
		{1, 0, "nan"}, {1, 0, "1e308"}, {1, 0, "-1e308"},
		{2, 0, "4102444800000000"}, {2, 0, "007"},
		{3, 0, `{"time":"2026-03-14T09:00:00Z","breaker_key":"k","operation":"voucher","from":"open","to":"closed"}`},
		{3, 0, "\x00"},
		{4, 0, `{"window":1,"min_calls":1,"failure_ratio":1,"open_for":1}`},
		{5, 0, `{"time":"2026-03-14T09:00:00Z","breaker_key":"fz1","operation":"by_domain","from":"open","to":"closed"}`},
		{5, 1, "4102444800000000"}, {5, 1, "-5"},
		{6, 0, `{"reason":"429","until":4102444800000000}`}, {6, 0, "{\"reason\":\"\u001b[31m\",\"until\":1}"},
	} {
		f.Add(seed.target, seed.field, []byte(seed.value))
	}
	c := testClient(f)
	prefix := testPrefix(f, c)
	st := newStores(f, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
	settings := breakertest.Settings()
	lim := ratelimit.Settings{RPS: 10, Burst: 2}
	t0 := breakertest.NewClock().Now()
	ctx := context.Background()
	var n int
	f.Fuzz(func(t *testing.T, target, field uint8, value []byte) {
		n++
		id := breaker.ID{Key: fmt.Sprintf("fz%d", n), Operation: aggregator.ByDomain}
		now := t0
		switch target % 7 {
		case 0:
			key := prefix + "{" + id.Key + "/by_domain}:breaker"
			bs := st.Breakers
			// The state under the planted field.
			switch field / 16 % 4 {
			case 0, 1, 2:
				for i := range 3 + 7*min(int(field/16%4), 1) {
					p, _, err := bs.Allow(ctx, id, settings, now.Add(time.Duration(i)*time.Millisecond))
					if err != nil {
						break
					}
					if _, err := bs.Done(ctx, id, p, breaker.Failure, breaker.Report{}, settings, now); err != nil {
						t.Fatal(err)
					}
				}
				if field/16%4 == 2 { // half-open, its probe in flight
					now = now.Add(settings.OpenFor)
					_, _, _ = bs.Allow(ctx, id, settings, now)
				}
			case 3:
				if _, err := bs.ForceOpen(ctx, id, settings, now); err != nil {
					t.Fatal(err)
				}
			}
			c.HSet(ctx, key, fields[int(field)%len(fields)], value)
			status := func(at time.Time) breaker.State {
				s, _, err := bs.Status(ctx, id, settings, at)
				if err != nil {
					t.Fatalf("Status: %v", err)
				}
				switch s.State {
				case breaker.Closed, breaker.Open, breaker.HalfOpen, breaker.ForcedOpen:
				default:
					t.Fatalf("state %q", s.State)
				}
				if s.Last != nil {
					if _, err := json.Marshal(s.Last); err != nil {
						t.Errorf("last transition %+v does not encode: %v", s.Last, err)
					}
				}
				return s.State
			}
			status(now)
			if p, _, err := bs.Allow(ctx, id, settings, now); err == nil {
				if _, err := bs.Done(ctx, id, p, breaker.Failure, breaker.Report{}, settings, now); err != nil {
					t.Fatal(err)
				}
			}
			later := now.Add(25 * time.Hour)
			if status(later) != breaker.ForcedOpen {
				if _, _, err := bs.Allow(ctx, id, settings, later); err != nil {
					t.Errorf("a day later, still refused: %v", err)
				}
			}
			if _, err := bs.Reset(ctx, id, settings, later); err != nil {
				t.Fatal(err)
			}
			if got := status(later); got != breaker.Closed {
				t.Errorf("after a reset: %s", got)
			}
			if fields[int(field)%len(fields)] == "x" {
				// A field no script reads nor writes is harmless, and
				// left alone (finding it would cost an HGETALL per call).
				c.HDel(ctx, key, "x")
			}
			checkBreakerHash(t, c, key)
		case 1, 2:
			src := id.Key
			c.Set(ctx, prefix+"{ratelimit/"+src+"}:"+[]string{"tat", "pause"}[target%7-1], value, 0)
			if until, err := st.Limits.PausedUntil(ctx, src, now); err != nil ||
				until.After(now.Add(ratelimit.DefaultMaxPause+5*time.Minute)) {
				t.Errorf("PausedUntil = %v, %v", until, err)
			}
			if _, _, err := st.Limits.Reserve(ctx, src, lim, 0, now); err != nil {
				t.Fatal(err)
			}
			later := now.Add(time.Hour)
			if until, err := st.Limits.PausedUntil(ctx, src, later); err != nil || !until.IsZero() {
				t.Errorf("an hour later: paused until %v, %v", until, err)
			}
			if _, ok, err := st.Limits.Reserve(ctx, src, lim, 0, later); err != nil || !ok {
				t.Errorf("an hour later: no token (%v, %v)", ok, err)
			}
		case 3:
			key := prefix + "events:log"
			c.Del(ctx, key)
			c.RPush(ctx, key, value)
			for _, e := range append(st.Events.Latest(10), st.Events.Since(time.Time{})...) {
				if _, err := json.Marshal(e); err != nil || e.BreakerKey == "" || !e.Operation.Valid() {
					t.Errorf("event %+v served (%v)", e, err)
				}
			}
		case 4:
			c.Set(ctx, prefix+"{"+id.Key+"/by_domain}:settings", value, 0)
			s, ok, err := st.Breakers.SharedSettings(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if ok && (s.Window <= 0 || s.MinCalls < 1 || !(s.FailureRatio > 0 && s.FailureRatio <= 1) || s.OpenFor <= 0) {
				t.Errorf("settings %+v accepted", s)
			}
		case 5:
			// A breaker's history, or (field odd) when the histories began.
			if field%2 == 1 {
				c.Set(ctx, prefix+"events:history-began", value, 0)
				// The start is remembered a minute: a fresh log reads it.
				st2 := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout})
				if _, from := st2.Events.History(id, now); from.After(time.Now().Add(6 * time.Minute)) {
					t.Errorf("the histories began in the future: %v", from)
				}
				break
			}
			key := prefix + "events:history:{" + id.String() + "}"
			c.RPush(ctx, key, value)
			events, _ := st.Events.History(id, time.Time{})
			for _, e := range events {
				if _, err := json.Marshal(e); err != nil || e.BreakerKey != id.Key || e.Operation != id.Operation || e.Kind != "" {
					t.Errorf("history entry %+v served (%v)", e, err)
				}
			}
			segments := breaker.Timeline(events, breaker.Closed, now.Add(-breaker.HistoryFor), now)
			if _, err := json.Marshal(segments); err != nil {
				t.Errorf("segments %+v do not encode: %v", segments, err)
			}
		case 6:
			src := id.Key
			c.Set(ctx, prefix+"{ratelimit/"+src+"}:reason", value, 0)
			reason, err := st.Limits.PauseReason(ctx, src, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(reason) > 256 || !utf8.ValidString(reason) || strings.ContainsFunc(reason, unicode.IsControl) {
				t.Errorf("reason %q served", reason)
			}
		}
		if st.Degraded() {
			t.Fatal("the store degraded")
		}
	})
}

// TestUnreadableBreakerForgottenEverywhere: replicas that remember a
// breaker open (and skip its portal without asking Redis) forget it once
// its state is found unreadable and started afresh, by any replica: none
// goes on skipping a portal that the admin API shows closed.
func TestUnreadableBreakerForgottenEverywhere(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := breakertest.NewClock()
	s := breakertest.Settings()
	s.OpenFor = time.Hour
	rs := fleet(t, 2, clock.Now, s, redisstore.Options{})
	a, b := rs[0], rs[1]
	for range 10 {
		call(t, a.set, fail)
	}
	for _, r := range rs {
		if call(t, r.set, succeed) {
			t.Fatal("a call went through an open breaker")
		}
	}
	key := a.prefix + "{caba/by_domain}:breaker"
	a.client.Set(ctx, key, marker, 0)
	if got := state(t, b.set); got != breaker.Closed {
		t.Fatalf("state read by b = %s, want closed", got)
	}
	if !call(t, b.set, succeed) {
		t.Error("b, which read the state afresh, still refuses calls")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !call(t, a.set, succeed) {
		if time.Now().After(deadline) {
			t.Fatal("a still skips the portal, remembering the lost state")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestUnreadableHistory: a breaker's history that is not a list is an
// empty one, replaced at the next append; entries that are not that
// breaker's transitions are left out.
func TestUnreadableHistory(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	ctx := context.Background()
	now := breakertest.NewClock().Now()
	prefix := testPrefix(t, c)
	id := breaker.ID{Key: "caba", Operation: aggregator.ByDomain}
	key := prefix + "events:history:{caba/by_domain}"
	logger, log := newLog()
	st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, Logger: logger})

	c.HSet(ctx, key, "x", marker)
	began := prefix + "events:history-began"
	c.Set(ctx, began, marker, 0)
	if got, from := st.Events.History(id, time.Time{}); len(got) != 0 || time.Since(from) > time.Minute {
		t.Errorf("History of a hash = %+v from %v, want none, from now: the unreadable start rewritten", got, from)
	}
	checkLog(t, log, key)
	checkLog(t, log, began)
	if v, err := c.Get(ctx, began).Result(); err != nil || strings.Contains(v, marker) {
		t.Errorf("the start of the histories read back: %q, %v", v, err)
	}
	good := breaker.Event{Time: now, BreakerKey: id.Key, Operation: id.Operation, From: breaker.Closed, To: breaker.Open, Reason: "r"}
	st.Events.Append(good)
	if n, err := c.LLen(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("after Append: %d entries, %v; want the hash replaced by a list of one", n, err)
	}
	if ttl, err := c.PTTL(ctx, key).Result(); err != nil || ttl < breaker.HistoryFor || ttl > breaker.HistoryFor+2*time.Hour {
		t.Errorf("history expires in %v, %v; want a day and some margin after its last transition", ttl, err)
	}
	other, _ := json.Marshal(breaker.Event{Time: now, BreakerKey: "cordoba", Operation: id.Operation, From: breaker.Closed, To: breaker.Open})
	store, _ := json.Marshal(breaker.Event{Time: now, Kind: breaker.KindStore, From: redisstore.Shared, To: redisstore.Local})
	for _, b := range []string{marker + "\x00\xff", `{"time": 3}`, `null`, string(other), string(store)} {
		c.RPush(ctx, key, b)
	}
	got, _ := st.Events.History(id, time.Time{})
	if len(got) != 1 || got[0].Reason != good.Reason {
		t.Errorf("History = %+v, want only the breaker's own transition", got)
	}
	checkLog(t, log, key)
	if st.Degraded() {
		t.Error("garbage made the store degrade")
	}
}

// TestUnreadablePauseReason: why a source was paused is text the limiter
// wrote; anything else is no reason, and never reaches an answer or a log.
func TestUnreadablePauseReason(t *testing.T) {
	t.Parallel()
	c := testClient(t)
	ctx := context.Background()
	now := time.Now()
	for i, planted := range []string{
		marker,
		`{"reason": "` + marker + `\u0007", "until": 1}`,
		`{"reason": "` + strings.Repeat(marker, 100) + `", "until": ` + us(now.Add(time.Hour)) + `}`,
		`{"reason": 7}`,
	} {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			prefix := testPrefix(t, c)
			key := prefix + "{ratelimit/a}:reason"
			c.Set(ctx, key, planted, 0)
			logger, log := newLog()
			st := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, Logger: logger, MaxPause: time.Hour})
			if got, err := st.Limits.PauseReason(ctx, "a", now); err != nil || got != "" {
				t.Errorf("PauseReason = %q, %v; want none", got, err)
			}
			checkLog(t, log, key, planted)
			if err := st.Limits.SetPauseReason(ctx, "a", "429 from the portal", now.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			fresh := newStores(t, c, redisstore.Options{Prefix: prefix, Timeout: suiteTimeout, MaxPause: time.Hour})
			if got, err := fresh.Limits.PauseReason(ctx, "a", now); err != nil || got != "429 from the portal" {
				t.Errorf("PauseReason after SetPauseReason = %q, %v", got, err)
			}
			if got, _ := fresh.Limits.PauseReason(ctx, "a", now.Add(2*time.Minute)); got != "" {
				t.Errorf("PauseReason after the pause ended = %q, want none", got)
			}
		})
	}
}
