package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/redistest"
	"github.com/multas/aggregator/memory"
)

// The remembered answers of SPEC 14, end to end: real portals counting
// their calls, the whole replica, and, for the shared store, a real Redis
// whose every key and value the tests read.

// The memory keys of the tests (32 bytes each, base64).
var (
	memKey      = base64.StdEncoding.EncodeToString([]byte("e2e memory key number one, 32 b."[:32]))
	memKeyOther = base64.StdEncoding.EncodeToString([]byte("e2e memory key number two, 32 b."[:32]))
)

// remembers is a source's remember block: fresh answers for a minute,
// stale ones for ten.
const remembers = "remember: {fresh: 1m, stale: 10m}"

// memStore is where a test's replicas remember: in the process, or in the
// test Redis under a prefix of the test's own.
type memStore struct {
	name        string
	url, prefix string // empty in the process
}

// memStores are both stores, for the tests that hold for each.
func memStores(t *testing.T) []memStore {
	t.Helper()
	url, prefix := fleetRedis(t)
	return []memStore{{name: "in-process"}, {name: "redis", url: url, prefix: prefix}}
}

// redisStore is the Redis store of a test that needs one.
func redisStore(t *testing.T) memStore {
	t.Helper()
	url, prefix := fleetRedis(t)
	return memStore{name: "redis", url: url, prefix: prefix}
}

// memYAML is the configuration of srcs remembering in st under key (and
// previous keys), with more top-level YAML lines in extra.
func memYAML(st memStore, key string, previous []string, extra string, srcs ...source) string {
	text := fleetYAML(st.url, st.prefix, srcs...)
	prev, _ := json.Marshal(previous)
	if previous == nil {
		prev = []byte("[]")
	}
	text += fmt.Sprintf("memory: {key: %q, previous_keys: %s, %s}\n", key, prev, extra)
	return text
}

// startMem starts one replica of memYAML.
func startMem(t *testing.T, st memStore, key string, previous []string, extra string, srcs ...source) *env {
	t.Helper()
	return replica(t, st.name, memYAML(st, key, previous, extra, srcs...))
}

// queryWith asks GET /v1/infractions?params with a Cache-Control header
// ("" for none).
func (e *env) queryWith(cacheControl, params string) answer {
	e.t.Helper()
	h := http.Header{}
	if cacheControl != "" {
		h.Set("Cache-Control", cacheControl)
	}
	a := e.queryHeader(h, params)
	if cc := a.header.Get("Cache-Control"); (a.status == 200 || a.status == 503) && cc != "no-store" {
		e.t.Errorf("query %s: Cache-Control %q, want no-store", params, cc)
	}
	return a
}

// lookups is a portal answering a plate's lookup with the infraction id
// plateID, and a person's with personID.
func lookups(plateID, personID string) http.Handler {
	m := http.NewServeMux()
	m.Handle("GET /actas", one(plateID))
	m.Handle("GET /personas/{kind}/{id}", one(personID))
	return m
}

// twoRemembering starts a replica of two sources, a and b, that remember
// in st, over portals answering h.
func twoRemembering(t *testing.T, st memStore, h http.Handler) (*env, *portal, *portal) {
	t.Helper()
	a, b := newPortal(t, h), newPortal(t, h)
	e := startMem(t, st, memKey, nil, "",
		source{id: "a", url: a.URL, extra: []string{remembers}},
		source{id: "b", url: b.URL, extra: []string{remembers}})
	return e, a, b
}

// forget sends DELETE /v1/admin/memory?params and returns the status.
func (e *env) forget(params string) (int, problemDoc) {
	e.t.Helper()
	resp, body := e.admin(http.MethodDelete, "/memory?"+params, "")
	var p problemDoc
	if resp.StatusCode != http.StatusNoContent {
		_ = json.Unmarshal(body, &p)
	}
	return resp.StatusCode, p
}

// calls lists the portals' call counts.
func calls(ps ...*portal) []int {
	out := make([]int, len(ps))
	for i, p := range ps {
		out[i] = p.calls()
	}
	return out
}

func sameInts(a, b []int) bool {
	return fmt.Sprint(a) == fmt.Sprint(b)
}

// checkRemembered checks that en came from memory: fresh (succeeded, no
// problem) or stale (its status and problem kept), with an as_of in
// [from, to].
func checkRemembered(t *testing.T, en sourceEntry, status, slug string, from, to time.Time) {
	t.Helper()
	checkEntry(t, en, status, slug)
	if en.Remembered == nil {
		t.Errorf("source %s: no remembered member, want one", en.Source)
		return
	}
	if at := en.Remembered.AsOf; at.Before(from.Add(-time.Second)) || at.After(to.Add(time.Second)) {
		t.Errorf("source %s: remembered.as_of %v, want within [%v, %v]", en.Source, at, from, to)
	}
}

