package ratelimit

import (
	"crypto/sha256"
	"crypto/subtle"
	"math"
	"net/http"
	"strconv"
	"time"
)

// Key is one entry of server.api_keys: a client's name, its secret and its
// budget. RPS 0 means no budget; Burst 0 with RPS > 0 means ceil(RPS).
type Key struct {
	Name  string
	Key   string
	RPS   float64
	Burst int
}

// Keys authenticates clients by API key and spends their budgets (SPEC 4.2,
// inbound). Budgets are per replica: they protect the replica that serves
// the request. Keys is safe for concurrent use.
type Keys struct {
	now     func() time.Time
	secrets []keySecret
	budgets map[string]*keyBudget // by name; read-only after NewKeys
}

type keySecret struct {
	name string
	sum  [sha256.Size]byte
}

type keyBudget struct {
	rps    float64 // 0 = unlimited
	burst  int
	window time.Duration
	bucket bucket
}

// NewKeys returns the Keys of keys, reading the time from now (time.Now
// when nil). Entries with an empty secret never match; when two entries
// share a name, the first one's budget is the name's.
func NewKeys(keys []Key, now func() time.Time) *Keys {
	if now == nil {
		now = time.Now
	}
	k := &Keys{now: now, budgets: make(map[string]*keyBudget, len(keys))}
	for _, key := range keys {
		if key.Key != "" {
			k.secrets = append(k.secrets, keySecret{name: key.Name, sum: sha256.Sum256([]byte(key.Key))})
		}
		if _, dup := k.budgets[key.Name]; dup {
			continue
		}
		s := Settings{RPS: key.RPS, Burst: key.Burst}.normalized()
		b := &keyBudget{rps: s.RPS, burst: s.Burst}
		if s.RPS > 0 {
			secs := max(math.Ceil(float64(s.Burst)/s.RPS), 1)
			b.window = time.Duration(min(secs, math.MaxInt64/float64(time.Second))) * time.Second
		}
		k.budgets[key.Name] = b
	}
	return k
}

// Lookup returns the name of the key whose secret is secret. It compares
// SHA-256 digests, so every comparison takes the same time whatever the
// secret's length or content, and it compares against every key, so the
// time taken does not say which key matched or how close a guess came.
func (k *Keys) Lookup(secret string) (name string, ok bool) {
	if secret == "" {
		return "", false
	}
	sum := sha256.Sum256([]byte(secret))
	found, index := 0, 0
	for i := range k.secrets {
		eq := subtle.ConstantTimeCompare(sum[:], k.secrets[i].sum[:])
		index = subtle.ConstantTimeSelect(eq&^found, i, index)
		found |= eq
	}
	if found == 0 {
		return "", false
	}
	return k.secrets[index].name, true
}

// Quota is the outcome of one request against a key's budget, and what to
// announce about it.
type Quota struct {
	// Allowed is false when the key's budget is spent.
	Allowed bool
	// Limit is the key's burst: the requests it may make at once (0 when
	// the key has no budget, and then nothing is announced).
	Limit int
	// Remaining is how many more requests may go now.
	Remaining int
	// Reset is how long until Remaining grows by one (0 when full).
	Reset time.Duration
	// Window is the time the budget takes to refill from empty: burst/rps
	// rounded up to whole seconds, at least one.
	Window time.Duration
	// RetryAfter is, when not Allowed, how long until a request may go.
	RetryAfter time.Duration
}

// Take spends one request of the key called name. An unknown name is never
// allowed; a key without a budget always is.
func (k *Keys) Take(name string) Quota {
	b, ok := k.budgets[name]
	if !ok {
		return Quota{}
	}
	if b.rps == 0 {
		return Quota{Allowed: true}
	}
	q := Quota{Limit: b.burst, Window: b.window}
	wait, ok, tokens := b.bucket.take(k.now(), b.rps, b.burst, 0)
	if !ok {
		q.RetryAfter, q.Reset = wait, wait
		return q
	}
	q.Allowed = true
	q.Remaining = int(max(math.Floor(tokens), 0))
	if tokens < float64(b.burst) {
		q.Reset = tokensDuration(1-(tokens-math.Floor(tokens)), b.rps)
	}
	return q
}

// SetHeaders announces q on h with the fields of the IETF httpapi draft,
// `RateLimit-Policy: "default";q=<burst>;w=<window seconds>` and
// `RateLimit: "default";r=<remaining>;t=<seconds until Remaining grows>`,
// plus `Retry-After` when q is not allowed. Durations are rounded up to
// whole seconds. A quota without a limit sets nothing.
func (q Quota) SetHeaders(h http.Header) {
	if q.Limit == 0 {
		return
	}
	h.Set("RateLimit-Policy", `"default";q=`+strconv.Itoa(q.Limit)+";w="+strconv.FormatInt(ceilSeconds(q.Window), 10))
	h.Set("RateLimit", `"default";r=`+strconv.Itoa(q.Remaining)+";t="+strconv.FormatInt(ceilSeconds(q.Reset), 10))
	if !q.Allowed {
		h.Set("Retry-After", strconv.FormatInt(max(ceilSeconds(q.RetryAfter), 1), 10))
	}
}

// ceilSeconds rounds d up to whole seconds; 0 for d <= 0.
func ceilSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
