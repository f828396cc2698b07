package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"
)

// The kinds of violation, one per invariant.
const (
	KindMalformed = "malformed"      // not valid against the contract, or inconsistent
	KindStatus    = "status"         // a status the request may not answer
	KindLatency   = "latency"        // later than budget + margin
	KindRecovery  = "recovery"       // a breaker did not close after its portal recovered
	KindProbe     = "probe"          // more than one probe at a time, or after a decisive one
	KindThrottle  = "throttle-opens" // a 429 storm opened a breaker
	KindPII       = "pii"            // a plate or CUIT in an output
	KindTransport = "transport"      // a request to a replica failed
)

// Violation is one broken invariant.
type Violation struct {
	At     time.Time
	Kind   string
	Detail string
}

func (v Violation) String() string { return fmt.Sprintf("%s [%s] %s", clock(v.At), v.Kind, v.Detail) }

// maxDetails bounds the violations a report keeps in full; all are counted.
const maxDetails = 200

// PortalReport is what one portal went through.
type PortalReport struct {
	ID, Profile string
	Faults      []Kind // the kinds of fault it had
	Calls       int64  // data calls it received
	Opens       int    // transitions to open of its breakers
}

// Report is the outcome of a run.
type Report struct {
	Variant              Variant
	Seed                 uint64
	Portals, Replicas    int
	Workers              int
	Duration             time.Duration // the chaos phase
	Recovery             time.Duration // from every portal healthy to every breaker closed
	QueryTimeout, Margin time.Duration
	Requests             map[string]int64 // by kind: by_domain, by_id, voucher, recovery
	Statuses             map[string]int64 // "by_domain 200", "voucher 503"…
	Outcomes             map[string]int64 // per source entry and voucher: succeeded or the problem's slug
	Latency              latencyStats
	Transitions          map[string]int
	Probes               probeStats
	PortalCalls          int64
	Replays              int64            // portal calls the replicas' transports sent again (see probeStats.Replays)
	ClientReplays        int64            // requests the workers' transport sent again to a replica
	Warnings             map[string]int64 // log records at warning level or above, by level and message
	// DegradedPeriods counts the times a replica's Redis store was
	// unreachable (it then decides on local state), DegradedTime their
	// total length.
	DegradedPeriods int
	DegradedTime    time.Duration
	// Stalled is the time the process could not run (see stallMeter),
	// LongestStall the longest such stretch.
	Stalled, LongestStall    time.Duration
	PortalList               []PortalReport
	ThrottleOnly             []string // portals whose only fault was 429 storms
	LogLines, OutputsScanned int64
	Violations               []Violation    // the first maxDetails
	ViolationCounts          map[string]int // all of them, by kind
}

// Failed reports whether any invariant was broken.
func (r *Report) Failed() bool { return len(r.ViolationCounts) > 0 }

// latencyStats are the answers' latencies.
type latencyStats struct {
	// P50, P99 and Max are as the clients measured them; ClientMaxOver is
	// the latest answer past its budget, as the client measured it.
	P50, P99, Max time.Duration
	ClientMaxOver time.Duration
	// HandlerMax is the longest a replica's handler took over a request.
	HandlerMax time.Duration
	// OverBudget counts the answers whose handling took longer than their
	// budget (allowed up to the margin); MaxOverBudget is the latest of
	// them past the budget.
	OverBudget    int64
	MaxOverBudget time.Duration
	// Excused counts the answers later than budget + margin only by time
	// the process spent stalled; MaxExcused is the latest of them.
	Excused    int64
	MaxExcused time.Duration
}

