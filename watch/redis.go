package watch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/internal/untrusted"
)

// RedisStore keeps the watches in Redis, shared by every replica. Keys,
// under the prefix, all in the one hash slot {watches} (so that on a Redis
// Cluster every script's keys live together, as async work does in
// {async}):
//
//	{watches}:w:<id>     hash: doc (the watch, JSON), subject (sealed),
//	                     held, known, out (sealed, when present), ver (the
//	                     version of known), token (the last claim's),
//	                     owner (the key's name), shash (the subject's HMAC)
//	{watches}:due        sorted set of watch ids by due time (ms): the next
//	                     check, a retained source's next try, or the end of
//	                     a claim's lease
//	{watches}:k:<h>      sorted set (all scores 0) of the ids of one owner,
//	                     h a hash of the owner's name: listing by id, and
//	                     the count max_per_key bounds
//	{watches}:s:<hmac>   set of the ids of one subject's watches (erasure)
//
// Due watches are found by time (ZRANGEBYSCORE), never by scanning the
// watches. Keys hold generated ids and hashes only; a plate or a person's
// id is only ever in a sealed value.
//
// Redis contents are untrusted (SPEC 9): a watch whose fields are not what
// this store writes is treated as absent and logged by key name, never its
// contents. A claim takes it off the schedule; listings skip it; Get is
// ErrNotFound. A key of another type is replaced or ignored, never a
// reason to fail.
type RedisStore struct {
	c      redis.UniversalClient
	prefix string
	bad    *untrusted.Reporter
}

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a store on c whose keys all start with prefix
// (e.g. "aggregator:watches:").
func NewRedisStore(c redis.UniversalClient, prefix string) *RedisStore {
	return &RedisStore{c: c, prefix: prefix}
}

// WithLogger makes s log, by key name, the values it finds unreadable, and
// returns s. Call it before s is used.
func (s *RedisStore) WithLogger(l *slog.Logger) *RedisStore {
	s.bad = untrusted.New(l)
	return s
}

const slot = "{watches}:"

func (s *RedisStore) watch(id string) string { return s.prefix + slot + "w:" + id }
func (s *RedisStore) due() string            { return s.prefix + slot + "due" }
func (s *RedisStore) owner(name string) string {
	h := sha256.Sum256([]byte(name))
	return s.prefix + slot + "k:" + hex.EncodeToString(h[:16])
}
func (s *RedisStore) subject(hash string) string { return s.prefix + slot + "s:" + hash }

// prelude is shared by the scripts: own(key, kind) deletes a key of
// another type than kind (it cannot hold a value of ours) and reports
// whether it holds one of kind.
const prelude = `
local function own(key, kind)
  local t = redis.call('TYPE', key)['ok']
  if t ~= kind and t ~= 'none' then redis.call('DEL', key) end
  return t == kind
end
`

func script(body string) *redis.Script { return redis.NewScript(prelude + body) }

// create: KEYS w, due, k, s; ARGV doc, subject, owner, shash, due ms, id,
// max. Returns 1, 0 at the owner's limit, -1 when the id is taken.
var createScript = script(`
if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
own(KEYS[2], 'zset')
own(KEYS[4], 'set')
if own(KEYS[3], 'zset') and redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[7]) then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'subject', ARGV[2], 'owner', ARGV[3], 'shash', ARGV[4], 'ver', 0, 'token', 0)
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
redis.call('ZADD', KEYS[3], 0, ARGV[6])
redis.call('SADD', KEYS[4], ARGV[6])
return 1
`)

// Create implements Store.
func (s *RedisStore) Create(ctx context.Context, r *Record, due time.Time, maxPerOwner int) error {
	doc, err := json.Marshal(&r.Watch)
	if err != nil {
		return err
	}
	w := &r.Watch
	n, err := createScript.Run(ctx, s.c, []string{s.watch(w.ID), s.due(), s.owner(w.Owner), s.subject(w.SubjectHash)},
		doc, r.Subject, w.Owner, w.SubjectHash, due.UnixMilli(), w.ID, maxPerOwner).Int()
	switch {
	case err != nil:
		return err
	case n == 0:
		return ErrLimit
	case n < 0:
		return errors.New("watch: id already taken")
	}
	return nil
}