func infractionIDs(in []infraction, source string) []string {
	var out []string
	for _, i := range in {
		if i.Source == source {
			out = append(out, i.ID)
		}
	}
	return out
}

// TestMemoryFreshSparesThePortal: a second identical query (the plate in
// another spelling, or the same person) reaches no portal of a source that
// remembers; its entries say so, and the spared calls are memory hits, not
// source calls.
func TestMemoryFreshSparesThePortal(t *testing.T) {
	t.Parallel()
	for _, st := range memStores(t) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			a, b, c := newPortal(t, lookups("A-1", "A-1-P")), newPortal(t, lookups("B-1", "B-1-P")), newPortal(t, lookups("C-1", "C-1-P"))
			e := startMem(t, st, memKey, nil, "",
				source{id: "a", url: a.URL, extra: []string{remembers}},
				source{id: "b", url: b.URL, extra: []string{"remember: {fresh: 1m}"}},
				source{id: "c", url: c.URL}) // does not remember
			before := time.Now()
			first := e.byDomain(plate)
			after := time.Now()
			if first.status != http.StatusOK || !first.result.Complete {
				t.Fatalf("first query: %d %+v", first.status, first.result)
			}
			for _, s := range []string{"a", "b", "c"} {
				if first.result.entry(t, s).Remembered != nil {
					t.Errorf("first query, %s: remembered, want from the portal", s)
				}
			}
			second := e.byDomain("ab-123 cd")
			if got := calls(a, b, c); !sameInts(got, []int{1, 1, 2}) {
				t.Errorf("portal calls after the second query: %v, want [1 1 2]", got)
			}
			if second.status != http.StatusOK || !second.result.Complete || second.result.Summary.Succeeded != 3 || second.result.Summary.Stale != 0 {
				t.Errorf("second query: %d %+v, want complete, 3 succeeded, none stale", second.status, second.result.Summary)
			}
			checkRemembered(t, second.result.entry(t, "a"), "succeeded", "", before, after)
			checkRemembered(t, second.result.entry(t, "b"), "succeeded", "", before, after)
			if second.result.entry(t, "c").Remembered != nil {
				t.Errorf("c does not remember, yet its entry is remembered")
			}
			for _, s := range []string{"a", "b"} {
				got, want := infractionIDs(second.result.Infractions, s), infractionIDs(first.result.Infractions, s)
				if fmt.Sprint(got) != fmt.Sprint(want) || len(got) != 1 {
					t.Errorf("%s: remembered infractions %v, want the portal's %v", s, got, want)
				}
				if n := second.result.entry(t, s).Count; n == nil || *n != 1 {
					t.Errorf("%s: count %v, want 1", s, n)
				}
			}
			for _, in := range second.result.Infractions {
				if in.Stale {
					t.Errorf("a fresh answer's infraction is stale: %+v", in)
				}
			}
			// A person too, and a CUIT is not its DNI.
			e.query("id=" + cuit)
			e.query("id=" + cuitDigits)
			if got := calls(a, b, c); !sameInts(got, []int{2, 2, 4}) {
				t.Errorf("portal calls after a person twice: %v, want [2 2 4]", got)
			}
			e.query("id=" + dni)
			if got := calls(a, b, c); !sameInts(got, []int{3, 3, 5}) {
				t.Errorf("portal calls after the DNI: %v, want [3 3 5]", got)
			}

			if v := e.metric(`aggregator_memory_hits_total{kind="fresh",source="a"}`); v != 2 {
				t.Errorf("fresh hits of a: %v, want 2", v)
			}
			if v := e.metric(`aggregator_memory_hits_total{kind="stale",source="a"}`); v != 0 {
				t.Errorf("stale hits of a: %v, want 0", v)
			}
			if v := e.metric(`aggregator_source_calls_total{operation="by_domain",outcome="succeeded",source="a"}`); v != 1 {
				t.Errorf("a's by_domain source calls: %v, want 1 (a remembered answer is no call)", v)
			}
			// The operators see the hit rates.
			_, body := e.admin(http.MethodGet, "/sources", "")
			var doc struct {
				Sources []struct {
					ID     string `json:"id"`
					Memory *struct {
						Fresh    int64    `json:"fresh"`
						Stale    int64    `json:"stale"`
						HitRatio *float64 `json:"hit_ratio"`
					} `json:"memory"`
				} `json:"sources"`
			}
			if err := json.Unmarshal(body, &doc); err != nil || len(doc.Sources) != 3 {
				t.Fatalf("GET /v1/admin/sources: %v %s", err, body)
			}
			if m := doc.Sources[0].Memory; m == nil || m.Fresh != 2 || m.HitRatio == nil || *m.HitRatio != 0.4 {
				t.Errorf("a's memory view: %+v, want 2 fresh, hit ratio 2/5", m)
			}
			if m := doc.Sources[2].Memory; m != nil {
				t.Errorf("c does not remember, yet has a memory view %+v", m)
			}
		})
	}
}

