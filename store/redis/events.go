package redisstore

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/breaker"
)

var (
	appendScript = lua("events_append.lua")
	readScript   = lua("events_read.lua")
)

// historyTTL is how long a breaker's history outlives its last
// transition: a breaker that stayed in one state for longer needs none.
const historyTTL = breaker.HistoryFor + time.Hour

// EventLogSize is how many events the shared log keeps.
const EventLogSize = 1000

// EventLog implements breaker.EventLog on a capped Redis list shared by
// every replica, for breaker.Options.Events. A breaker.Set appends the
// transitions its store returned, so each transition is appended once, by
// the replica that made it.
//
// The log is also kept in this process: while Redis cannot be reached, reads
// come from there, and events appended meanwhile go to Redis once it is
// back. Entries that do not parse are skipped.
type EventLog struct {
	st    *Stores
	key   string
	local *breaker.Ring

	mu      sync.Mutex
	pending []any // JSON events not yet in Redis
	// histories holds the transitions not yet in their breaker's history,
	// by history key; oldest is the time of the oldest of them.
	histories map[string][]any
	oldest    time.Time

	// begun is when the shared histories began, as read from Redis at
	// begunAt (see began).
	begun, begunAt time.Time
}

// begunFor is how long the start of the shared histories is remembered.
const begunFor = time.Minute

var _ breaker.EventLog = (*EventLog)(nil)

func newEventLog(s *Stores) *EventLog {
	return &EventLog{st: s, key: s.opts.Prefix + "events:log", local: breaker.NewRing(EventLogSize), histories: map[string][]any{}}
}

// historyKey is where breaker id's transitions are kept: a key of its own
// (in a hash slot of its own on a Cluster), written only by this log.
func (l *EventLog) historyKey(id breaker.ID) string {
	return l.st.opts.Prefix + "events:history:{" + id.String() + "}"
}

// Append implements breaker.EventLog.
func (l *EventLog) Append(e breaker.Event) {
	l.local.Append(e)
	body, err := json.Marshal(e)
	if err != nil {
		return
	}
	l.mu.Lock()
	if len(l.pending) >= EventLogSize {
		l.pending = l.pending[1:]
	}
	l.pending = append(l.pending, string(body))
	if e.Kind == "" {
		hk := l.historyKey(breaker.ID{Key: e.BreakerKey, Operation: e.Operation})
		h := l.histories[hk]
		if len(h) >= breaker.HistorySize {
			h = h[1:]
		}
		l.histories[hk] = append(h, string(body))
		if l.oldest.IsZero() || e.Time.Before(l.oldest) {
			l.oldest = e.Time
		}
	}
	l.mu.Unlock()
	if !l.st.Degraded() {
		l.flush(context.Background())
	}
}

// flush sends the pending events to Redis, and reports whether it could.
// A failure degrades the stores once l.mu is released: degrading appends
// a store event, and Append takes l.mu.
func (l *EventLog) flush(ctx context.Context) bool {
	if err := l.send(ctx); err != nil {
		l.st.failed(ctx, err)
		return false
	}
	return true
}

// send is flush's work, under l.mu.
func (l *EventLog) send(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.pending) == 0 {
		return nil
	}
	args := append([]any{EventLogSize, 0}, l.pending...)
	cctx, cancel := l.st.callCtx(ctx)
	found, err := appendScript.Run(cctx, l.st.client, []string{l.key}, args...).Int()
	cancel()
	if err != nil {
		return err
	}
	if found == 2 {
		l.st.bad.Unreadable(l.key, "", true)
	}
	l.pending = l.pending[:0]
	return l.flushHistories(ctx)
}

