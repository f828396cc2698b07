package chaos

import (
	"context"
	"math/rand/v2"
	"time"
)

// allKinds lists every kind of fault in a stable order.
var allKinds = []Kind{Healthy, Slow, Flaky, Throttle, Down, Hang, ServerError, InvalidJSON, Oversized, Slowloris, ResetMidBody}

// phase is one stretch of a portal's schedule.
type phase struct {
	fault Fault
	d     time.Duration
}

// profile is how one portal's faults change: next gives the phase after
// step phases (step 0 is the first).
type profile struct {
	name string
	next func(rng *rand.Rand, step int) phase
	// timeout is the source's own timeout when not the default: longer
	// than a query's budget, so that the budget must cut its calls.
	timeout time.Duration
}

// withTimeout is p with the source timeout d.
func (p profile) withTimeout(d time.Duration) profile {
	p.timeout = d
	return p
}

// sourceTimeout is the timeout of the source of a portal of profile p.
func (p profile) sourceTimeout() time.Duration {
	if p.timeout > 0 {
		return p.timeout
	}
	return sourceTimeout
}

// lease is how long a probe of the source may hold its half-open breaker:
// the aggregator gives its timeout and a second (app.New).
func (p profile) lease() time.Duration { return p.sourceTimeout() + time.Second }

// between is a random duration in [lo, hi].
func between(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)+1))
}

// alternate is healthy for healthy, then fault() for faulty, and again;
// the first healthy stretch is random so that portals do not move in step.
func alternate(name string, healthy, faulty [2]time.Duration, fault func(rng *rand.Rand) Fault) profile {
	return profile{name: name, next: func(rng *rand.Rand, step int) phase {
		switch {
		case step == 0:
			return phase{Fault{Kind: Healthy}, between(rng, time.Second, healthy[1])}
		case step%2 == 0:
			return phase{Fault{Kind: Healthy}, between(rng, healthy[0], healthy[1])}
		}
		return phase{fault(rng), between(rng, faulty[0], faulty[1])}
	}}
}

func constant(f Fault) func(*rand.Rand) Fault { return func(*rand.Rand) Fault { return f } }

var (
	gap   = [2]time.Duration{3 * time.Second, 6 * time.Second}
	spell = [2]time.Duration{3 * time.Second, 8 * time.Second}
	flap  = [2]time.Duration{2 * time.Second, 3 * time.Second}
)

// profiles is the cast of a run, one per portal in this order (repeated
// when there are more than twenty portals).
var profiles = []profile{
	alternate("steady", gap, gap, constant(Fault{Kind: Healthy})),
	alternate("429 storms", gap, spell, func(rng *rand.Rand) Fault {
		return Fault{Kind: Throttle, RetryAfter: between(rng, 1, 2) * time.Second}
	}),
	alternate("down", gap, spell, constant(Fault{Kind: Down})),
	alternate("hanging", gap, spell, constant(Fault{Kind: Hang})).withTimeout(longTimeout),
	alternate("503 bursts", gap, spell, func(rng *rand.Rand) Fault {
		return Fault{Kind: Flaky, FailRate: 1, RetryAfter: between(rng, 1, 3) * time.Second}
	}),
	alternate("flaky 50%", gap, spell, constant(Fault{Kind: Flaky, FailRate: 0.5})),
	alternate("slow", gap, spell, func(rng *rand.Rand) Fault {
		return Fault{Kind: Slow, Latency: between(rng, 200*time.Millisecond, 1200*time.Millisecond)}
	}).withTimeout(longTimeout),
	alternate("invalid JSON", gap, spell, constant(Fault{Kind: InvalidJSON})),
	alternate("oversized", gap, spell, constant(Fault{Kind: Oversized})),
	alternate("flapping down", flap, flap, constant(Fault{Kind: Down})),
	alternate("slowloris", gap, spell, constant(Fault{Kind: Slowloris})),
	alternate("reset mid-body", gap, spell, constant(Fault{Kind: ResetMidBody})),
	alternate("steady", gap, gap, constant(Fault{Kind: Healthy})),
	alternate("429 storms", gap, spell, func(rng *rand.Rand) Fault {
		return Fault{Kind: Throttle, RetryAfter: 2 * time.Second}
	}),
	alternate("500 bursts", gap, spell, constant(Fault{Kind: ServerError})),
	alternate("flapping 503", flap, flap, constant(Fault{Kind: Flaky, FailRate: 1})),
	mixed, mixed, mixed, mixed,
}

// mixed draws every phase at random among all the faults.
var mixed = profile{name: "mixed", next: func(rng *rand.Rand, step int) phase {
	if step%2 == 0 {
		return phase{Fault{Kind: Healthy}, between(rng, 2*time.Second, 5*time.Second)}
	}
	f := Fault{Kind: allKinds[1+rng.IntN(len(allKinds)-1)]}
	switch f.Kind {
	case Slow:
		f.Latency = between(rng, 200*time.Millisecond, 1200*time.Millisecond)
	case Flaky:
		f.FailRate = []float64{0.3, 0.7, 1}[rng.IntN(3)]
		if rng.IntN(2) == 0 {
			f.RetryAfter = between(rng, 1, 3) * time.Second
		}
	case Throttle:
		f.RetryAfter = between(rng, 1, 3) * time.Second
	}
	return phase{f, between(rng, 2*time.Second, 6*time.Second)}
}}

// profileOf is the profile of the i-th portal.
func profileOf(i int) profile { return profiles[i%len(profiles)] }

// play changes p's fault along its profile until ctx ends, then makes it
// healthy.
func (p *portal) play(ctx context.Context, rng *rand.Rand) {
	defer p.set(Fault{Kind: Healthy})
	t := time.NewTimer(0)
	defer t.Stop()
	<-t.C
	for step := 0; ; step++ {
		ph := p.profile.next(rng, step)
		p.set(ph.fault)
		t.Reset(ph.d)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
