// Package chaos runs the aggregator under injected faults and steady load
// and checks, continuously, the invariants its users rely on (issue 8).
//
// A run starts simulated portals on loopback (package portalsim, plus two
// faults of its own: slowloris bodies and connections reset mid-body) whose
// faults change on a schedule, three aggregator replicas built exactly as
// production builds them (app.New), either independent (Memory) or sharing
// breaker and rate-limit state through Redis (Redis), and a few workers that
// query them by plate and by CUIT and fetch vouchers. Everything listens on
// 127.0.0.1 only.
//
// Every violation is recorded with its details in the Report:
//
//   - every answer is well formed: a status the query may answer (200 or the
//     503 no-source-available for queries; 200, 502, 503 or 504 for
//     vouchers; never a 400), valid against api/openapi.yaml, consistent
//     (summary counts, a problem on every entry that did not succeed,
//     Cache-Control: no-store), and a voucher is a whole PDF;
//   - every answer comes within its budget plus a margin;
//   - every breaker closes again once its portal recovers: at the end every
//     portal is made healthy and every breaker of every replica must be
//     closed within a bound;
//   - no portal receives more than one probe at a time per breaker and
//     half-open episode (fleet-wide with Redis, per replica without), nor a
//     probe after one whose answer decided the episode;
//   - a portal whose only fault is a 429 storm never has a breaker opened;
//   - no plate or CUIT used by the run appears in any log line, metric,
//     event or admin output.
//
// How probes are counted: each replica's transport tags every portal call
// with a call id (header X-Chaos-Call); the recorder in front of each portal
// notes when the call arrived and ended and what the portal answered; the
// breaker transitions come from the replicas' structured logs. A half-open
// episode is the interval between a transition to half_open and the next
// transition of that breaker; the calls that arrived at the portal within it
// are its probes. SPEC 4.1 frees the probe slot when a probe's answer says
// nothing about capacity (a 429, an unreadable answer, a call cut by its
// query's deadline), so an episode may see several probes one after the
// other; two in flight at once, or one after a probe that was answered
// cleanly (data, or a 5xx of failure_statuses, read in full well within
// its deadlines), is a violation.
//
// TestChaos runs the short mode; cmd/chaos runs the long one.
package chaos
