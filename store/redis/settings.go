package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/multas/aggregator/breaker"
)

// sharedSettings is breaker.Settings as Redis keeps it.
type sharedSettings struct {
	Window              time.Duration `json:"window"`
	MinCalls            int           `json:"min_calls"`
	FailureRatio        float64       `json:"failure_ratio"`
	ConsecutiveFailures int           `json:"consecutive_failures"`
	OpenFor             time.Duration `json:"open_for"`
	SlowCall            time.Duration `json:"slow_call"`
	FailureStatuses     []int         `json:"failure_statuses"`
	ProbeLease          time.Duration `json:"probe_lease"`
}

func toShared(s breaker.Settings) *sharedSettings {
	return &sharedSettings{
		Window: s.Window, MinCalls: s.MinCalls, FailureRatio: s.FailureRatio,
		ConsecutiveFailures: s.ConsecutiveFailures, OpenFor: s.OpenFor, SlowCall: s.SlowCall,
		FailureStatuses: append([]int(nil), s.FailureStatuses...), ProbeLease: s.ProbeLease,
	}
}

func (s *sharedSettings) settings() breaker.Settings {
	return breaker.Settings{
		Window: s.Window, MinCalls: s.MinCalls, FailureRatio: s.FailureRatio,
		ConsecutiveFailures: s.ConsecutiveFailures, OpenFor: s.OpenFor, SlowCall: s.SlowCall,
		FailureStatuses: append([]int(nil), s.FailureStatuses...), ProbeLease: s.ProbeLease,
	}
}

// maxStatuses bounds the failure statuses of settings read back: there are
// a hundred 5xx statuses.
const maxStatuses = 100

// valid reports whether s are settings the admin API could have shared:
// those config.Breaker.Validate accepts (every PUT is checked with it),
// with a probe lease that is not negative. Other settings, from garbage or
// a foreign writer, are no settings: applied, they could keep a breaker
// from ever tripping or from ever closing.
func (s *sharedSettings) valid() bool {
	if s.Window <= 0 || s.MinCalls < 1 || !(s.FailureRatio > 0 && s.FailureRatio <= 1) ||
		s.ConsecutiveFailures < 0 || s.OpenFor <= 0 || s.SlowCall < 0 || s.ProbeLease < 0 ||
		len(s.FailureStatuses) > maxStatuses {
		return false
	}
	for _, c := range s.FailureStatuses {
		if c < 500 || c > 599 {
			return false
		}
	}
	return true
}

func (b *BreakerStore) settingsKey(id breaker.ID) string {
	return b.st.opts.Prefix + "{" + id.Key + "/" + string(id.Operation) + "}:settings"
}

// ShareSettings records s as the run-time settings of id (the admin API's
// PUT) and tells every other replica, whose Options.OnSettings receives
// them. Errors are returned, not degraded to local state: the caller has
// already applied s to its own replica.
func (b *BreakerStore) ShareSettings(ctx context.Context, id breaker.ID, s breaker.Settings) error {
	msg, err := json.Marshal(message{Key: id.Key, Operation: string(id.Operation), Settings: toShared(s), Replica: b.st.replica})
	if err != nil {
		return err
	}
	body, err := json.Marshal(toShared(s))
	if err != nil {
		return err
	}
	ctx, cancel := b.st.callCtx(ctx)
	defer cancel()
	pipe := b.st.client.Pipeline()
	pipe.Set(ctx, b.settingsKey(id), body, 0)
	pipe.Publish(ctx, b.st.channel, msg)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("sharing the settings of breaker %s: %w", id, err)
	}
	return nil
}

// SharedSettings returns the run-time settings last shared for id, if any.
// A value of another type, contents that do not decode, or settings that
// are not valid are no settings (and logged by key).
func (b *BreakerStore) SharedSettings(ctx context.Context, id breaker.ID) (breaker.Settings, bool, error) {
	all, err := b.LoadSettings(ctx, []breaker.ID{id})
	if err != nil {
		return breaker.Settings{}, false, err
	}
	s, ok := all[id]
	return s, ok, nil
}

// LoadSettings returns the run-time settings last shared for each of ids
// that has some, for a replica that starts after an operator changed
// them: one pipelined round trip, bounded by the store timeout, however
// many breakers (a Redis that does not answer costs start-up one timeout,
// and the stores start degraded). Contents that do not parse, or a key of
// another type, are no settings.
func (b *BreakerStore) LoadSettings(ctx context.Context, ids []breaker.ID) (map[breaker.ID]breaker.Settings, error) {
	out := make(map[breaker.ID]breaker.Settings, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	cctx, cancel := b.st.callCtx(ctx)
	defer cancel()
	pipe := b.st.client.Pipeline()
	cmds := make([]*redis.StringCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.Get(cctx, b.settingsKey(id))
	}
	_, _ = pipe.Exec(cctx)
	for i, cmd := range cmds {
		body, err := cmd.Result()
		var reply redis.Error
		switch {
		case isNil(err):
			continue // none
		case errors.As(err, &reply):
			b.st.bad.Unreadable(b.settingsKey(ids[i]), "", false) // not a string (WRONGTYPE): no settings
			continue
		case err != nil:
			b.st.failed(ctx, err)
			return nil, fmt.Errorf("reading the shared breaker settings: %w", err)
		}
		s, ok := decodeSettings([]byte(body))
		if !ok {
			b.st.bad.Unreadable(b.settingsKey(ids[i]), "", false)
			continue
		}
		out[ids[i]] = s
	}
	return out, nil
}

// decodeSettings decodes settings as ShareSettings writes them: false
// unless they decode and are valid.
func decodeSettings(body []byte) (breaker.Settings, bool) {
	var s sharedSettings
	if json.Unmarshal(body, &s) != nil || !s.valid() {
		return breaker.Settings{}, false
	}
	return s.settings(), true
}

func newReplicaID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
