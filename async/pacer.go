package async

import (
	"sync"
	"time"
)

// pace spaces released work per key (a source or a callback origin): the
// local pacer on its own replica, the Redis one (redisPace) across the fleet.
type pace interface {
	// admit decides whether a call of key may go at now. It returns 0 when
	// it may (the call is recorded as gone and *slot cleared), else how
	// long to wait, with the reserved slot in *slot.
	admit(key string, slot *time.Time, now time.Time) time.Duration
	// reset forgets the slots reserved for key (its breaker opened).
	reset(key string)
	// prune forgets what this replica keeps of keys idle for a while.
	prune(now time.Time)
}

var (
	_ pace = (*pacer)(nil)
	_ pace = (*redisPace)(nil)
)

// pacer releases retained work at no more than one call per interval per
// key (a source or a callback origin): a token bucket of size one, so that
// a recovering portal or receiver never gets its backlog as a burst.
//
// Work that cannot go now reserves a slot (admit stores it in *slot) and
// is looked at again then, so a backlog is spread out at once rather than
// contending for every token. A slot honoured late never compresses the
// spacing: a call always goes at least one interval after the previous one.
//
// The pacer is per replica: with several replicas sharing a store, each
// would release at the rate, so they share a redisPace instead.
type pacer struct {
	interval time.Duration

	mu   sync.Mutex
	next map[string]time.Time // the first free slot of each key
	last map[string]time.Time // when the last call of each key went
}

func newPacer(rps float64) *pacer {
	iv := time.Duration(0)
	if rps > 0 {
		iv = time.Duration(float64(time.Second) / rps)
	}
	return &pacer{interval: iv, next: make(map[string]time.Time), last: make(map[string]time.Time)}
}

// admit decides whether a call of key may go at now. It returns 0 when it
// may (the call is recorded as gone and *slot cleared), else how long to
// wait, with the reserved slot in *slot.
func (p *pacer) admit(key string, slot *time.Time, now time.Time) time.Duration {
	if p.interval <= 0 {
		*slot = time.Time{}
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	earliest := now
	if last, ok := p.last[key]; ok && last.Add(p.interval).After(earliest) {
		earliest = last.Add(p.interval)
	}
	if !slot.IsZero() {
		if now.Before(*slot) {
			return slot.Sub(now)
		}
		if !earliest.After(now) {
			p.last[key] = now
			*slot = time.Time{}
			return 0
		}
		// A slot honoured too late to keep the spacing: take a new one.
	}
	s := earliest
	if n, ok := p.next[key]; ok && n.After(s) {
		s = n
	}
	p.next[key] = s.Add(p.interval)
	if !s.After(now) {
		p.last[key] = now
		*slot = time.Time{}
		return 0
	}
	*slot = s
	return s.Sub(now)
}

// prune forgets keys idle for a while.
func (p *pacer) prune(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, n := range p.next {
		if now.Sub(n) > time.Minute {
			delete(p.next, k)
			delete(p.last, k)
		}
	}
}

// reset forgets the slots reserved for key: its breaker opened, so no
// call goes before it lets calls through again, and the work that held
// those slots will ask again then. Without it, every round of a long
// outage would push the release of the backlog further into the future.
func (p *pacer) reset(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.next, key)
}