// TestMemoryCacheControl: the request's Cache-Control asks for less than
// the source's fresh: max-age bounds the age served, no-cache and max-age=0
// call every portal; a malformed directive is a 400 naming the header.
func TestMemoryCacheControl(t *testing.T) {
	t.Parallel()
	for _, st := range memStores(t) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			p := newPortal(t, one("A-1"))
			e := startMem(t, st, memKey, nil, "", source{id: "a", url: p.URL, extra: []string{remembers}})
			e.byDomain(plate) // remembered now
			time.Sleep(1200 * time.Millisecond)
			steps := []struct {
				cacheControl string
				calls        int // the portal's calls after the step
			}{
				{"max-age=1", 2}, // older than a second: called, and remembered again
				{"max-age=60", 2},
				{"", 2},
				{"no-cache", 3},
				{"max-age=0", 4},
				{"No-Cache, max-age=60", 5},
				{"no-store, private", 5}, // other directives are ignored
				{`max-age="30"`, 5},
			}
			for _, s := range steps {
				before := p.calls()
				a := e.queryWith(s.cacheControl, "domain="+plate)
				if a.status != http.StatusOK {
					t.Errorf("Cache-Control %q: status %d", s.cacheControl, a.status)
				}
				if got := p.calls(); got != s.calls {
					t.Errorf("Cache-Control %q: %d portal calls, want %d", s.cacheControl, got, s.calls)
				}
				if remembered := a.result.entry(t, "a").Remembered != nil; remembered != (p.calls() == before) {
					t.Errorf("Cache-Control %q: remembered %v, want it exactly when the portal was not called", s.cacheControl, remembered)
				}
			}
			for _, bad := range []string{"max-age=soon", "stale-if-error", "max-age=-1"} {
				a := e.queryWith(bad, "domain="+plate)
				if a.status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(paramNames(a.problem)), "Cache-Control") {
					t.Errorf("Cache-Control %q: got %d %v, want 400 naming Cache-Control", bad, a.status, paramNames(a.problem))
				}
				checkType(t, a.problem, "invalid-query")
			}
		})
	}
}

