package chaos

import (
	"fmt"
	"time"
)

// Variant says where the replicas keep breaker and rate-limit state.
type Variant string

// The variants.
const (
	// Memory replicas keep their state to themselves: each has its own
	// breakers, so each may probe a recovering portal once.
	Memory Variant = "memory"
	// Redis replicas share breaker and rate-limit state through Redis:
	// one probe per breaker for the whole fleet.
	Redis Variant = "redis"
)

// Options configure a run. Zero values are the defaults written next to
// each field.
type Options struct {
	Variant Variant
	// RedisURL is the Redis of the Redis variant (redis://host:port/db).
	// The run keeps its keys under a prefix of its own and deletes them.
	RedisURL string

	// Duration is how long the faults change under load: 45s. The
	// recovery check comes after it.
	Duration time.Duration
	// Portals is the number of simulated portals: 20.
	Portals int
	// Replicas is the number of aggregator replicas: 3.
	Replicas int
	// Workers is the number of clients issuing requests, each one at a
	// time with a pause of Think between them: 4.
	Workers int
	// Think is the mean pause between a worker's requests: 100ms.
	Think time.Duration
	// QueryTimeout is the timeout parameter of every query: 1s.
	QueryTimeout time.Duration
	// Margin is how far past its budget an answer may come: 500ms.
	Margin time.Duration
	// RecoveryBound is how long every breaker may take to close once every
	// portal is healthy: 20s.
	RecoveryBound time.Duration
	// Seed makes the data and the fault schedule repeatable; 0 picks one.
	Seed uint64
	// Progress, when set, hears of the run's phases, one line each.
	Progress func(format string, args ...any)
}

// The aggregator settings of every run, small enough that breakers trip,
// open and recover many times within a run.
const (
	sourceTimeout  = 600 * time.Millisecond
	longTimeout    = 1500 * time.Millisecond // of a few sources: longer than a query's budget
	openFor        = 2 * time.Second
	breakerWindow  = 10 * time.Second
	breakerMin     = 5
	maxDeadline    = 2 * time.Second // the budget of a voucher
	maxRetryAfter  = 3 * time.Second // the longest Retry-After the schedule sends
	adminToken     = "chaos-admin-token"
	problemBaseURI = "https://errors.chaos.test/problems/"
)

func (o Options) withDefaults() (Options, error) {
	set := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	setD := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	set(&o.Portals, 20)
	set(&o.Replicas, 3)
	set(&o.Workers, 4)
	setD(&o.Duration, 45*time.Second)
	setD(&o.Think, 100*time.Millisecond)
	setD(&o.QueryTimeout, time.Second)
	setD(&o.Margin, 500*time.Millisecond)
	setD(&o.RecoveryBound, 20*time.Second)
	if o.Progress == nil {
		o.Progress = func(string, ...any) {}
	}
	switch o.Variant {
	case Memory:
	case Redis:
		if o.RedisURL == "" {
			return o, fmt.Errorf("chaos: the %s variant needs a Redis URL", o.Variant)
		}
	default:
		return o, fmt.Errorf("chaos: unknown variant %q (want %s or %s)", o.Variant, Memory, Redis)
	}
	if o.QueryTimeout > maxDeadline {
		return o, fmt.Errorf("chaos: query timeout %s is above the replicas' max_deadline %s", o.QueryTimeout, maxDeadline)
	}
	return o, nil
}