// WriteSummary writes the summary tables of r.
func (r *Report) WriteSummary(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	p := func(format string, args ...any) { fmt.Fprintf(tw, format, args...) }
	p("chaos run\tvariant %s, seed %d, %d portals, %d replicas, %d workers, chaos %s, recovery %s\n",
		r.Variant, r.Seed, r.Portals, r.Replicas, r.Workers, r.Duration.Round(time.Second), r.Recovery.Round(time.Millisecond))
	p("\n")
	p("requests\tby_domain\tby_id\tvoucher\trecovery\ttotal\n")
	total := int64(0)
	for _, v := range r.Requests {
		total += v
	}
	p("\t%d\t%d\t%d\t%d\t%d\n", r.Requests["by_domain"], r.Requests["by_id"], r.Requests["voucher"], r.Requests["recovery"], total)
	p("\n")
	p("answers\t%s\n", joinCounts(r.Statuses))
	p("source outcomes\t%s\n", joinCounts(r.Outcomes))
	p("\n")
	p("latency at the client\tp50 %s, p99 %s, max %s; the latest answer came %s past its budget; %d requests sent again by the client's transport\n",
		r.Latency.P50.Round(time.Millisecond), r.Latency.P99.Round(time.Millisecond), r.Latency.Max.Round(time.Millisecond),
		r.Latency.ClientMaxOver.Round(time.Millisecond), r.ClientReplays)
	p("latency in the handler\tmax %s; over budget (query %s, voucher %s): %d, by at most %s (margin %s)\n",
		r.Latency.HandlerMax.Round(time.Millisecond), r.QueryTimeout, maxDeadline, r.Latency.OverBudget,
		r.Latency.MaxOverBudget.Round(time.Millisecond), r.Margin)
	p("stalls\tthe process could not run for %s in all, %s at most at once; %d answers beyond the margin only by such stalls (by at most %s)\n",
		r.Stalled.Round(time.Millisecond), r.LongestStall.Round(time.Millisecond), r.Latency.Excused, r.Latency.MaxExcused.Round(time.Millisecond))
	p("\n")
	p("transitions\t%s\n", joinCounts(intCounts(r.Transitions)))
	p("half-open\t%d episodes, %d probes, at most %d per episode (%d after a neutral one), at most %d in flight at once\n",
		r.Probes.Episodes, r.Probes.Probes, r.Probes.MaxPerEpisode, r.Probes.Reprobes, r.Probes.MaxConcurrent)
	p("429-only portals\t%s\n", orNone(strings.Join(r.ThrottleOnly, ", ")))
	p("PII\t%d log lines and %d outputs scanned\n", r.LogLines, r.OutputsScanned)
	p("portal calls\t%d, of which %d replayed by the transport (%d of them probes)\n", r.PortalCalls, r.Replays, r.Probes.Replays)
	p("replica warnings\t%s\n", joinCounts(r.Warnings))
	if r.Variant == Redis {
		p("redis degraded\t%d periods, %s in all; %d fleet half-open episodes had a replica on local state\n",
			r.DegradedPeriods, r.DegradedTime.Round(time.Millisecond), r.Probes.Degraded)
	}
	p("\n")
	p("portal\tprofile\tcalls\topens\tfaults\n")
	for _, pr := range r.PortalList {
		kinds := make([]string, len(pr.Faults))
		for i, k := range pr.Faults {
			kinds[i] = string(k)
		}
		p("%s\t%s\t%d\t%d\t%s\n", pr.ID, pr.Profile, pr.Calls, pr.Opens, orNone(strings.Join(kinds, ", ")))
	}
	p("\n")
	n := 0
	for _, v := range r.ViolationCounts {
		n += v
	}
	p("violations\t%d\t%s\n", n, joinCounts(intCounts(r.ViolationCounts)))
	tw.Flush()
	for _, v := range r.Violations {
		fmt.Fprintf(w, "  %s\n", v)
	}
	if n > len(r.Violations) {
		fmt.Fprintf(w, "  … and %d more\n", n-len(r.Violations))
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func intCounts(m map[string]int) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = int64(v)
	}
	return out
}

// joinCounts writes "a 3, b 2" sorted by key.
func joinCounts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return orNone(strings.Join(parts, ", "))
}

// tally gathers what the run observes, from many goroutines.
type tally struct {
	mu            sync.Mutex
	requests      map[string]int64
	statuses      map[string]int64
	outcomes      map[string]int64
	latencies     []time.Duration
	overBudget    int64
	maxOver       time.Duration
	clientMaxOver time.Duration
	handlerMax    time.Duration
	excused       int64
	maxExcused    time.Duration
	violations    []Violation
	counts        map[string]int
	warnings      map[string]int64
	clientReplays int64
	onViolate     func(Violation)
}

func newTally(onViolate func(Violation)) *tally {
	return &tally{requests: map[string]int64{}, statuses: map[string]int64{}, outcomes: map[string]int64{},
		counts: map[string]int{}, warnings: map[string]int64{}, onViolate: onViolate}
}

func (t *tally) violate(vs ...Violation) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, v := range vs {
		if v.At.IsZero() {
			v.At = time.Now()
		}
		t.counts[v.Kind]++
		if len(t.violations) < maxDetails {
			t.violations = append(t.violations, v)
		}
		if t.onViolate != nil {
			t.onViolate(v)
		}
	}
}

func (t *tally) latencyStats() latencyStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	ls := append([]time.Duration(nil), t.latencies...)
	sort.Slice(ls, func(i, j int) bool { return ls[i] < ls[j] })
	s := latencyStats{OverBudget: t.overBudget, MaxOverBudget: t.maxOver, Excused: t.excused, MaxExcused: t.maxExcused,
		ClientMaxOver: max(t.clientMaxOver, 0), HandlerMax: t.handlerMax}
	if len(ls) > 0 {
		s.P50 = ls[len(ls)/2]
		s.P99 = ls[min(len(ls)-1, len(ls)*99/100)]
		s.Max = ls[len(ls)-1]
	}
	return s
}