// TestMemoryStaleStandsIn: when a portal goes down, and only when the
// request allows it, its remembered answer stands in, marked: the entry
// keeps its status and problem and gains remembered, the infractions are
// stale, summary.stale counts it, complete stays false, and the answer is
// a 200 even when every portal is down.
func TestMemoryStaleStandsIn(t *testing.T) {
	t.Parallel()
	for _, st := range memStores(t) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			a, b := newPortal(t, one("A-1")), newPortal(t, one("B-1"))
			short := newPortal(t, one("S-1"))
			e := startMem(t, st, memKey, nil, "",
				source{id: "a", url: a.URL, extra: []string{"remember: {stale: 10m}"}}, // stale only
				source{id: "b", url: b.URL, extra: []string{remembers}},
				source{id: "short", url: short.URL, extra: []string{"remember: {stale: 1s}"}})
			before := time.Now()
			if got := e.byDomain(plate); got.status != http.StatusOK || !got.result.Complete {
				t.Fatalf("priming: %d %+v", got.status, got.result.Summary)
			}
			after := time.Now()
			if a.calls() != 1 {
				t.Fatalf("a: %d calls", a.calls())
			}
			// a does not serve fresh answers: stale ones only.
			e.byDomain(plate)
			if a.calls() != 2 || b.calls() != 1 {
				t.Errorf("calls %v, want a called again (stale only), b not", calls(a, b))
			}

			a.set(status(http.StatusServiceUnavailable))
			down := e.queryWith("stale-if-error=600", "domain="+plate+"&sources=a,b")
			if down.status != http.StatusOK || down.result.Complete || down.result.Summary.Stale != 1 || down.result.Summary.Succeeded != 1 {
				t.Errorf("a down, stale allowed: %d %+v, want 200, 1 succeeded, 1 stale, not complete", down.status, down.result.Summary)
			}
			checkRemembered(t, down.result.entry(t, "a"), "failed", "source-unavailable", before, time.Now())
			for _, in := range down.result.Infractions {
				if want := in.Source == "a"; in.Stale != want {
					t.Errorf("infraction %s of %s: stale %v, want %v", in.ID, in.Source, in.Stale, want)
				}
			}
			if ids := infractionIDs(down.result.Infractions, "a"); fmt.Sprint(ids) != "[A-1]" {
				t.Errorf("a's stood-in infractions: %v, want [A-1]", ids)
			}

			// Every portal down: still a 200, stood in for both.
			b.set(status(http.StatusServiceUnavailable))
			all := e.queryWith("no-cache, stale-if-error=600", "domain="+plate+"&sources=a,b")
			if all.status != http.StatusOK || all.result.Summary.Stale != 2 || all.result.Summary.Succeeded != 0 || all.result.Complete {
				t.Errorf("every portal down: %d %+v, want 200 with 2 stale", all.status, all.result.Summary)
			}
			checkRemembered(t, all.result.entry(t, "b"), "failed", "source-unavailable", before, after)
			if b.calls() != 2 {
				t.Errorf("no-cache with stale-if-error: b called %d times, want 2 (called, then stood in for)", b.calls())
			}
			// Without the directive nothing stands in: 503.
			none := e.queryWith("", "domain="+plate+"&sources=a")
			if none.status != http.StatusServiceUnavailable || none.entry(t, "a").Remembered != nil {
				t.Errorf("without stale-if-error: %d, want 503 with nothing remembered", none.status)
			}
			checkType(t, none.problem, "no-source-available")
			// A skipped source is stood in for too.
			e.forceOpen("a", "by_domain")
			skipped := e.queryWith("stale-if-error=600", "domain="+plate+"&sources=a")
			if skipped.status != http.StatusOK || skipped.result.Summary.Stale != 1 {
				t.Errorf("a skipped: %d %+v, want 200 with 1 stale", skipped.status, skipped.result.Summary)
			}
			checkRemembered(t, skipped.result.entry(t, "a"), "skipped", "circuit-open", before, after)

			// The bounds: the request's and the source's.
			time.Sleep(1200 * time.Millisecond)
			if got := e.queryWith("no-cache, stale-if-error=1", "domain="+plate+"&sources=b"); got.status != http.StatusServiceUnavailable {
				t.Errorf("stale-if-error=1 for an answer over a second old: %d, want 503", got.status)
			}
			short.set(status(http.StatusServiceUnavailable))
			if got := e.queryWith("stale-if-error=600", "domain="+plate+"&sources=short"); got.status != http.StatusServiceUnavailable {
				t.Errorf("beyond the source's remember.stale (1s): %d, want 503", got.status)
			}
			if v := e.metric(`aggregator_memory_hits_total{kind="stale",source="a"}`); v != 3 {
				t.Errorf("stale hits of a: %v, want 3", v)
			}
		})
	}
}

// plateSpellings are the spellings of the plate and of the person's ids a
// value could hold: upper and lower case, separators, digits only.
func plateSpellings() []string {
	out := []string{}
	for _, p := range []string{"AB123CD", "AB-123-CD", "AB 123 CD", "AB.123.CD", "AB_123_CD"} {
		out = append(out, p, strings.ToLower(p))
	}
	return append(out, cuit, cuitDigits, "20.31415926.9", "20 31415926 9", dni, "31.415.926",
		base64.StdEncoding.EncodeToString([]byte(plate)), base64.StdEncoding.EncodeToString([]byte(cuitDigits)))
}