// flushHistories sends the pending transitions to their breakers'
// histories, in one pipelined round trip; l.mu must be held.
func (l *EventLog) flushHistories(ctx context.Context) error {
	if len(l.histories) == 0 {
		return nil
	}
	cctx, cancel := l.st.callCtx(ctx)
	defer cancel()
	pipe := l.st.client.Pipeline()
	// The shared histories began, at the latest, with the first
	// transition they keep.
	pipe.SetNX(cctx, l.beganKey(), l.oldest.UnixMicro(), 0)
	cmds := make(map[string]*redis.Cmd, len(l.histories))
	for hk, events := range l.histories {
		args := append([]any{breaker.HistorySize, historyTTL.Milliseconds()}, events...)
		// EVAL, not EVALSHA: transitions are rare, and a pipeline cannot
		// load a script the server lost on the way.
		cmds[hk] = appendScript.Eval(cctx, pipe, []string{hk}, args...)
	}
	_, _ = pipe.Exec(cctx) // each command's error is read below
	for hk, cmd := range cmds {
		found, err := cmd.Int()
		if err != nil {
			return err
		}
		if found == 2 {
			l.st.bad.Unreadable(hk, "", true)
		}
		delete(l.histories, hk)
	}
	l.oldest = time.Time{}
	return nil
}

// Since implements breaker.EventLog.
func (l *EventLog) Since(t time.Time) []breaker.Event {
	events, ok := l.read(0, -1)
	if !ok {
		return l.local.Since(t)
	}
	out := []breaker.Event{}
	for _, e := range events {
		if e.Time.After(t) {
			out = append(out, e)
		}
	}
	return out
}

// Latest implements breaker.EventLog.
func (l *EventLog) Latest(n int) []breaker.Event {
	if n <= 0 {
		return []breaker.Event{}
	}
	events, ok := l.read(-n, -1)
	if !ok {
		return l.local.Latest(n)
	}
	return events
}

// History implements breaker.EventLog from the breaker's shared history;
// from this replica's own while Redis cannot be reached. Entries that do
// not parse, or are another breaker's, are skipped.
func (l *EventLog) History(id breaker.ID, since time.Time) ([]breaker.Event, time.Time) {
	if l.st.Degraded() {
		return l.local.History(id, since)
	}
	ctx := context.Background()
	hk := l.historyKey(id)
	cctx, cancel := l.st.callCtx(ctx)
	res, err := l.st.client.LRange(cctx, hk, 0, -1).Result()
	cancel()
	if err != nil {
		if !redis.HasErrorPrefix(err, "WRONGTYPE") {
			l.st.failed(ctx, err)
			return l.local.History(id, since)
		}
		l.st.bad.Unreadable(hk, "", false) // another type: no history
		res = nil
	}
	from := since
	if b := l.began(ctx); b.After(from) {
		from = b
	}
	if len(res) >= breaker.HistorySize {
		// Full: older transitions were let go, so nothing before the
		// oldest kept is complete.
		if e, ok := decodeEvent([]byte(res[0])); ok && e.Time.After(from) {
			from = e.Time
		}
	}
	events := make([]breaker.Event, 0, len(res))
	skipped := false
	for _, s := range res {
		e, ok := decodeEvent([]byte(s))
		if !ok || e.Kind != "" || e.BreakerKey != id.Key || e.Operation != id.Operation {
			skipped = true
			continue
		}
		if !e.Time.Before(since) {
			events = append(events, e)
		}
	}
	if skipped {
		l.st.bad.Unreadable(hk, "an entry", false)
	}
	slices.SortStableFunc(events, func(a, b breaker.Event) int { return a.Time.Compare(b.Time) })
	return events, from
}

func (l *EventLog) beganKey() string { return l.st.opts.Prefix + "events:history-began" }

// Begin marks the start of the shared histories if nobody has: a replica
// that starts on a fresh Redis calls it, so that the histories say they
// begin then, not a day ago.
func (l *EventLog) Begin(ctx context.Context) { l.began(ctx) }

// began is when the shared histories began: the first replica to ask
// (of a fresh Redis, or one that lost its data) writes it, so that the
// history of a breaker without transitions does not claim a day of one
// state that nobody saw. Zero when Redis cannot tell.
func (l *EventLog) began(ctx context.Context) time.Time {
	t, err := l.readBegan(ctx)
	if err != nil {
		l.st.failed(ctx, err) // once l.mu is released, as flush
	}
	return t
}

