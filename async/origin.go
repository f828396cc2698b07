package async

import (
	"net/url"
	"strings"
	"sync"
	"time"
)

// origin returns the scheme://host:port of a callback URL, the key of its
// breaker and of its release pace.
func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if strings.EqualFold(u.Scheme, "https") {
			port = "443"
		}
	}
	return strings.ToLower(u.Scheme) + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// originBreakers is the breaker of every callback origin (SPEC 3.4):
// after Failures consecutive failed attempts (a slow answer, past the
// timeout, is one) it opens for OpenFor; then the first attempt is the
// probe, alone in flight; its success closes the breaker.
//
// The state is per replica: each replica learns on its own that a
// receiver is down.
type originBreakers struct {
	failures int
	openFor  time.Duration
	// probeLease bounds how long a probe holds the slot, so that a probe
	// lost with its replica cannot wedge the breaker.
	probeLease time.Duration
	// recheck bounds the wait of a delivery held back by a probe in
	// flight, so that it goes soon after the probe succeeds.
	recheck time.Duration

	mu     sync.Mutex
	states map[string]*originState
}

type originState struct {
	consecutive int
	open        bool
	openUntil   time.Time
	probeUntil  time.Time // a probe is in flight until then
}

func newOriginBreakers(failures int, openFor, probeLease time.Duration) *originBreakers {
	if failures < 1 {
		failures = 5
	}
	if openFor <= 0 {
		openFor = 10 * time.Second
	}
	return &originBreakers{failures: failures, openFor: openFor, probeLease: probeLease,
		recheck: time.Second, states: make(map[string]*originState)}
}

// blocked says how long a delivery to o must wait before the breaker lets
// it be attempted: 0 when it may be attempted now.
func (b *originBreakers) blocked(o string, now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.states[o]
	switch {
	case !ok || !s.open:
		return 0
	case now.Before(s.openUntil):
		return s.openUntil.Sub(now)
	case now.Before(s.probeUntil):
		w := s.probeUntil.Sub(now)
		if b.recheck > 0 {
			w = min(w, b.recheck)
		}
		return w
	}
	return 0
}

// allow asks to attempt a delivery to o now. When the breaker's pause is
// over, the first attempt allowed is the probe.
func (b *originBreakers) allow(o string, now time.Time) (probe, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, found := b.states[o]
	if !found || !s.open {
		return false, true
	}
	if now.Before(s.openUntil) || now.Before(s.probeUntil) {
		return false, false
	}
	s.probeUntil = now.Add(b.probeLease)
	return true, true
}

// done records an attempt; it reports whether the breaker closed (a
// probe succeeded: retained deliveries may be released).
func (b *originBreakers) done(o string, probe, success bool, now time.Time) (recovered, opened bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, found := b.states[o]
	if success {
		if found {
			recovered = s.open && probe
			if s.open && !probe {
				return false, false // an attempt allowed before the trip
			}
			delete(b.states, o)
		}
		return recovered, false
	}
	if !found {
		s = &originState{}
		b.states[o] = s
	}
	if s.open {
		if probe {
			s.openUntil, s.probeUntil = now.Add(b.openFor), time.Time{}
			return false, true
		}
		return false, false
	}
	s.consecutive++
	if s.consecutive >= b.failures {
		s.open, s.openUntil, s.probeUntil = true, now.Add(b.openFor), time.Time{}
		return false, true
	}
	return false, false
}

// abort gives back the probe slot of an attempt that was not made after
// all (the manager is shutting down): nothing is recorded.
func (b *originBreakers) abort(o string, probe bool) {
	if !probe {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s, ok := b.states[o]; ok {
		s.probeUntil = time.Time{}
	}
}

// pausedUntil is when the pause of o's open breaker ends (false when it is
// not open).
func (b *originBreakers) pausedUntil(o string) (time.Time, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.states[o]
	if !ok || !s.open {
		return time.Time{}, false
	}
	return s.openUntil, true
}