// scanRedis returns every key under prefix with its contents, whatever
// their type.
func scanRedis(t *testing.T, c *redis.Client, prefix string) map[string][]string {
	t.Helper()
	ctx := context.Background()
	out := map[string][]string{}
	iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		var vals []string
		switch c.Type(ctx, k).Val() {
		case "string":
			vals = []string{c.Get(ctx, k).Val()}
		case "set":
			vals = c.SMembers(ctx, k).Val()
		case "list":
			vals = c.LRange(ctx, k, 0, -1).Val()
		case "hash":
			for f, v := range c.HGetAll(ctx, k).Val() {
				vals = append(vals, f, v)
			}
		case "zset":
			vals = c.ZRange(ctx, k, 0, -1).Val()
		case "stream":
			for _, m := range c.XRange(ctx, k, "-", "+").Val() {
				vals = append(vals, fmt.Sprint(m.Values))
			}
		}
		out[k] = vals
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMemoryNoPersonalDataInRedis remembers a plate and a person through
// every path (fresh, stale, an erasure of another subject), then reads every
// key and value in Redis: none holds the plate, the CUIT or the DNI in any
// spelling, and the memory's keys are there (the scan saw them).
func TestMemoryNoPersonalDataInRedis(t *testing.T) {
	t.Parallel()
	st := redisStore(t)
	e, _, b := twoRemembering(t, st, lookups("Q-1", "Q-2"))
	for _, q := range []string{"domain=ab-123-cd", "domain=" + plate, "id=" + cuit, "id=" + cuitDigits, "id=" + dni} {
		e.query(q)
	}
	b.set(status(http.StatusServiceUnavailable))
	e.queryWith("no-cache, stale-if-error=600", "domain="+plate)
	e.forget("domain=AC123DE")
	e.forget("source=b")

	c, _ := redistest.Connect(t)
	all := scanRedis(t, c, st.prefix)
	entries := 0
	for k, vals := range all {
		if strings.Contains(k, "{memory/") && strings.Contains(k, "}:e:") {
			entries++
		}
		for _, s := range plateSpellings() {
			if strings.Contains(strings.ToLower(k), strings.ToLower(s)) {
				t.Errorf("key %q holds %q", k, s)
			}
			for _, v := range vals {
				if strings.Contains(strings.ToLower(v), strings.ToLower(s)) {
					t.Errorf("the value of %q holds %q", k, s)
				}
			}
		}
	}
	if entries < 4 {
		t.Errorf("%d remembered entries in Redis, want at least 4 (a plate and two ids in two sources): %v", entries, keysOf(all))
	}
}

func keysOf(m map[string][]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestMemoryKeyChange: a replica with another memory.key finds the old
// entries absent (the portal is called, never a 500); one that has the old
// key among its previous_keys still opens them.
func TestMemoryKeyChange(t *testing.T) {
	t.Parallel()
	st := redisStore(t)
	p := newPortal(t, one("A-1"))
	src := source{id: "a", url: p.URL, extra: []string{remembers}}
	old := startMem(t, st, memKey, nil, "", src)
	old.byDomain(plate)

	rotated := startMem(t, st, memKeyOther, []string{memKey}, "", src)
	got := rotated.byDomain(plate)
	if got.status != http.StatusOK || p.calls() != 1 || got.result.entry(t, "a").Remembered == nil {
		t.Errorf("a previous key: %d, %d calls, remembered %v; want 200 from memory", got.status, p.calls(), got.result.entry(t, "a").Remembered)
	}
	other := startMem(t, st, memKeyOther, nil, "", src)
	got = other.queryWith("stale-if-error=600", "domain="+plate)
	if got.status != http.StatusOK || p.calls() != 2 || got.result.entry(t, "a").Remembered != nil {
		t.Errorf("another key: %d, %d calls; want 200 from the portal", got.status, p.calls())
	}
	// The stale path opens nothing either: 503, never a 500.
	p.set(status(http.StatusServiceUnavailable))
	third := startMem(t, st, base64.StdEncoding.EncodeToString(make([]byte, 32)), nil, "", src)
	if got := third.queryWith("stale-if-error=600", "domain="+plate); got.status != http.StatusServiceUnavailable {
		t.Errorf("a third key, the portal down: %d, want 503", got.status)
	}
}

// TestMemoryCorruptEntries plants what Redis might hold in place of the
// entries a replica wrote: every one is absent (the portal is called, and
// the answer is a 200), and the next lookup writes the entry again.
func TestMemoryCorruptEntries(t *testing.T) {
	t.Parallel()
	st := redisStore(t)
	c, _ := redistest.Connect(t)
	ctx := context.Background()
	a, b := newPortal(t, one("A-1")), newPortal(t, one("B-1"))
	text := memYAML(st, memKey, nil, "",
		source{id: "a", url: a.URL, extra: []string{remembers}},
		source{id: "b", url: b.URL, extra: []string{remembers}})
	e := replica(t, "replica", text)
	cfg, err := config.Parse([]byte(text), "e2e.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := memory.NewKeys([]byte("e2e memory key number one, 32 b."[:32]))
	entryKey := func(p, source string, i int) string {
		return st.prefix + "{memory/" + keys.Hash("domain:"+p) + "}:e:" + source + ":by_domain:" + app.Fingerprint(cfg.Sources[i]) + ":0"
	}
	tests := []struct {
		name    string
		corrupt func(p string) error
	}{
		{"a flipped byte", func(p string) error {
			v := []byte(c.Get(ctx, entryKey(p, "a", 0)).Val())
			v[len(v)/2] ^= 0x40
			return c.Set(ctx, entryKey(p, "a", 0), v, time.Minute).Err()
		}},
		{"truncated", func(p string) error {
			v := c.Get(ctx, entryKey(p, "a", 0)).Val()
			return c.Set(ctx, entryKey(p, "a", 0), v[:len(v)-20], time.Minute).Err()
		}},
		{"another type", func(p string) error {
			c.Del(ctx, entryKey(p, "a", 0))
			return c.RPush(ctx, entryKey(p, "a", 0), "x").Err()
		}},
		{"plain JSON", func(p string) error {
			return c.Set(ctx, entryKey(p, "a", 0), `{"as_of":"2026-03-14T09:00:00Z","infractions":[{"source":"a","jurisdiction":"x","id":"FAKE","status":"unpaid"}]}`, time.Minute).Err()
		}},
		{"moved from another source", func(p string) error {
			return c.Set(ctx, entryKey(p, "a", 0), c.Get(ctx, entryKey(p, "b", 1)).Val(), time.Minute).Err()
		}},
		{"moved from another subject", func(p string) error {
			e.byDomain(plateN(999))
			return c.Set(ctx, entryKey(p, "a", 0), c.Get(ctx, entryKey(plateN(999), "a", 0)).Val(), time.Minute).Err()
		}},
		{"empty", func(p string) error { return c.Set(ctx, entryKey(p, "a", 0), "", time.Minute).Err() }},
	}
	for i, tt := range tests {
		p := plateN(i)
		e.byDomain(p)
		if c.Exists(ctx, entryKey(p, "a", 0)).Val() != 1 {
			t.Fatalf("%s: no entry at %s", tt.name, entryKey(p, "a", 0))
		}
		if err := tt.corrupt(p); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		before := a.calls()
		got := e.queryWith("stale-if-error=600", "domain="+p)
		if got.status != http.StatusOK || a.calls() != before+1 || got.result.entry(t, "a").Remembered != nil {
			t.Errorf("%s: %d, a called %d more times, remembered %v; want 200 from the portal",
				tt.name, got.status, a.calls()-before, got.result.entry(t, "a").Remembered)
		}
		for _, in := range got.result.Infractions {
			if in.ID == "FAKE" {
				t.Errorf("%s: a planted infraction was served", tt.name)
			}
		}
		if got := e.byDomain(p); got.result.entry(t, "a").Remembered == nil || a.calls() != before+1 {
			t.Errorf("%s: the entry was not written again", tt.name)
		}
	}
	if e.app.StoreDegraded() {
		t.Errorf("corrupt entries degraded the store")
	}
}

// TestMemoryForget: DELETE /v1/admin/memory forgets a subject in every
// source (a person under each of their ids), and a lookup in flight during
// the erasure does not write it back; ?source= forgets one source's
// answers; bad requests are 400, an unknown source 404.
func TestMemoryForget(t *testing.T) {
	t.Parallel()
	for _, st := range memStores(t) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			mux := lookups("Q-1", "Q-2")
			e, a, b := twoRemembering(t, st, mux)
			e.byDomain(plate)
			e.byDomain(plateN(1))
			e.query("id=" + cuit)
			if got := calls(a, b); !sameInts(got, []int{3, 3}) {
				t.Fatalf("priming: %v", got)
			}

			if code, p := e.forget("domain=ab-123-cd"); code != http.StatusNoContent {
				t.Fatalf("DELETE ?domain=: %d %+v, want 204", code, p)
			}
			a.set(status(http.StatusServiceUnavailable))
			b.set(status(http.StatusServiceUnavailable))
			if got := e.queryWith("stale-if-error=600", "domain="+plate); got.status != http.StatusServiceUnavailable {
				t.Errorf("a forgotten subject stood in: %d, want 503", got.status)
			}
			if got := e.byDomain(plateN(1)); got.status != http.StatusOK || got.result.Summary.Succeeded != 2 {
				t.Errorf("another subject after the erasure: %d %+v, want it still remembered", got.status, got.result.Summary)
			}
			// A person is forgotten under the DNI inside their CUIT.
			if code, _ := e.forget("id=" + dni); code != http.StatusNoContent {
				t.Errorf("DELETE ?id=: %d, want 204", code)
			}
			if got := e.queryWith("stale-if-error=600", "id="+cuit); got.status != http.StatusServiceUnavailable {
				t.Errorf("a person forgotten by DNI stood in under their CUIT: %d, want 503", got.status)
			}

			// A lookup in flight during the erasure does not write back.
			gate := make(chan struct{})
			a.set(a.gated(gate, one("Q-9")))
			b.set(one("Q-9"))
			p := plateN(2)
			before := a.calls()
			var wg sync.WaitGroup
			wg.Add(1)
			var inFlight answer
			go func() {
				defer wg.Done()
				inFlight = e.byDomain(p, "timeout=5s")
			}()
			eventually(t, 3*time.Second, "the lookup reaching the portal", func() bool { return a.calls() > before })
			if code, _ := e.forget("domain=" + p); code != http.StatusNoContent {
				t.Errorf("DELETE during a lookup: %d", code)
			}
			close(gate)
			wg.Wait()
			if inFlight.status != http.StatusOK || inFlight.result.Summary.Succeeded != 2 {
				t.Errorf("the lookup in flight: %d %+v, want its own answer", inFlight.status, inFlight.result.Summary)
			}
			a.set(status(http.StatusServiceUnavailable))
			b.set(status(http.StatusServiceUnavailable))
			if got := e.queryWith("stale-if-error=600", "domain="+p); got.status != http.StatusServiceUnavailable {
				t.Errorf("the subject came back through a lookup in flight: %d %+v, want 503", got.status, got.entries())
			}

			// ?source= forgets what one source remembered.
			a.set(mux)
			b.set(mux)
			p = plateN(3)
			e.byDomain(p)
			if code, _ := e.forget("source=a"); code != http.StatusNoContent {
				t.Errorf("DELETE ?source=a: %d, want 204", code)
			}
			before, beforeB := a.calls(), b.calls()
			got := e.byDomain(p)
			if a.calls() != before+1 || b.calls() != beforeB || got.result.entry(t, "b").Remembered == nil {
				t.Errorf("after forgetting a: a called %d more, b %d more; want a only", a.calls()-before, b.calls()-beforeB)
			}

			for _, bad := range []struct {
				params string
				status int
				slug   string
			}{
				{"", 400, "invalid-query"},
				{"domain=" + plate + "&id=" + cuit, 400, "invalid-query"},
				{"domain=nonsense", 400, "invalid-query"},
				{"id=" + badCUIT, 400, "invalid-query"},
				{"source=a&domain=" + plate, 400, "invalid-query"},
				{"source=", 400, "invalid-query"},
				{"source=nope", 404, "not-found"},
			} {
				code, p := e.forget(bad.params)
				if code != bad.status {
					t.Errorf("DELETE ?%s: %d, want %d", bad.params, code, bad.status)
				}
				checkType(t, p, bad.slug)
			}
			resp, _ := e.do(http.MethodDelete, "/v1/admin/memory?domain="+plate, nil, "")
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("DELETE without the admin token: %d, want 401", resp.StatusCode)
			}
		})
	}
}

