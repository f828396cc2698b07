package async

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/internal/untrusted"
)

// RedisStore keeps the work in Redis, shared by every replica and durable
// across restarts. Keys, under the prefix:
//
//	{async}:q:<qid>  hash: status, doc (the query, JSON)
//	{async}:q:due    sorted set of pending query ids by due time (ms)
//	{async}:d:<did>  a pending delivery (JSON)
//	{async}:d:due    sorted set of delivery ids by due time (ms)
//	{async}:dlq      hash: entry id → DLQ entry (JSON)
//	{async}:w:<wid>  set of the ids of watch wid's deliveries, pending or
//	                 in the DLQ (CancelWatch drops them)
//	pace:{<h>}       the release pace of a source or origin (hashed; redisPace)
//
// Every key that a script or a MULTI touches together with another shares
// the hash tag {async}, so that on a Redis Cluster they live in one slot
// (the queries, deliveries and DLQ of one deployment are few: one slot
// holds them). Pace keys are used one at a time.
//
// Keys hold only generated ids: a plate or a person id appears in values
// only (the query must be stored to be tried again).
//
// Redis contents are untrusted (SPEC 9): a value of another type, or one
// that does not decode into what this store writes (decode.go), is treated
// as absent and its key logged by name, never its contents. Listings skip
// it; a query or DLQ entry that cannot be read is ErrNotFound; work whose
// document cannot be read leaves the schedule, so that it is not picked up
// again. A write to a key that holds another type replaces it (it cannot
// hold anything of ours).
type RedisStore struct {
	c      redis.UniversalClient
	prefix string
	bad    *untrusted.Reporter
}

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a store on c whose keys all start with prefix
// (e.g. "aggregator:async:").
func NewRedisStore(c redis.UniversalClient, prefix string) *RedisStore {
	return &RedisStore{c: c, prefix: prefix}
}

// WithLogger makes s log, by key name, the values it finds unreadable, and
// returns s. Call it before s is used.
func (s *RedisStore) WithLogger(l *slog.Logger) *RedisStore {
	s.bad = untrusted.New(l)
	return s
}

// slot is the hash tag every key of the work shares (see RedisStore).
const slot = "{async}:"

func (s *RedisStore) query(id string) string    { return s.prefix + slot + "q:" + id }
func (s *RedisStore) delivery(id string) string { return s.prefix + slot + "d:" + id }
func (s *RedisStore) queryDue() string          { return s.prefix + slot + "q:due" }
func (s *RedisStore) deliverDue() string        { return s.prefix + slot + "d:due" }
func (s *RedisStore) dlq() string               { return s.prefix + slot + "dlq" }
func (s *RedisStore) watch(id string) string    { return s.prefix + slot + "w:" + id }

// farAhead is how far ahead of now a due time may be: work scheduled
// further (an absurd score) is claimed at once, to be looked at again.
const farAhead = 24 * time.Hour

// scriptPrelude is shared by the scripts: own(key, kind) deletes a key of
// another type than kind (it cannot hold a value of ours) and notes its
// name in dropped, which every script returns as its second reply element,
// for the caller to log.
const scriptPrelude = `
local dropped = {}
local function own(key, kind)
  local t = redis.call('TYPE', key)['ok']
  if t ~= kind and t ~= 'none' then
    redis.call('DEL', key)
    dropped[#dropped + 1] = key
  end
  return t == kind
end
`

// script is a script of the store: its body returns {result, dropped}.
func script(body string) *redis.Script { return redis.NewScript(scriptPrelude + body) }

// run runs sc, logs the keys it dropped, and returns its result.
func (s *RedisStore) run(ctx context.Context, sc *redis.Script, keys []string, args ...any) (any, error) {
	res, err := sc.Run(ctx, s.c, keys, args...).Slice()
	if err != nil {
		return nil, err
	}
	if len(res) > 1 {
		dropped, _ := res[1].([]any)
		for _, k := range dropped {
			if k, ok := k.(string); ok {
				s.bad.Unreadable(k, "", true)
			}
		}
	}
	if len(res) == 0 {
		return nil, nil
	}
	return res[0], nil
}

