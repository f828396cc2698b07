// Package untrusted reports values read from Redis that do not decode
// (SPEC 9: Redis contents are untrusted). The stores treat such a value as
// absent; a Reporter says so in the log by the key's name only, never its
// contents, and at most once per key in a while, so that garbage read on
// every request does not flood the log.
package untrusted

import (
	"log/slog"
	"sync"
	"time"
)

// Every is how long a key, once reported, is not reported again.
const Every = time.Minute

// maxKeys bounds the keys remembered: past it, the memory starts over.
const maxKeys = 4096

// Reporter logs the names of keys whose values could not be read. A nil
// *Reporter, or one without a logger, reports nothing. It is safe for
// concurrent use.
type Reporter struct {
	log *slog.Logger

	mu   sync.Mutex
	seen map[string]time.Time
}

// New returns a Reporter that logs to log (nothing when nil).
func New(log *slog.Logger) *Reporter {
	return &Reporter{log: log, seen: make(map[string]time.Time)}
}

// Unreadable reports that the value at key (a hash field, list entry or
// member when what names it, e.g. "field dlv_…") was of another type or
// did not decode, and was treated as absent; dropped says it was deleted
// or rewritten as well. The key must be one the product names itself: a
// name read from Redis (a member, a field) is foreign input and is passed
// only when it has the shape of a generated id.
func (r *Reporter) Unreadable(key, what string, dropped bool) {
	if r == nil || r.log == nil {
		return
	}
	now := time.Now()
	name := key
	if what != "" {
		name += " " + what
	}
	r.mu.Lock()
	if at, ok := r.seen[name]; ok && now.Sub(at) < Every {
		r.mu.Unlock()
		return
	}
	if len(r.seen) >= maxKeys {
		clear(r.seen)
	}
	r.seen[name] = now
	r.mu.Unlock()
	msg := "redis value unreadable (another type, or contents that do not decode): treated as absent"
	if dropped {
		msg = "redis value unreadable (another type, or contents that do not decode): dropped"
	}
	args := []any{"key", key}
	if what != "" {
		args = append(args, "at", what)
	}
	r.log.Warn(msg, args...)
}