// TestMemorySharedByReplicas: replicas on one Redis share what they
// remember, and forget it for each other.
func TestMemorySharedByReplicas(t *testing.T) {
	t.Parallel()
	st := redisStore(t)
	p := newPortal(t, one("A-1"))
	text := memYAML(st, memKey, nil, "", source{id: "a", url: p.URL, extra: []string{remembers}})
	rs := fleet(t, 2, text)
	rs[0].byDomain(plate)
	if got := rs[1].byDomain(plate); p.calls() != 1 || got.result.entry(t, "a").Remembered == nil {
		t.Errorf("the other replica called the portal (%d calls), want the remembered answer", p.calls())
	}
	rs[1].forget("domain=" + plate)
	if rs[0].byDomain(plate); p.calls() != 2 {
		t.Errorf("forgotten through one replica, remembered by the other (%d calls)", p.calls())
	}
	rs[1].byDomain(plate) // remembered by both
	rs[1].forget("source=a")
	eventually(t, 3*time.Second, "the other replica forgetting the source", func() bool {
		before := p.calls()
		rs[0].byDomain(plate)
		return p.calls() > before
	})
}

// TestMemoryBounds: the in-process memory keeps at most max_entries, the
// least recently used going first, and an answer larger than
// max_entry_bytes is not remembered.
func TestMemoryBounds(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("A-1"))
	var many []acta
	for i := range 20 {
		many = append(many, acta{"nro": fmt.Sprintf("B-%04d", i), "fecha": "2026-03-14 09:12", "monto": 1000, "estado": "IMPAGA", "detalle": strings.Repeat("x", 40)})
	}
	big := newPortal(t, actas(many...))
	e := startMem(t, memStore{name: "in-process"}, memKey, nil, "max_entries: 2, max_entry_bytes: 1024",
		source{id: "a", url: p.URL, extra: []string{remembers}},
		source{id: "big", url: big.URL, extra: []string{remembers}})
	e.byDomain(plateN(1), "sources=a")
	e.byDomain(plateN(2), "sources=a")
	e.byDomain(plateN(1), "sources=a") // plateN(1) used: plateN(2) is the least recent
	e.byDomain(plateN(3), "sources=a")
	if p.calls() != 3 {
		t.Fatalf("%d calls, want 3", p.calls())
	}
	if v := e.metric("aggregator_memory_entries"); v != 2 {
		t.Errorf("aggregator_memory_entries = %v, want 2", v)
	}
	e.byDomain(plateN(1), "sources=a")
	e.byDomain(plateN(3), "sources=a")
	if p.calls() != 3 {
		t.Errorf("%d calls, want 3: the two most recent are remembered", p.calls())
	}
	e.byDomain(plateN(2), "sources=a")
	if p.calls() != 4 {
		t.Errorf("%d calls, want 4: the least recently used was dropped", p.calls())
	}
	e.byDomain(plate, "sources=big")
	e.byDomain(plate, "sources=big")
	if big.calls() != 2 {
		t.Errorf("an answer over max_entry_bytes: %d calls, want 2 (not remembered)", big.calls())
	}
}

