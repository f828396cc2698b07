package chaos

import (
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/multas/aggregator/breaker"
)

// transition is one breaker transition, as a replica logged it.
type transition struct {
	replica  int
	id       breaker.ID
	from, to breaker.State
	at       time.Time
	reason   string
}

// scope is whose half-open episodes are counted together: the fleet's
// (replica -1) when replicas share their breakers, else one replica's.
type scope struct {
	replica int
	id      breaker.ID
}

// probeStats sums up the half-open episodes checked so far.
type probeStats struct {
	Episodes int // half-open episodes checked
	Probes   int // calls that arrived at a portal during one
	// MaxPerEpisode is the most probes one episode saw; Reprobes counts
	// the probes after the first of their episode (allowed one after the
	// other when the earlier one's answer said nothing about capacity).
	MaxPerEpisode int
	Reprobes      int
	// MaxConcurrent is the most probes of one episode in flight at once.
	MaxConcurrent int
	// Replays counts the probes the replica's HTTP transport sent a second
	// time, on a new connection, after a reused one closed without an
	// answer (net/http does so for idempotent requests): one permit, one
	// attempt for the breaker, two requests for the portal, one after the
	// other.
	Replays int
	// Degraded counts the fleet episodes during which a replica decided on
	// local state, its Redis store unreachable.
	Degraded int
}

// episodes keeps every transition and checks the half-open episodes
// against the calls the portals received.
type episodes struct {
	shared bool

	mu          sync.Mutex
	events      map[scope][]transition
	transitions map[string]int          // "from→to"
	opens       map[string][]transition // transitions to open, by breaker key
	checked     map[scope]time.Time     // the start of the last episode checked
	stats       probeStats
	// degraded lists, per replica, when its Redis store was unreachable:
	// it then decides on local state, as an independent replica does.
	degraded map[int][]period
	// stalls, when set, tells how long the process could not run.
	stalls *stallMeter
	// leases are the probe leases of the sources whose lease is not the
	// default's.
	leases map[string]time.Duration
}

// lease is how long a probe of source may hold its half-open breaker.
func (e *episodes) lease(source string) time.Duration {
	if d, ok := e.leases[source]; ok {
		return d
	}
	return sourceTimeout + time.Second
}

// period is an interval of time; to is zero while it lasts.
type period struct{ from, to time.Time }

func (p period) overlaps(from, to time.Time) bool {
	return !p.from.After(to) && (p.to.IsZero() || !p.to.Before(from))
}

func newEpisodes(shared bool) *episodes {
	return &episodes{shared: shared, events: map[scope][]transition{}, transitions: map[string]int{},
		opens: map[string][]transition{}, checked: map[scope]time.Time{}, degraded: map[int][]period{}}
}

// scopeOf is the scope of a transition of replica at t: its own when
// replicas are independent, or when its shared store was degraded then.
func (e *episodes) scopeOf(replica int, id breaker.ID, t time.Time) scope {
	if e.shared && !e.degradedAt(replica, t, t) {
		replica = -1
	}
	return scope{replica: replica, id: id}
}

// degradedAt reports whether replica's store was degraded at some time
// in [from, to].
func (e *episodes) degradedAt(replica int, from, to time.Time) bool {
	for _, p := range e.degraded[replica] {
		if p.overlaps(from, to) {
			return true
		}
	}
	return false
}

// degrade records that replica's store went degraded (or came back) at t.
func (e *episodes) degrade(replica int, t time.Time, degraded bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ps := e.degraded[replica]
	switch {
	case degraded && (len(ps) == 0 || !ps[len(ps)-1].to.IsZero()):
		e.degraded[replica] = append(ps, period{from: t})
	case !degraded && len(ps) > 0 && ps[len(ps)-1].to.IsZero():
		ps[len(ps)-1].to = t
	}
}

// degradedPeriods returns every period of every replica's degraded store.
func (e *episodes) degradedPeriods() map[int][]period {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[int][]period, len(e.degraded))
	for r, ps := range e.degraded {
		out[r] = append([]period(nil), ps...)
	}
	return out
}

// add records a transition.
func (e *episodes) add(t transition) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.scopeOf(t.replica, t.id, t.at)
	e.events[s] = append(e.events[s], t)
	e.transitions[string(t.from)+"→"+string(t.to)]++
	if t.to == breaker.Open {
		e.opens[t.id.Key] = append(e.opens[t.id.Key], t)
	}
}