// runInt is run for a script whose result is an integer.
func (s *RedisStore) runInt(ctx context.Context, sc *redis.Script, keys []string, args ...any) (int64, error) {
	res, err := s.run(ctx, sc, keys, args...)
	n, _ := res.(int64)
	return n, err
}

// createQuery: KEYS q:{id}, q:due; ARGV doc, due ms, id.
var createQuery = script(`
own(KEYS[1], 'hash')
own(KEYS[2], 'zset')
redis.call('HSET', KEYS[1], 'status', 'pending', 'doc', ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return { 1, dropped }
`)

// CreateQuery implements Store.
func (s *RedisStore) CreateQuery(ctx context.Context, q *Query, due time.Time) error {
	doc, err := json.Marshal(q)
	if err != nil {
		return err
	}
	_, err = s.run(ctx, createQuery, []string{s.query(q.ID), s.queryDue()}, doc, due.UnixMilli(), q.ID)
	return err
}

// readQuery: KEYS q:{id}, q:due; ARGV id. Returns the document, or 0 when
// there is none, 1 when the key holds something else than a query; in
// both cases the id leaves the schedule (CreateQuery writes both at once,
// so a scheduled id without a document is not work of ours).
var readQuery = script(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'hash' then
  local doc = redis.call('HGET', KEYS[1], 'doc')
  if doc then return { doc, dropped } end
end
if redis.call('TYPE', KEYS[2])['ok'] == 'zset' then
  redis.call('ZREM', KEYS[2], ARGV[1])
end
if t == 'none' then return { 0, dropped } end
return { 1, dropped }
`)

// unschedule: KEYS due; ARGV ids. Takes ids off the schedule.
var unschedule = script(`
if own(KEYS[1], 'zset') then
  redis.call('ZREM', KEYS[1], unpack(ARGV))
end
return { 1, dropped }
`)

// Query implements Store. A query that cannot be read is ErrNotFound, and
// leaves the schedule.
func (s *RedisStore) Query(ctx context.Context, id string) (*Query, error) {
	key := s.query(id)
	res, err := s.run(ctx, readQuery, []string{key, s.queryDue()}, id)
	if err != nil {
		return nil, err
	}
	doc, ok := res.(string)
	if !ok {
		if n, _ := res.(int64); n == 1 {
			s.bad.Unreadable(key, "", false)
		}
		return nil, ErrNotFound
	}
	q, ok, traceDropped := decodeQuery([]byte(doc), id)
	if traceDropped {
		s.bad.Unreadable(key, "trace", false)
	}
	if !ok {
		s.bad.Unreadable(key, "", false)
		if _, err := s.run(ctx, unschedule, []string{s.queryDue()}, id); err != nil {
			return nil, err
		}
		return nil, ErrNotFound
	}
	return q, nil
}

// saveQuery: KEYS q:{id}, q:due; ARGV doc, due ms, id.
var saveQuery = script(`
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' or redis.call('HGET', KEYS[1], 'status') ~= 'pending' then
  return { 0, dropped }
end
own(KEYS[2], 'zset')
redis.call('HSET', KEYS[1], 'doc', ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return { 1, dropped }
`)

// SaveQuery implements Store.
func (s *RedisStore) SaveQuery(ctx context.Context, q *Query, due time.Time) (bool, error) {
	doc, err := json.Marshal(q)
	if err != nil {
		return false, err
	}
	n, err := s.runInt(ctx, saveQuery, []string{s.query(q.ID), s.queryDue()}, doc, due.UnixMilli(), q.ID)
	return n == 1, err
}

// finishQuery: KEYS q:{id}, q:due, d:{did}, d:due; ARGV status, doc,
// keep ms, qid, delivery, due ms, did.
var finishQuery = script(`
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' or redis.call('HGET', KEYS[1], 'status') ~= 'pending' then
  return { 0, dropped }
end
own(KEYS[2], 'zset')
own(KEYS[4], 'zset')
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'doc', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[4])
redis.call('SET', KEYS[3], ARGV[5])
redis.call('ZADD', KEYS[4], ARGV[6], ARGV[7])
return { 1, dropped }
`)

// FinishQuery implements Store.
func (s *RedisStore) FinishQuery(ctx context.Context, q *Query, d *Delivery, keep time.Duration) (bool, error) {
	doc, err := json.Marshal(q)
	if err != nil {
		return false, err
	}
	dd, err := json.Marshal(d)
	if err != nil {
		return false, err
	}
	n, err := s.runInt(ctx, finishQuery,
		[]string{s.query(q.ID), s.queryDue(), s.delivery(d.ID), s.deliverDue()},
		string(q.Status), doc, max(keep.Milliseconds(), 1), q.ID, dd, d.Due.UnixMilli(), d.ID)
	return n == 1, err
}

// claimDue: KEYS due; ARGV now ms, lease ms, max, far ms. Leases and
// returns the members due at now, earliest first, then, if room is left,
// any due after far (no work is scheduled that far ahead: such a score is
// garbage, and the work is looked at again now).
var claimDue = script(`
if not own(KEYS[1], 'zset') then return { {}, dropped } end
local max = tonumber(ARGV[3])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, max)
if #ids < max then
  local far = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[4], '+inf', 'LIMIT', 0, max - #ids)
  for _, id in ipairs(far) do ids[#ids + 1] = id end
end
local until_ = tonumber(ARGV[1]) + tonumber(ARGV[2])
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], until_, id) end
return { ids, dropped }
`)

// claim leases the due members of key, and takes off its schedule (with
// a log line) those that are not ids of prefix.
func (s *RedisStore) claim(ctx context.Context, key, prefix string, now time.Time, lease time.Duration, max int) ([]string, error) {
	res, err := s.run(ctx, claimDue, []string{key}, now.UnixMilli(), lease.Milliseconds(), max, now.Add(farAhead).UnixMilli())
	if err != nil {
		return nil, err
	}
	list, _ := res.([]any)
	ids := make([]string, 0, len(list))
	var bad []any
	for _, v := range list {
		id, _ := v.(string)
		if !validID(id, prefix) {
			bad = append(bad, id)
			continue
		}
		ids = append(ids, id)
	}
	if len(bad) > 0 {
		s.bad.Unreadable(key, "a member that is not an id", true)
		if _, err := s.run(ctx, unschedule, []string{key}, bad...); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// ClaimQueries implements Store.
func (s *RedisStore) ClaimQueries(ctx context.Context, now time.Time, lease time.Duration, max int) ([]string, error) {
	return s.claim(ctx, s.queryDue(), "q_", now, lease, max)
}

// readStrings: KEYS the keys to read. Returns, key by key, its string, 0
// when there is none, or 1 when it holds another type.
var readStrings = script(`
local out = {}
for i, k in ipairs(KEYS) do
  local t = redis.call('TYPE', k)['ok']
  if t == 'string' then
    out[i] = redis.call('GET', k)
  elseif t == 'none' then
    out[i] = 0
  else
    out[i] = 1
  end