// TestMemoryCoalesced: identical queries in flight together still make one
// portal call when the source remembers.
func TestMemoryCoalesced(t *testing.T) {
	t.Parallel()
	for _, st := range memStores(t) {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			gate := make(chan struct{})
			p := newPortal(t, nil)
			p.set(p.gated(gate, one("A-1")))
			e := startMem(t, st, memKey, nil, "", source{id: "a", url: p.URL, extra: []string{remembers}})
			var wg sync.WaitGroup
			answers := make([]answer, 4)
			for i := range answers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					answers[i] = e.byDomain(plate, "timeout=5s")
				}()
			}
			eventually(t, 3*time.Second, "a call reaching the portal", func() bool { return p.calls() > 0 })
			time.Sleep(100 * time.Millisecond) // the others join it
			close(gate)
			wg.Wait()
			if p.calls() != 1 {
				t.Errorf("%d portal calls for 4 identical queries in flight, want 1", p.calls())
			}
			for i, a := range answers {
				if a.status != http.StatusOK {
					t.Errorf("query %d: %d", i, a.status)
				}
			}
		})
	}
}

// TestMemoryAsync: an asynchronous query follows its request's
// Cache-Control on its first run, and its retained sources never read
// memory: a stale answer that stood in on the first run stays until the
// source succeeds, and that success is remembered.
func TestMemoryAsync(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("A-1"))
	recv := newHookReceiver(t, 0)
	text := configYAML(adminToken, source{id: "a", url: p.URL, extra: []string{remembers}}) +
		asyncBlock("max_wait: 1m, release_rps: 5", "allow_private: true, backoff: 100ms") +
		fmt.Sprintf("memory: {key: %q}\n", memKey)
	cfg, err := config.Parse([]byte(text), "e2e.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	e := startAsync(t, cfg, app.Options{})
	e.byDomain(plate)
	post := func(cacheControl string) asyncQuery {
		t.Helper()
		h := http.Header{"Content-Type": {"application/json"}}
		if cacheControl != "" {
			h.Set("Cache-Control", cacheControl)
		}
		resp, raw := e.do(http.MethodPost, "/v1/queries", h, fmt.Sprintf(`{"domain": %q, "callback_url": %q}`, plate, recv.URL))
		var q asyncQuery
		if resp.StatusCode != http.StatusAccepted || json.Unmarshal(raw, &q) != nil {
			t.Fatalf("POST /v1/queries: %d %s", resp.StatusCode, raw)
		}
		return q
	}
	if q := post(""); q.Status != "completed" || p.calls() != 1 || q.Result.entry(t, "a").Remembered == nil {
		t.Errorf("a remembered source: %s, %d calls; want completed from memory", q.Status, p.calls())
	}
	if q := post("no-cache"); q.Status != "completed" || p.calls() != 2 || q.Result.entry(t, "a").Remembered != nil {
		t.Errorf("no-cache: %s, %d calls; want completed from the portal", q.Status, p.calls())
	}
	p.set(status(http.StatusServiceUnavailable))
	q := post("no-cache, stale-if-error=600")
	if q.Status != "pending" || q.Result.Summary.Stale != 1 || q.Result.entry(t, "a").Remembered == nil {
		t.Fatalf("a down, stale allowed: %s %+v, want pending with a stale stand-in", q.Status, q.Result.Summary)
	}
	if ids := infractionIDs(q.Result.Infractions, "a"); fmt.Sprint(ids) != "[A-1]" || !q.Result.Infractions[0].Stale {
		t.Errorf("the stood-in infractions: %+v", q.Result.Infractions)
	}
	// Retries fail: the stand-in stays. Then the portal comes back with
	// another answer: the query completes with it, and it is remembered.
	eventually(t, 5*time.Second, "a retry", func() bool { return p.calls() >= 4 })
	if got := e.getQuery(q.ID); got.Status != "pending" || got.Result.Summary.Stale != 1 {
		t.Errorf("after failed retries: %s %+v, want the stand-in kept", got.Status, got.Result.Summary)
	}
	p.set(one("A-2"))
	eventually(t, 10*time.Second, "the query completing", func() bool { return e.getQuery(q.ID).Status == "completed" })
	got := e.getQuery(q.ID)
	if got.Result.Summary.Stale != 0 || got.Result.entry(t, "a").Remembered != nil || fmt.Sprint(infractionIDs(got.Result.Infractions, "a")) != "[A-2]" {
		t.Errorf("completed: %+v %+v, want the portal's new answer", got.Result.Summary, got.Result.Infractions)
	}
	before := p.calls()
	if got := e.byDomain(plate); p.calls() != before || fmt.Sprint(infractionIDs(got.result.Infractions, "a")) != "[A-2]" {
		t.Errorf("the retained source's success was not remembered")
	}
}
