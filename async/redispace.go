package async

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/internal/untrusted"
)

// redisPace is the pacer shared by every replica on one Redis (SPEC 3.4:
// released work goes out at no more than async.release_rps per portal or
// origin, whatever the number of replicas). Each key is a hash under the
// prefix,
//
//	pace:{<hash of the key>}   next: the first free slot, last: when the
//	                           last call went (unix µs)
//
// updated by one script, so that the slots granted across the fleet keep
// the spacing of a single pacer. The key is hashed: it holds a source id
// or a callback origin, never a plate or a person id, and stays short.
// Keys expire a minute after their last reserved slot.
//
// Pacing never holds delivery back on Redis's account: when Redis fails,
// the call is paced by this replica's own pacer instead.
//
// Slots are times of the replicas' clocks: a skew between replicas narrows
// or widens the spacing by as much.
type redisPace struct {
	c        redis.UniversalClient
	prefix   string
	interval time.Duration
	timeout  time.Duration
	local    *pacer
	// onError hears of every Redis error (the call was paced locally).
	onError func(error)
	// bad hears of the keys found unreadable (and deleted).
	bad *untrusted.Reporter
}

func newRedisPace(c redis.UniversalClient, prefix string, rps float64) *redisPace {
	l := newPacer(rps)
	return &redisPace{c: c, prefix: prefix, interval: l.interval, timeout: 500 * time.Millisecond, local: l}
}

func (p *redisPace) key(k string) string {
	h := sha256.Sum256([]byte(k))
	return p.prefix + "pace:{" + hex.EncodeToString(h[:16]) + "}"
}

// admitPace: KEYS pace key; ARGV now µs, slot µs ("" for none), interval
// µs. Returns {0, garbage} when the call goes, else {the reserved slot
// (µs), garbage}. The same decisions as pacer.admit. The key is garbage
// (deleted, and 1 returned) when it holds another type or times this
// script does not write: not integers, a last call ahead of now by more
// than clocks disagree, a next slot further ahead than a day (a slot that
// far would hold released work back for as long).
var admitPace = redis.NewScript(`
local now = tonumber(ARGV[1])
local slot = tonumber(ARGV[2])
local iv = tonumber(ARGV[3])
local garbage = 0
local kind = redis.call('TYPE', KEYS[1])['ok']
local st = { false, false }
if kind == 'hash' then
  st = redis.call('HMGET', KEYS[1], 'next', 'last')
elseif kind ~= 'none' then
  garbage = 1
end
local function time(v, limit)
  if not v then return nil end
  local n = nil
  if string.match(v, '^%-?%d+$') then n = tonumber(v) end
  if n == nil or n > limit or n < 0 then
    garbage = 1
    return nil
  end
  return n
end
local nxt, last = time(st[1], now + 86400000000), time(st[2], now + 300000000)
if garbage == 1 then
  redis.call('DEL', KEYS[1])
  nxt, last = nil, nil
end
local function keep(until_)
  local ttl = math.ceil((math.max(until_, now) - now) / 1000) + 60000
  redis.call('PEXPIRE', KEYS[1], ttl)
end
local earliest = now
if last and last + iv > earliest then earliest = last + iv end
if slot then
  if now < slot then return slot end
  if earliest <= now then
    redis.call('HSET', KEYS[1], 'last', string.format('%.0f', now))
    keep(nxt or now)
    return { 0, garbage }
  end
  -- A slot honoured too late to keep the spacing: take a new one.
end
local s = earliest
if nxt and nxt > s then s = nxt end
nxt = s + iv
redis.call('HSET', KEYS[1], 'next', string.format('%.0f', nxt))
if s <= now then
  redis.call('HSET', KEYS[1], 'last', string.format('%.0f', now))
  keep(nxt)
  return { 0, garbage }
end
keep(nxt)
return { s, garbage }
`)

// resetPace: KEYS pace key. Forgets the reserved slots; a key of another
// type is deleted (returns 1).
var resetPace = redis.NewScript(`
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'hash' then
  redis.call('HDEL', KEYS[1], 'next')
elseif kind ~= 'none' then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
`)

// admit implements pace.
func (p *redisPace) admit(key string, slot *time.Time, now time.Time) time.Duration {
	if p.interval <= 0 {
		*slot = time.Time{}
		return 0
	}
	if !slot.IsZero() && now.Before(*slot) {
		return slot.Sub(now) // nothing to ask yet
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	held := ""
	if !slot.IsZero() {
		held = strconv.FormatInt(slot.UnixMicro(), 10)
	}
	k := p.key(key)
	res, err := admitPace.Run(ctx, p.c, []string{k},
		now.UnixMicro(), held, p.interval.Microseconds()).Int64Slice()
	if err == nil && len(res) != 2 {
		err = fmt.Errorf("pace script: %d values in its answer, want 2", len(res))
	}
	if err != nil {
		p.failed(err)
		return p.local.admit(key, slot, now)
	}
	s := res[0]
	if res[1] == 1 {
		p.bad.Unreadable(k, "", true)
	}
	if s == 0 {
		*slot = time.Time{}
		return 0
	}
	*slot = time.UnixMicro(s)
	return max(slot.Sub(now), time.Nanosecond) // s is after now in µs
}

// reset implements pace: the reserved slots are forgotten, not when the
// last call went, so the spacing holds across a reset.
func (p *redisPace) reset(key string) {
	p.local.reset(key)
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	k := p.key(key)
	n, err := resetPace.Run(ctx, p.c, []string{k}).Int()
	if err != nil {
		p.failed(err)
	}
	if n == 1 {
		p.bad.Unreadable(k, "", true)
	}
}

// prune implements pace: Redis keys expire on their own.
func (p *redisPace) prune(now time.Time) { p.local.prune(now) }

func (p *redisPace) failed(err error) {
	if p.onError != nil {
		p.onError(err)
	}
}