end
return { out, dropped }
`)

// ClaimDeliveries implements Store. A claimed delivery that is gone
// (delivered by another replica) or cannot be read leaves the schedule.
func (s *RedisStore) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, max int) ([]*Delivery, error) {
	ids, err := s.claim(ctx, s.deliverDue(), "dlv_", now, lease, max)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.delivery(id)
	}
	res, err := s.run(ctx, readStrings, keys)
	if err != nil {
		return nil, err
	}
	vals, _ := res.([]any)
	out := make([]*Delivery, 0, len(ids))
	var gone []any
	for i, id := range ids {
		var v any
		if i < len(vals) {
			v = vals[i]
		}
		var d *Delivery
		ok := false
		switch v := v.(type) {
		case string:
			var traceDropped bool
			if d, ok, traceDropped = decodeDelivery([]byte(v), id); !ok {
				s.bad.Unreadable(keys[i], "", false)
			} else if traceDropped {
				s.bad.Unreadable(keys[i], "trace", false)
			}
		case int64:
			if v == 1 {
				s.bad.Unreadable(keys[i], "", false)
			}
		}
		if !ok {
			gone = append(gone, id)
			continue
		}
		out = append(out, d)
	}
	if len(gone) > 0 {
		if _, err := s.run(ctx, unschedule, []string{s.deliverDue()}, gone...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// saveDelivery: KEYS d:{id}, d:due[, w:{wid}]; ARGV delivery, due ms, id.
// With the watch's index, only a delivery it still holds is saved.
var saveDelivery = script(`
if KEYS[3] and (redis.call('TYPE', KEYS[3])['ok'] ~= 'set' or redis.call('SISMEMBER', KEYS[3], ARGV[3]) == 0) then
  return { 0, dropped }