// check examines the half-open episodes that ended before upTo (all of
// them, the one still going included, when final) and not checked yet.
func (e *episodes) check(calls *callLog, upTo time.Time, final bool) []Violation {
	e.mu.Lock()
	defer e.mu.Unlock()
	calls.mu.Lock()
	defer calls.mu.Unlock()
	var out []Violation
	for s, evs := range e.events {
		sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
		for i, ev := range evs {
			if ev.to != breaker.HalfOpen || !ev.at.After(e.checked[s]) {
				continue
			}
			end := time.Unix(1<<40, 0)
			if i+1 < len(evs) {
				end = evs[i+1].at
			}
			// A replica's own episode, while its shared store was
			// degraded, ends when the store is back at the latest.
			if e.shared && s.replica >= 0 {
				for _, p := range e.degraded[s.replica] {
					if p.overlaps(ev.at, ev.at) && !p.to.IsZero() && p.to.Before(end) {
						end = p.to
					}
				}
			}
			if !final && !end.Before(upTo) {
				break
			}
			e.checked[s] = ev.at
			out = append(out, e.episode(s, ev.at, end, calls.byBreaker[s.id])...)
		}
	}
	return out
}

// episode checks the probes of one half-open episode [start, end] among
// the calls of its breaker, in order of arrival.
func (e *episodes) episode(s scope, start, end time.Time, all []*call) []Violation {
	first := sort.Search(len(all), func(i int) bool { return !all[i].arrived.Before(start) })
	var probes []*call
	degraded := false
	for _, c := range all[first:] {
		if c.arrived.After(end) {
			break
		}
		switch {
		case s.replica >= 0 && c.replica != s.replica:
		case s.replica < 0 && e.degradedAt(c.replica, c.sent().Add(-permitSlack), c.sent()):
			// On local state, the replica had its own breaker when it
			// let this call go: it counts in its own episodes.
			degraded = true
		case c.replay:
			e.stats.Replays++ // the same probe, sent again by the transport
		default:
			probes = append(probes, c)
		}
	}
	if degraded {
		e.stats.Degraded++
	}
	e.stats.Episodes++
	e.stats.Probes += len(probes)
	e.stats.MaxPerEpisode = max(e.stats.MaxPerEpisode, len(probes))
	if len(probes) > 1 {
		e.stats.Reprobes += len(probes) - 1
	}
	who := "the fleet"
	if s.replica >= 0 {
		who = fmt.Sprintf("replica %d", s.replica+1)
	}
	var out []Violation
	for i, c := range probes {
		concurrent := 1
		for _, p := range probes[:i] {
			// A probe whose lease ran out may be followed by another.
			leased := c.arrived.Sub(p.sent()) < e.lease(s.id.Key)
			switch {
			case leased && c.arrived.Before(p.inFlightUntil()):
				concurrent++
				out = append(out, Violation{At: c.arrived, Kind: KindProbe, Detail: fmt.Sprintf(
					"%s, %s: half-open since %s: probe %d arrived %s after probe %d, which was still in flight (%s)",
					s.id, who, clock(start), i+1, c.arrived.Sub(p.arrived).Round(time.Millisecond), indexOf(probes, p)+1, p.describe())})
			case leased && e.decided(p):
				out = append(out, Violation{At: c.arrived, Kind: KindProbe, Detail: fmt.Sprintf(
					"%s, %s: half-open since %s: probe %d arrived after probe %d had been answered cleanly (%s), which should have ended the episode",
					s.id, who, clock(start), i+1, indexOf(probes, p)+1, p.describe())})
			}
		}
		e.stats.MaxConcurrent = max(e.stats.MaxConcurrent, concurrent)
	}
	return out
}

// decided reports whether the answer to probe c decided its episode (see
// call.decisive). A failure status counts only if the call ended with
// time to spare before its deadline once the stalls are deducted: the
// aggregator takes a failure that ends as its query's budget runs out for
// a cut by the deadline, which says nothing about capacity.
func (e *episodes) decided(c *call) bool {
	if !c.decisive() {
		return false
	}
	if c.status < 500 || e.stalls == nil {
		return true
	}
	return c.deadline.Sub(c.end)-e.stalls.during(c.end, c.deadline) > spare
}

// permitSlack is how long before the call went its breaker's permit may
// have been given.
const permitSlack = 50 * time.Millisecond

// sent is when the replica sent c, or when it arrived for a call without
// an id.
func (c *call) sent() time.Time {
	if c.start.IsZero() {
		return c.arrived
	}
	return c.start
}

func (c *call) describe() string {
	return fmt.Sprintf("fault %s, status %d, from replica %d", c.kindIn, c.status, c.replica+1)
}

func indexOf(cs []*call, c *call) int {
	for i, x := range cs {
		if x == c {
			return i
		}
	}
	return -1
}

func clock(t time.Time) string { return t.Format("15:04:05.000") }

// snapshot returns the counts of transitions and the probe statistics.
func (e *episodes) snapshot() (map[string]int, probeStats) {
	e.mu.Lock()
	defer e.mu.Unlock()
	tr := make(map[string]int, len(e.transitions))
	for k, v := range e.transitions {
		tr[k] = v
	}
	return tr, e.stats
}

// opened returns the transitions to open of breaker key.
func (e *episodes) opened(key string) []transition {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]transition(nil), e.opens[key]...)
}
