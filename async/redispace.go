package async

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
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
// µs. Returns 0 when the call goes, else the reserved slot (µs). The same
// decisions as pacer.admit.
var admitPace = redis.NewScript(`
local now = tonumber(ARGV[1])
local slot = tonumber(ARGV[2])
local iv = tonumber(ARGV[3])
local st = redis.call('HMGET', KEYS[1], 'next', 'last')
local nxt, last = tonumber(st[1]), tonumber(st[2])
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
    return 0
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
  return 0
end
keep(nxt)
return s
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
	s, err := admitPace.Run(ctx, p.c, []string{p.key(key)},
		now.UnixMicro(), held, p.interval.Microseconds()).Int64()
	if err != nil {
		p.failed(err)
		return p.local.admit(key, slot, now)
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
	if err := p.c.HDel(ctx, p.key(key), "next").Err(); err != nil {
		p.failed(err)
	}
}

// prune implements pace: Redis keys expire on their own.
func (p *redisPace) prune(now time.Time) { p.local.prune(now) }

func (p *redisPace) failed(err error) {
	if p.onError != nil {
		p.onError(err)
	}
}