end
own(KEYS[2], 'zset')
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return { 1, dropped }
`)

// deliveryKeys are the keys of d's scripts: its own, the schedule, and,
// for a watch's, the watch's index.
func (s *RedisStore) deliveryKeys(d *Delivery) []string {
	keys := []string{s.delivery(d.ID), s.deliverDue()}
	if d.WatchID != "" {
		keys = append(keys, s.watch(d.WatchID))
	}
	return keys
}

// SaveDelivery implements Store.
func (s *RedisStore) SaveDelivery(ctx context.Context, d *Delivery) error {
	dd, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = s.run(ctx, saveDelivery, s.deliveryKeys(d), dd, d.Due.UnixMilli(), d.ID)
	return err
}

// addDelivery: KEYS d:{id}, d:due[, w:{wid}]; ARGV delivery, due ms, id.
var addDelivery = script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return { 0, dropped } end
own(KEYS[2], 'zset')
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
if KEYS[3] then
  own(KEYS[3], 'set')
  redis.call('SADD', KEYS[3], ARGV[3])
end
return { 1, dropped }
`)

// AddDelivery implements Store.
func (s *RedisStore) AddDelivery(ctx context.Context, d *Delivery) (bool, error) {
	dd, err := json.Marshal(d)
	if err != nil {
		return false, err
	}
	n, err := s.runInt(ctx, addDelivery, s.deliveryKeys(d), dd, d.Due.UnixMilli(), d.ID)
	return n == 1, err
}

// deleteDelivery: KEYS d:{id}, d:due[, w:{wid}]; ARGV id.
var deleteDelivery = script(`
redis.call('DEL', KEYS[1])
if own(KEYS[2], 'zset') then redis.call('ZREM', KEYS[2], ARGV[1]) end
if KEYS[3] and own(KEYS[3], 'set') then redis.call('SREM', KEYS[3], ARGV[1]) end
return { 1, dropped }
`)

// DeleteDelivery implements Store.
func (s *RedisStore) DeleteDelivery(ctx context.Context, d *Delivery) error {
	_, err := s.run(ctx, deleteDelivery, s.deliveryKeys(d), d.ID)
	return err
}

// deadLetter: KEYS d:{id}, d:due, dlq[, w:{wid}]; ARGV id, entry id,
// entry. A watch's delivery that its index no longer holds was cancelled:
// nothing is written.
var deadLetter = script(`
if KEYS[4] and (redis.call('TYPE', KEYS[4])['ok'] ~= 'set' or redis.call('SISMEMBER', KEYS[4], ARGV[1]) == 0) then
  return { 0, dropped }
end
redis.call('DEL', KEYS[1])
if own(KEYS[2], 'zset') then redis.call('ZREM', KEYS[2], ARGV[1]) end
own(KEYS[3], 'hash')
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
return { 1, dropped }
`)

// DeadLetter implements Store.
func (s *RedisStore) DeadLetter(ctx context.Context, d *Delivery, e DLQEntry) error {
	rec, err := json.Marshal(e.record())
	if err != nil {
		return err
	}
	keys := []string{s.delivery(d.ID), s.deliverDue(), s.dlq()}
	if d.WatchID != "" {
		keys = append(keys, s.watch(d.WatchID))
	}
	_, err = s.run(ctx, deadLetter, keys, d.ID, e.ID, rec)
	return err
}

