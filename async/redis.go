package async

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisStore keeps the work in Redis, shared by every replica and durable
// across restarts. Keys, under the prefix:
//
//	{async}:q:<qid>  hash: status, doc (the query, JSON)
//	{async}:q:due    sorted set of pending query ids by due time (ms)
//	{async}:d:<did>  a pending delivery (JSON)
//	{async}:d:due    sorted set of delivery ids by due time (ms)
//	{async}:dlq      hash: entry id → DLQ entry (JSON)
//	pace:{<h>}       the release pace of a source or origin (hashed; redisPace)
//
// Every key that a script or a MULTI touches together with another shares
// the hash tag {async}, so that on a Redis Cluster they live in one slot
// (the queries, deliveries and DLQ of one deployment are few: one slot
// holds them). Pace keys are used one at a time.
//
// Keys hold only generated ids: a plate or a person id appears in values
// only (the query must be stored to be tried again).
type RedisStore struct {
	c      redis.UniversalClient
	prefix string
}

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a store on c whose keys all start with prefix
// (e.g. "aggregator:async:").
func NewRedisStore(c redis.UniversalClient, prefix string) *RedisStore {
	return &RedisStore{c: c, prefix: prefix}
}

// slot is the hash tag every key of the work shares (see RedisStore).
const slot = "{async}:"

func (s *RedisStore) query(id string) string    { return s.prefix + slot + "q:" + id }
func (s *RedisStore) delivery(id string) string { return s.prefix + slot + "d:" + id }
func (s *RedisStore) queryDue() string          { return s.prefix + slot + "q:due" }
func (s *RedisStore) deliverDue() string        { return s.prefix + slot + "d:due" }
func (s *RedisStore) dlq() string               { return s.prefix + slot + "dlq" }

func ms(t time.Time) float64 { return float64(t.UnixMilli()) }

// CreateQuery implements Store.
func (s *RedisStore) CreateQuery(ctx context.Context, q *Query, due time.Time) error {
	doc, err := json.Marshal(q)
	if err != nil {
		return err
	}
	_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.query(q.ID), "status", string(Pending), "doc", doc)
		p.ZAdd(ctx, s.queryDue(), redis.Z{Score: ms(due), Member: q.ID})
		return nil
	})
	return err
}

// Query implements Store.
func (s *RedisStore) Query(ctx context.Context, id string) (*Query, error) {
	doc, err := s.c.HGet(ctx, s.query(id), "doc").Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	var q Query
	if err := json.Unmarshal(doc, &q); err != nil {
		return nil, err
	}
	return &q, nil
}

// saveQuery: KEYS q:{id}, q:due; ARGV doc, due ms, id.
var saveQuery = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'status') ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'doc', ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1
`)

// SaveQuery implements Store.
func (s *RedisStore) SaveQuery(ctx context.Context, q *Query, due time.Time) (bool, error) {
	doc, err := json.Marshal(q)
	if err != nil {
		return false, err
	}
	n, err := saveQuery.Run(ctx, s.c, []string{s.query(q.ID), s.queryDue()}, doc, due.UnixMilli(), q.ID).Int()
	return n == 1, err
}

// finishQuery: KEYS q:{id}, q:due, d:{did}, d:due; ARGV status, doc,
// keep ms, qid, delivery, due ms, did.
var finishQuery = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'status') ~= 'pending' then return 0 end
redis.call('HSET', KEYS[1], 'status', ARGV[1], 'doc', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
redis.call('ZREM', KEYS[2], ARGV[4])
redis.call('SET', KEYS[3], ARGV[5])
redis.call('ZADD', KEYS[4], ARGV[6], ARGV[7])
return 1
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
	n, err := finishQuery.Run(ctx, s.c,
		[]string{s.query(q.ID), s.queryDue(), s.delivery(d.ID), s.deliverDue()},
		string(q.Status), doc, max(keep.Milliseconds(), 1), q.ID, dd, d.Due.UnixMilli(), d.ID).Int()
	return n == 1, err
}

// claimDue: KEYS due; ARGV now ms, lease ms, max. Leases and returns the
// members due at now, earliest first.
var claimDue = redis.NewScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local until_ = tonumber(ARGV[1]) + tonumber(ARGV[2])
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], until_, id) end
return ids
`)

func (s *RedisStore) claim(ctx context.Context, key string, now time.Time, lease time.Duration, max int) ([]string, error) {
	return claimDue.Run(ctx, s.c, []string{key}, now.UnixMilli(), lease.Milliseconds(), max).StringSlice()
}

