package breaker

import (
	"context"
	"time"
)

// Store holds the state of breakers and makes every decision about one
// breaker atomically. Implementations: the in-process MemoryStore, and a
// shared one for replicas. Each method returns the transitions it made, for
// the Set to publish; now comes from the Set's clock.
type Store interface {
	// Allow asks for a permit to call id now, or refuses with *OpenError.
	Allow(ctx context.Context, id ID, s Settings, now time.Time) (Permit, []Event, error)
	// Done records the verdict of a permitted call, even when ctx has
	// ended (a call that ran to its deadline has a verdict too): a store
	// that waits on anything bounds the wait itself.
	Done(ctx context.Context, id ID, p Permit, v Verdict, r Report, s Settings, now time.Time) ([]Event, error)
	// Reset forces id closed, counts cleared.
	Reset(ctx context.Context, id ID, s Settings, now time.Time) ([]Event, error)
	// ForceOpen forces id open until reset.
	ForceOpen(ctx context.Context, id ID, s Settings, now time.Time) ([]Event, error)
	// Status reads id, turning open into half-open when its time has passed.
	Status(ctx context.Context, id ID, s Settings, now time.Time) (Status, []Event, error)
}

// Permit lets one call go. Token and Gen are the store's own
// bookkeeping; a Permit without a Token means the store failed at Allow.
type Permit struct {
	// Probe is true for the single call of a half-open breaker.
	Probe bool
	Token any
	// Gen is free for the store's use: what it would otherwise box into
	// Token with a pointer, at one allocation a call.
	Gen uint64
}

// Notifier is a Store that also makes transitions outside the Set's calls
// (a shared store sending its counts in the background, where the trip is
// decided): NewSet hands it the function that publishes them as the Set's
// own (event log, log line, OnTransition).
type Notifier interface {
	Notify(publish func([]Event))
}