// cancelWatch: KEYS w:{wid}, d:due, dlq, d:{id}…; ARGV the ids of the
// d:{id} keys. Drops each delivery the index still holds, pending or in
// the DLQ, and returns how many it dropped.
var cancelWatch = script(`
if not own(KEYS[1], 'set') then return { 0, dropped } end
local due = own(KEYS[2], 'zset')
local dlq = own(KEYS[3], 'hash')
local n = 0
for i, id in ipairs(ARGV) do
  if redis.call('SREM', KEYS[1], id) == 1 then
    n = n + redis.call('DEL', KEYS[3 + i])
    if due then redis.call('ZREM', KEYS[2], id) end
    if dlq then n = n + redis.call('HDEL', KEYS[3], id) end
  end
end
return { n, dropped }
`)

// CancelWatch implements Store: it reads the watch's index, then drops
// what it names in one script (every key declared, as Cluster wants).
func (s *RedisStore) CancelWatch(ctx context.Context, id string) (int, error) {
	idx := s.watch(id)
	ids, err := s.c.SMembers(ctx, idx).Result()
	if err != nil {
		if isWrongType(err) {
			s.bad.Unreadable(idx, "", true)
			return 0, s.c.Del(ctx, idx).Err()
		}
		return 0, err
	}
	keys := []string{idx, s.deliverDue(), s.dlq()}
	args := make([]any, 0, len(ids))
	for _, did := range ids {
		if !validID(did, "dlv_") {
			s.c.SRem(ctx, idx, did)
			continue
		}
		keys = append(keys, s.delivery(did))
		args = append(args, did)
	}
	if len(args) == 0 {
		return 0, nil
	}
	n, err := s.runInt(ctx, cancelWatch, keys, args...)
	return int(n), err
}

// readDLQ: KEYS dlq. Returns the hash's fields and values, or 0 when the
// key holds another type.
var readDLQ = script(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return { {}, dropped } end
if t ~= 'hash' then return { 0, dropped } end
return { redis.call('HGETALL', KEYS[1]), dropped }
`)

// DLQ implements Store. Entries that cannot be read are left out.
func (s *RedisStore) DLQ(ctx context.Context) ([]DLQEntry, error) {
	res, err := s.run(ctx, readDLQ, []string{s.dlq()})
	if err != nil {
		return nil, err
	}
	all, ok := res.([]any)
	if !ok {
		s.bad.Unreadable(s.dlq(), "", false)
	}
	out := make([]DLQEntry, 0, len(all)/2)
	for i := 0; i+1 < len(all); i += 2 {
		id, _ := all[i].(string)
		v, _ := all[i+1].(string)
		e, ok, traceDropped := decodeDLQ([]byte(v), id)
		if !ok {
			s.bad.Unreadable(s.dlq(), fieldName(id, "dlv_"), false)
			continue
		}
		if traceDropped {
			s.bad.Unreadable(s.dlq(), fieldName(id, "dlv_")+" trace", false)
		}
		out = append(out, e)
	}
	sortDLQ(out)
	return out, nil
}

// isWrongType reports whether err is Redis's answer to a command on a key
// of another type.
func isWrongType(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "WRONGTYPE")
}

// fieldName names field f of a hash in a log line: "field <f>" when f
// has the shape of an id of prefix, else no more than "a field" (a name
// read from Redis is foreign input, and may hold anything).
func fieldName(f, prefix string) string {
	if validID(f, prefix) {
		return "field " + f
	}
	return "a field that is not an id"
}

// dlqLen: KEYS dlq.
var dlqLen = script(`
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return { 0, dropped } end
return { redis.call('HLEN', KEYS[1]), dropped }
`)

// DLQLen implements Store.
func (s *RedisStore) DLQLen(ctx context.Context) (int, error) {
	n, err := s.runInt(ctx, dlqLen, []string{s.dlq()})
	return int(n), err
}

// readField: KEYS a hash; ARGV field. Returns the value, 0 when there is
// none, or 1 when the key holds another type.
var readField = script(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return { 0, dropped } end
if t ~= 'hash' then return { 1, dropped } end
return { redis.call('HGET', KEYS[1], ARGV[1]) or 0, dropped }
`)