// fields are the fields of a watch's hash that a record is read from.
var fields = []string{"doc", "subject", "held", "known", "ver", "out", "token"}

// read makes a record of watch id's fields (in the order of fields) and
// its token; ok is false when they are not what this store writes.
func read(id string, vals []any) (r *Record, token int64, ok bool) {
	str := func(i int) (string, bool) {
		if i >= len(vals) {
			return "", false
		}
		v, ok := vals[i].(string)
		return v, ok
	}
	doc, okDoc := str(0)
	subj, okSubj := str(1)
	if !okDoc || !okSubj {
		return nil, 0, false
	}
	w, ok := decodeWatch([]byte(doc), id)
	if !ok {
		return nil, 0, false
	}
	r = &Record{Watch: *w, Subject: []byte(subj)}
	if v, ok := str(2); ok {
		r.Held = []byte(v)
	}
	if v, ok := str(3); ok {
		r.Known = []byte(v)
	}
	ver, _ := str(4)
	if r.Version, ok = count(ver); !ok || r.Known == nil && r.Version != 0 {
		return nil, 0, false
	}
	if v, ok := str(5); ok {
		r.Out = []byte(v)
	}
	tok, _ := str(6)
	if token, ok = count(tok); !ok {
		return nil, 0, false
	}
	return r, token, true
}

// count parses a non-negative integer as this store writes it.
func count(s string) (int64, bool) {
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0 && strconv.FormatInt(n, 10) == s
}

