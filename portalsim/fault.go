package portalsim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Mode is the behaviour a simulated portal shows to every data call.
type Mode string

// The fault modes. The empty Mode behaves as Healthy.
const (
	// Healthy answers every call with its data.
	Healthy Mode = "healthy"
	// Slow answers with its data after Fault.Latency; the wait ends early
	// when the client goes away or the portal is closed.
	Slow Mode = "slow"
	// Flaky answers a fraction Fault.FailRate of calls with 503 (and
	// Retry-After when Fault.RetryAfter is set), the rest with data.
	Flaky Mode = "flaky"
	// Throttle answers every call with 429 and, when Fault.RetryAfter is
	// set, Retry-After: delay-seconds, except every HTTPDateEvery-th 429,
	// which carries the IMF-fixdate form, and a RateLimit field with r=0.
	Throttle Mode = "throttle"
	// Down closes the connection without answering: the client sees a
	// connection error, as with a portal whose process has crashed.
	Down Mode = "down"
	// Hang never answers: the call blocks until the client goes away or
	// the portal is closed.
	Hang Mode = "hang"
	// Error answers 200 with a body the aggregator cannot read, in the
	// portal's format: JSON or XML cut short, or an HTML page whose item
	// lacks its infraction number.
	Error Mode = "error"
	// Oversized answers 200 with a valid body of OversizedBytes in the
	// portal's format, streamed in chunks.
	Oversized Mode = "oversized"
	// Maintenance answers the lookups (by_domain, by_id) 200 with the
	// portal's maintenance page: {"mantenimiento": {…}} in JSON, an
	// m:mantenimiento element in the SOAP body, a div#mantenimiento in
	// HTML (the selectors AggregatorYAML writes as `unavailable` for the
	// SPEC 8 dialects; the JSON shapes of SPEC 6 declare none, so there the
	// page is merely unreadable). Other calls are served as by Healthy.
	Maintenance Mode = "maintenance"
	// Captcha answers the lookups with the challenge a portal serves a
	// client it takes for a robot, in the portal's own words: a page with
	// a div.g-recaptcha (ShapeDataJSON, ShapeDetran), a 200
	// {"error": true, "mensaje": "Debe completar el captcha", …}
	// (ShapeErrorFlag), a 500 {"code": "999", "message": "missing
	// captcha"} (ShapeNested). A shape without a challenge of its own
	// answers 403 with its usual error body. Real portals do it now and
	// then; here it lasts while the mode is set. Other calls are served as
	// by Healthy.
	Captcha Mode = "captcha"
	// Busy answers the lookups with a portal's "too many queries" page: a
	// rate limit said in the body only. HTML portals answer 200 with an h1
	// saying "Demasiadas consultas" (ShapeDetran: "Excesso de consultas"),
	// with no Retry-After; the others 429 without Retry-After, with their
	// usual error body. Other calls are served as by Healthy.
	Busy Mode = "busy"
)

// Modes lists every mode in a stable order.
func Modes() []Mode {
	return []Mode{Healthy, Slow, Flaky, Throttle, Down, Hang, Error, Oversized, Maintenance, Captcha, Busy}
}

// Valid reports whether m is a known mode (or empty, meaning Healthy).
func (m Mode) Valid() bool {
	switch m {
	case "", Healthy, Slow, Flaky, Throttle, Down, Hang, Error, Oversized, Maintenance, Captcha, Busy:
		return true
	}
	return false
}

// HTTPDateEvery is how often a throttling portal sends Retry-After as an
// HTTP date instead of delay-seconds: every HTTPDateEvery-th 429.
const HTTPDateEvery = 3

// OversizedBytes is the size of the body sent in Oversized mode: larger
// than the aggregator's default max_response_bytes (2 MiB).
const OversizedBytes = 4 << 20

// Fault is the behaviour of a portal. Its JSON form, used by the control
// endpoint, writes durations as Go duration strings:
//
//	{"mode": "flaky", "latency": "0s", "fail_rate": 0.5, "retry_after": "2s", "status": 0}
//
// The zero Fault is a healthy portal.
type Fault struct {
	Mode Mode `json:"mode"`
	// Latency delays every answer, in any mode but Hang. It is the point of
	// Slow; with other modes it makes their answer late as well.
	Latency time.Duration `json:"-"`
	// FailRate is the fraction (0 to 1) of calls a Flaky portal answers 503.
	FailRate float64 `json:"fail_rate"`
	// RetryAfter is sent as Retry-After (rounded up to whole seconds) with
	// the 429s of Throttle, the 503s of Flaky and a forced 429 or 503.
	RetryAfter time.Duration `json:"-"`
	// Status, when not zero, is the status of every answer (modes Down and
	// Hang, which never answer, excepted), with a small JSON body.
	Status int `json:"status"`
}