// redeliver: KEYS dlq, d:{did}, d:due[, w:{wid}]; ARGV entry id,
// delivery, due ms, did.
var redeliver = script(`
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' or redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then
  return { 0, dropped }
end
own(KEYS[3], 'zset')
redis.call('SET', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
if KEYS[4] then
  own(KEYS[4], 'set')
  redis.call('SADD', KEYS[4], ARGV[4])
end
return { 1, dropped }
`)

// Redeliver implements Store. An entry that cannot be read is ErrNotFound
// (and stays, for DeleteDLQ).
func (s *RedisStore) Redeliver(ctx context.Context, id string, fresh func(DLQEntry) *Delivery) error {
	res, err := s.run(ctx, readField, []string{s.dlq()}, id)
	if err != nil {
		return err
	}
	v, ok := res.(string)
	if !ok {
		if n, _ := res.(int64); n == 1 {
			s.bad.Unreadable(s.dlq(), "", false)
		}
		return ErrNotFound
	}
	e, ok, traceDropped := decodeDLQ([]byte(v), id)
	if !ok {
		s.bad.Unreadable(s.dlq(), fieldName(id, "dlv_"), false)
		return ErrNotFound
	}
	if traceDropped {
		s.bad.Unreadable(s.dlq(), fieldName(id, "dlv_")+" trace", false)
	}
	d := fresh(e)
	dd, err := json.Marshal(d)
	if err != nil {
		return err
	}
	keys := []string{s.dlq(), s.delivery(d.ID), s.deliverDue()}
	if d.WatchID != "" {
		keys = append(keys, s.watch(d.WatchID))
	}
	n, err := s.runInt(ctx, redeliver, keys, id, dd, d.Due.UnixMilli(), d.ID)
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// deleteDLQ: KEYS dlq; ARGV entry id.
var deleteDLQ = script(`
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' then return { 0, dropped } end
return { redis.call('HDEL', KEYS[1], ARGV[1]), dropped }
`)

// DeleteDLQ implements Store. It deletes an entry that cannot be read as
// well: that is how an operator gets rid of one.
func (s *RedisStore) DeleteDLQ(ctx context.Context, id string) error {
	n, err := s.runInt(ctx, deleteDLQ, []string{s.dlq()}, id)
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// firstDue: KEYS q:due, d:due. Returns, per key, the lowest score (a
// string), or 0 when there is none.
var firstDue = script(`
local out = {}
for i, k in ipairs(KEYS) do
  out[i] = 0
  if redis.call('TYPE', k)['ok'] == 'zset' then
    local z = redis.call('ZRANGE', k, 0, 0, 'WITHSCORES')
    if z[2] then out[i] = z[2] end
  end
end
return { out, dropped }
`)

// NextDue implements Store. A due time that is not a time (not finite, or
// outside what a Unix time in milliseconds can be) is no due time: the
// scheduler looks again within its poll interval anyway.
func (s *RedisStore) NextDue(ctx context.Context) (time.Time, bool, error) {
	res, err := s.run(ctx, firstDue, []string{s.queryDue(), s.deliverDue()})
	if err != nil {
		return time.Time{}, false, err
	}
	scores, _ := res.([]any)
	var next time.Time
	ok := false
	for _, v := range scores {
		str, _ := v.(string)
		f, err := strconv.ParseFloat(str, 64)
		if err != nil || math.IsNaN(f) || f < 0 || f >= 1<<53 {
			continue
		}
		at := time.UnixMilli(int64(f))
		if !ok || at.Before(next) {
			next, ok = at, true
		}
	}
	return next, ok, nil
}