// get: KEYS w; ARGV fields. Returns {1, the fields…}, {0} when there is
// no watch, {-1} when the key is not a hash of ours.
var getScript = script(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return {0} end
if t ~= 'hash' or redis.call('HEXISTS', KEYS[1], 'doc') == 0 then return {-1} end
local out = redis.call('HMGET', KEYS[1], unpack(ARGV))
table.insert(out, 1, 1)
return out
`)

// replyFields reads a reply of get or take: the fields when its status is
// 1; bad when the key held something else.
func replyFields(vals []any) (fields []any, bad bool) {
	if len(vals) == 0 {
		return nil, true
	}
	switch st, _ := vals[0].(int64); st {
	case 1:
		return vals[1:], false
	case 0:
		return nil, false
	}
	return nil, true
}

// Get implements Store.
func (s *RedisStore) Get(ctx context.Context, id string) (*Record, error) {
	key := s.watch(id)
	vals, err := getScript.Run(ctx, s.c, []string{key}, fieldArgs()...).Slice()
	if err != nil {
		return nil, err
	}
	f, bad := replyFields(vals)
	var r *Record
	ok := false
	if f != nil {
		r, _, ok = read(id, f)
	}
	if !ok {
		if bad || f != nil {
			s.bad.Unreadable(key, "", false)
		}
		return nil, ErrNotFound
	}
	return r, nil
}

func fieldArgs() []any {
	out := make([]any, len(fields))
	for i, f := range fields {
		out[i] = f
	}
	return out
}

// List implements Store.
func (s *RedisStore) List(ctx context.Context, owner, after string, n int) ([]*Record, bool, error) {
	min := "-"
	if after != "" {
		min = "(" + after
	}
	key := s.owner(owner)
	ids, err := s.c.ZRangeByLex(ctx, key, &redis.ZRangeBy{Min: min, Max: "+", Count: int64(n) + 1}).Result()
	if err != nil {
		if isWrongType(err) {
			s.bad.Unreadable(key, "", false)
			return nil, false, nil
		}
		return nil, false, err
	}
	more := len(ids) > n
	if more {
		ids = ids[:n]
	}
	out := make([]*Record, 0, len(ids))
	for _, id := range ids {
		if !ValidID(id) {
			s.bad.Unreadable(key, "a member that is not an id", false)
			continue
		}
		r, err := s.Get(ctx, id)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		if r.Watch.Owner != owner {
			continue // an index that names another's watch
		}
		out = append(out, r)
	}
	return out, more, nil
}

// del: KEYS w, due, k, s; ARGV id, owner, shash. Returns 1, 0 when there
// is no watch, -1 when its owner or subject hash is not those given (read
// again).
var deleteScript = script(`
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('TYPE', KEYS[1])['ok'] == 'hash' then
  local f = redis.call('HMGET', KEYS[1], 'owner', 'shash')
  if f[1] ~= ARGV[2] or f[2] ~= ARGV[3] then return -1 end
end
redis.call('DEL', KEYS[1])
if own(KEYS[2], 'zset') then redis.call('ZREM', KEYS[2], ARGV[1]) end
if own(KEYS[3], 'zset') then redis.call('ZREM', KEYS[3], ARGV[1]) end
if own(KEYS[4], 'set') then redis.call('SREM', KEYS[4], ARGV[1]) end
return 1
`)

// Delete implements Store. It reads the watch's owner and subject hash to
// name its index keys, then deletes all at once.
func (s *RedisStore) Delete(ctx context.Context, id string) error {
	key := s.watch(id)
	for range 3 {
		var owner, shash string
		f, err := s.c.HMGet(ctx, key, "owner", "shash").Result()
		switch {
		case isWrongType(err):
		case err != nil:
			return err
		default:
			owner, _ = f[0].(string)
			shash, _ = f[1].(string)
		}
		n, err := deleteScript.Run(ctx, s.c, []string{key, s.due(), s.owner(owner), s.subject(shash)}, id, owner, shash).Int()
		if err != nil {
			return err
		}
		switch n {
		case 0:
			return ErrNotFound
		case 1:
			return nil
		}
	}
	return errors.New("watch: its owner keeps changing") // never, but bounded
}

// BySubject implements Store.
func (s *RedisStore) BySubject(ctx context.Context, hash string) ([]string, error) {
	key := s.subject(hash)
	ids, err := s.c.SMembers(ctx, key).Result()
	if isWrongType(err) {
		s.bad.Unreadable(key, "", false)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := ids[:0]
	for _, id := range ids {
		if ValidID(id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// Count implements Store: the watches on the schedule (every readable
// watch is).
func (s *RedisStore) Count(ctx context.Context) (int, error) {
	n, err := s.c.ZCard(ctx, s.due()).Result()
	if isWrongType(err) {
		return 0, nil
	}
	return int(n), err
}

// claim: KEYS due; ARGV now ms, lease ms, max. Leases and returns the ids
// due at now, earliest first.
var claimScript = script(`
if not own(KEYS[1], 'zset') then return {} end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local until_ = tonumber(ARGV[1]) + tonumber(ARGV[2])
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], until_, id) end
return ids
`)

// take: KEYS w; ARGV fields. Renews the watch's token and returns what
// get returns.
var takeScript = script(`
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'none' then return {0} end
if t ~= 'hash' or redis.call('HEXISTS', KEYS[1], 'doc') == 0 then return {-1} end
local tok = redis.call('HGET', KEYS[1], 'token')
if not tok or not string.match(tok, '^%d+$') or string.len(tok) > 15 then redis.call('HSET', KEYS[1], 'token', 0) end
redis.call('HINCRBY', KEYS[1], 'token', 1)
local out = redis.call('HMGET', KEYS[1], unpack(ARGV))
table.insert(out, 1, 1)
return out
`)

// unscheduleScript: KEYS due; ARGV ids.
var unscheduleScript = script(`
if own(KEYS[1], 'zset') then redis.call('ZREM', KEYS[1], unpack(ARGV)) end
return 1
`)

// Claim implements Store: one script leases the due ids, then one
// pipeline renews their tokens and reads them. An id whose watch is gone
// or cannot be read leaves the schedule.
func (s *RedisStore) Claim(ctx context.Context, now time.Time, lease time.Duration, max int) ([]*Claim, error) {
	res, err := claimScript.Run(ctx, s.c, []string{s.due()}, now.UnixMilli(), lease.Milliseconds(), max).StringSlice()
	if err != nil || len(res) == 0 {
		return nil, err
	}
	var gone []any
	ids := make([]string, 0, len(res))
	for _, id := range res {
		if !ValidID(id) {
			s.bad.Unreadable(s.due(), "a member that is not an id", true)
			gone = append(gone, id)
			continue
		}
		ids = append(ids, id)
	}
	cmds := make([]*redis.Cmd, len(ids))
	_, err = s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			// Eval, not EvalSha: a pipeline learns of a NOSCRIPT too late.
			cmds[i] = takeScript.Eval(ctx, p, []string{s.watch(id)}, fieldArgs()...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]*Claim, 0, len(ids))
	for i, id := range ids {
		vals, err := cmds[i].Slice()
		if err != nil {
			return nil, err
		}
		f, bad := replyFields(vals)
		var r *Record
		var token int64
		ok := false
		if f != nil {
			r, token, ok = read(id, f)
		}
		if !ok {
			if bad || f != nil {
				s.bad.Unreadable(s.watch(id), "", false)
			}
			gone = append(gone, id)
			continue
		}
		out = append(out, &Claim{Record: *r, Token: token})
	}
	if len(gone) > 0 {
		if err := unscheduleScript.Run(ctx, s.c, []string{s.due()}, gone...).Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// save: KEYS w, due; ARGV id, token, doc, held, due ms, known, version,
// out. An empty held or out is none; an empty known keeps the last known.
var saveScript = script(`
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' or redis.call('HGET', KEYS[1], 'token') ~= ARGV[2] then return 0 end
if ARGV[6] ~= '' then
  if redis.call('HGET', KEYS[1], 'ver') ~= tostring(tonumber(ARGV[7]) - 1) then return 0 end
  redis.call('HSET', KEYS[1], 'known', ARGV[6], 'ver', ARGV[7])
  if ARGV[8] ~= '' then redis.call('HSET', KEYS[1], 'out', ARGV[8]) else redis.call('HDEL', KEYS[1], 'out') end