// readBegan is began's work, under l.mu.
func (l *EventLog) readBegan(ctx context.Context) (time.Time, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.begunAt.IsZero() && time.Since(l.begunAt) < begunFor {
		return l.begun, nil
	}
	key := l.beganKey()
	cctx, cancel := l.st.callCtx(ctx)
	defer cancel()
	now := time.Now()
	for range 2 {
		v, found, err := l.st.get(cctx, key)
		if err != nil {
			return time.Time{}, err
		}
		if found {
			us, err := strconv.ParseInt(v, 10, 64)
			if err == nil && us > 0 && us <= now.Add(skew).UnixMicro() {
				l.begun, l.begunAt = time.UnixMicro(us), now
				return l.begun, nil
			}
			l.st.bad.Unreadable(key, "", true)
			l.st.client.Del(cctx, key)
		}
		if err := l.st.client.SetNX(cctx, key, now.UnixMicro(), 0).Err(); err != nil {
			return time.Time{}, err
		}
	}
	return time.Time{}, nil
}

// read returns the entries from..to of the shared log, oldest first (by
// time: replicas append concurrently), or false when Redis is not used.
func (l *EventLog) read(from, to int) ([]breaker.Event, bool) {
	if l.st.Degraded() {
		return nil, false
	}
	ctx := context.Background()
	cctx, cancel := l.st.callCtx(ctx)
	res, err := readScript.Run(cctx, l.st.client, []string{l.key}, strconv.Itoa(from), strconv.Itoa(to)).StringSlice()
	cancel()
	if isNil(err) {
		l.st.bad.Unreadable(l.key, "", false) // another type: no events
		err = nil
	}
	if err != nil {
		l.st.failed(ctx, err)
		return nil, false
	}
	events := make([]breaker.Event, 0, len(res))
	skipped := false
	for _, s := range res {
		e, ok := decodeEvent([]byte(s))
		if !ok {
			skipped = true
			continue
		}
		events = append(events, e)
	}
	if skipped {
		l.st.bad.Unreadable(l.key, "an entry", false)
	}
	slices.SortStableFunc(events, func(a, b breaker.Event) int { return a.Time.Compare(b.Time) })
	return events, true
}

// decodeEvent decodes an entry of the log as Append writes it: false
// unless it is a transition the admin API can serve (a time, a breaker, a
// known operation and states, short UTF-8 text, evidence that is not
// negative, a ratio within 0–1), a store event (shared→local or back,
// no breaker), or a mapping event (validMapping).
func decodeEvent(b []byte) (breaker.Event, bool) {
	var e breaker.Event
	if json.Unmarshal(b, &e) != nil || e.Time.IsZero() {
		return breaker.Event{}, false
	}
	ev := e.Evidence
	var ok bool
	switch e.Kind {
	case "": // a breaker's transition
		ok = validState(e.From) && validState(e.To) && e.Operation.Valid() &&
			e.BreakerKey != "" && len(e.BreakerKey) <= maxReason && utf8.ValidString(e.BreakerKey)
	case breaker.KindStore: // the store's, as health.go writes it
		ok = e.BreakerKey == "" && e.Operation == "" &&
			(e.From == Shared && e.To == Local || e.From == Local && e.To == Shared)
	case breaker.KindMapping: // a source's answers changed (mapping.go)
		ok = validMapping(e)
	}
	if e.Kind != breaker.KindMapping && (e.Source != "" || e.Added != nil || e.Removed != nil || e.Unmapped != nil) {
		ok = false
	}
	ok = ok && len(e.Reason) <= maxReason && utf8.ValidString(e.Reason) &&
		ev.Calls >= 0 && ev.Failures >= 0 && ev.Failures <= ev.Calls && ev.ConsecutiveFailures >= 0 &&
		ev.Ratio >= 0 && ev.Ratio <= 1 && ev.WindowSeconds >= 0 && ev.RetryAfter >= 0
	if !ok {
		return breaker.Event{}, false
	}
	return e, true
}