// ClaimQueries implements Store.
func (s *RedisStore) ClaimQueries(ctx context.Context, now time.Time, lease time.Duration, max int) ([]string, error) {
	return s.claim(ctx, s.queryDue(), now, lease, max)
}

// ClaimDeliveries implements Store.
func (s *RedisStore) ClaimDeliveries(ctx context.Context, now time.Time, lease time.Duration, max int) ([]*Delivery, error) {
	ids, err := s.claim(ctx, s.deliverDue(), now, lease, max)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.delivery(id)
	}
	vals, err := s.c.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, err
	}
	out := make([]*Delivery, 0, len(ids))
	for i, v := range vals {
		str, ok := v.(string)
		var d Delivery
		if !ok || json.Unmarshal([]byte(str), &d) != nil {
			// Gone (delivered by another replica) or unreadable: unschedule.
			s.c.ZRem(ctx, s.deliverDue(), ids[i])
			continue
		}
		out = append(out, &d)
	}
	return out, nil
}

// SaveDelivery implements Store.
func (s *RedisStore) SaveDelivery(ctx context.Context, d *Delivery) error {
	dd, err := json.Marshal(d)
	if err != nil {
		return err
	}
	_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, s.delivery(d.ID), dd, 0)
		p.ZAdd(ctx, s.deliverDue(), redis.Z{Score: ms(d.Due), Member: d.ID})
		return nil
	})
	return err
}

// DeleteDelivery implements Store.
func (s *RedisStore) DeleteDelivery(ctx context.Context, id string) error {
	_, err := s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.delivery(id))
		p.ZRem(ctx, s.deliverDue(), id)
		return nil
	})
	return err
}

// DeadLetter implements Store.
func (s *RedisStore) DeadLetter(ctx context.Context, d *Delivery, e DLQEntry) error {
	rec, err := json.Marshal(dlqRecord{Entry: e, MessageID: e.MessageID})
	if err != nil {
		return err
	}
	_, err = s.c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.delivery(d.ID))
		p.ZRem(ctx, s.deliverDue(), d.ID)
		p.HSet(ctx, s.dlq(), e.ID, rec)
		return nil
	})
	return err
}

// DLQ implements Store.
func (s *RedisStore) DLQ(ctx context.Context) ([]DLQEntry, error) {
	all, err := s.c.HGetAll(ctx, s.dlq()).Result()
	if err != nil {
		return nil, err
	}
	out := make([]DLQEntry, 0, len(all))
	for _, v := range all {
		var r dlqRecord
		if err := json.Unmarshal([]byte(v), &r); err != nil {
			return nil, err
		}
		r.Entry.MessageID = r.MessageID
		out = append(out, r.Entry)
	}
	sortDLQ(out)
	return out, nil
}

// DLQLen implements Store.
func (s *RedisStore) DLQLen(ctx context.Context) (int, error) {
	n, err := s.c.HLen(ctx, s.dlq()).Result()
	return int(n), err
}

// redeliver: KEYS dlq, d:{did}, d:due; ARGV entry id, delivery, due ms, did.
var redeliver = redis.NewScript(`
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SET', KEYS[2], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[3], ARGV[4])
return 1
`)

// Redeliver implements Store.
func (s *RedisStore) Redeliver(ctx context.Context, id string, fresh func(DLQEntry) *Delivery) error {
	v, err := s.c.HGet(ctx, s.dlq(), id).Bytes()
	if errors.Is(err, redis.Nil) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	var r dlqRecord
	if err := json.Unmarshal(v, &r); err != nil {
		return err
	}
	r.Entry.MessageID = r.MessageID
	d := fresh(r.Entry)
	dd, err := json.Marshal(d)
	if err != nil {
		return err
	}
	n, err := redeliver.Run(ctx, s.c, []string{s.dlq(), s.delivery(d.ID), s.deliverDue()},
		id, dd, d.Due.UnixMilli(), d.ID).Int()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// DeleteDLQ implements Store.
func (s *RedisStore) DeleteDLQ(ctx context.Context, id string) error {
	n, err := s.c.HDel(ctx, s.dlq(), id).Result()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}

// NextDue implements Store.
func (s *RedisStore) NextDue(ctx context.Context) (time.Time, bool, error) {
	var next time.Time
	ok := false
	for _, key := range []string{s.queryDue(), s.deliverDue()} {
		zs, err := s.c.ZRangeWithScores(ctx, key, 0, 0).Result()
		if err != nil {
			return time.Time{}, false, err
		}
		if len(zs) == 0 {
			continue
		}
		at := time.UnixMilli(int64(zs[0].Score))
		if !ok || at.Before(next) {
			next, ok = at, true
		}
	}
	return next, ok, nil
}