end
redis.call('HSET', KEYS[1], 'doc', ARGV[3])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'held', ARGV[4]) else redis.call('HDEL', KEYS[1], 'held') end
own(KEYS[2], 'zset')
redis.call('ZADD', KEYS[2], ARGV[5], ARGV[1])
return 1
`)

// Save implements Store.
func (s *RedisStore) Save(ctx context.Context, id string, token int64, u *Update) (bool, error) {
	doc, err := json.Marshal(&u.Watch)
	if err != nil {
		return false, err
	}
	n, err := saveScript.Run(ctx, s.c, []string{s.watch(id), s.due()},
		id, token, doc, u.Held, u.Due.UnixMilli(), u.Known, u.Version, u.Out).Int()
	return n == 1, err
}

// clearOut: KEYS w, due; ARGV token, version, due ms, id.
var clearOutScript = script(`
if redis.call('TYPE', KEYS[1])['ok'] ~= 'hash' or redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] or
   redis.call('HGET', KEYS[1], 'ver') ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], 'out')
own(KEYS[2], 'zset')
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
return 1
`)

// ClearOut implements Store.
func (s *RedisStore) ClearOut(ctx context.Context, id string, token, version int64, due time.Time) (bool, error) {
	n, err := clearOutScript.Run(ctx, s.c, []string{s.watch(id), s.due()}, token, version, due.UnixMilli(), id).Int()
	return n == 1, err
}

// NextDue implements Store. A score that is not a time is no due time:
// the scheduler looks again within its poll interval anyway.
func (s *RedisStore) NextDue(ctx context.Context) (time.Time, bool, error) {
	z, err := s.c.ZRangeWithScores(ctx, s.due(), 0, 0).Result()
	if isWrongType(err) {
		return time.Time{}, false, nil
	}
	if err != nil || len(z) == 0 {
		return time.Time{}, false, err
	}
	f := z[0].Score
	if math.IsNaN(f) || f < 0 || f >= 1<<53 {
		return time.Time{}, false, nil
	}
	return time.UnixMilli(int64(f)), true, nil
}

// isWrongType reports whether err is Redis's answer to a command on a key
// of another type.
func isWrongType(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && len(re.Error()) >= 9 && re.Error()[:9] == "WRONGTYPE"
}