// faultJSON is the wire form of Fault.
type faultJSON struct {
	Mode       Mode    `json:"mode"`
	Latency    string  `json:"latency,omitempty"`
	FailRate   float64 `json:"fail_rate"`
	RetryAfter string  `json:"retry_after,omitempty"`
	Status     int     `json:"status"`
}

// MarshalJSON writes f with its durations as Go duration strings.
func (f Fault) MarshalJSON() ([]byte, error) {
	return json.Marshal(faultJSON{
		Mode:       f.mode(),
		Latency:    f.Latency.String(),
		FailRate:   f.FailRate,
		RetryAfter: f.RetryAfter.String(),
		Status:     f.Status,
	})
}

// UnmarshalJSON reads the form MarshalJSON writes. Unknown members and
// unparseable durations are errors; omitted members are zero, an omitted
// mode is Healthy. It does not check the values: see Validate.
func (f *Fault) UnmarshalJSON(b []byte) error {
	w := faultJSON{Mode: Healthy}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("fault: %w", err)
	}
	latency, err := parseDuration("fault: latency", w.Latency)
	if err != nil {
		return err
	}
	retryAfter, err := parseDuration("fault: retry_after", w.RetryAfter)
	if err != nil {
		return err
	}
	*f = Fault{Mode: w.Mode, Latency: latency, FailRate: w.FailRate, RetryAfter: retryAfter, Status: w.Status}
	return nil
}

func parseDuration(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", name, err)
	}
	return d, nil
}

// ErrInvalidFault is wrapped by every error of Fault.Validate.
var ErrInvalidFault = errors.New("invalid fault")

// Validate reports every impossible value of f: an unknown mode, a
// negative duration, a fail rate outside 0–1, a status outside 100–599.
func (f Fault) Validate() error {
	var errs []error
	if !f.Mode.Valid() {
		errs = append(errs, fmt.Errorf("%w: unknown mode %q (want one of %s)", ErrInvalidFault, f.Mode, modeList()))
	}
	if f.Latency < 0 {
		errs = append(errs, fmt.Errorf("%w: latency %s is negative", ErrInvalidFault, f.Latency))
	}
	if f.RetryAfter < 0 {
		errs = append(errs, fmt.Errorf("%w: retry_after %s is negative", ErrInvalidFault, f.RetryAfter))
	}
	if f.FailRate < 0 || f.FailRate > 1 || math.IsNaN(f.FailRate) {
		errs = append(errs, fmt.Errorf("%w: fail_rate %v is outside 0–1", ErrInvalidFault, f.FailRate))
	}
	if f.Status != 0 && (f.Status < 100 || f.Status > 599) {
		errs = append(errs, fmt.Errorf("%w: status %d is outside 100–599", ErrInvalidFault, f.Status))
	}
	return errors.Join(errs...)
}

func modeList() string {
	names := make([]string, 0, len(Modes()))
	for _, m := range Modes() {
		names = append(names, string(m))
	}
	return strings.Join(names, ", ")
}

// mode is f.Mode with the empty mode read as Healthy.
func (f Fault) mode() Mode {
	if f.Mode == "" {
		return Healthy
	}
	return f.Mode
}

// String describes f for people, e.g. "flaky (50% 503, Retry-After 2s)".
func (f Fault) String() string {
	var b strings.Builder
	b.WriteString(string(f.mode()))
	var details []string
	switch f.mode() {
	case Slow:
		details = append(details, f.Latency.String())
	case Flaky:
		details = append(details, fmt.Sprintf("%g%% 503", f.FailRate*100))
	case Throttle:
		details = append(details, "429")
	case Down:
		details = append(details, "connection closed")
	case Error:
		details = append(details, "unreadable body")
	case Oversized:
		details = append(details, fmt.Sprintf("%d MiB", OversizedBytes>>20))
	case Maintenance:
		details = append(details, "200 maintenance page")
	case Captcha:
		details = append(details, "challenge page")
	case Busy:
		details = append(details, "too-many-queries page")
	}
	if f.mode() != Slow && f.Latency > 0 {
		details = append(details, "+"+f.Latency.String())
	}
	if f.RetryAfter > 0 {
		details = append(details, "Retry-After "+f.RetryAfter.String())
	}
	if f.Status != 0 {
		details = append(details, fmt.Sprintf("status %d", f.Status))
	}
	if len(details) > 0 {
		fmt.Fprintf(&b, " (%s)", strings.Join(details, ", "))
	}
	return b.String()
}
