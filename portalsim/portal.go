// Package portalsim simulates the jurisdictions' infraction portals, with
// faults that can be changed at run time, for tests, benchmarks and the
// demo. Each Portal is an http.Handler speaking one dialect (Shape): three
// JSON dialects that SPEC 6's mapping reads, and the dialects of SPEC 8 (a
// SOAP service, an HTML table in windows-1252, a paginated JSON API, a
// JSON API behind OAuth2 client credentials, a site that needs a session
// page first). AggregatorYAML writes the aggregator's mapping of each;
// NewJurisdiction serves given records in any dialect; Server runs several
// portals on loopback listeners; Demo and DialectDemo are ready-made sets.
//
// Besides its data paths, every portal serves a control endpoint that is
// never counted nor subject to faults:
//
//	GET  /_sim/fault            the current Fault as JSON
//	PUT  /_sim/fault            set it (400 on bad JSON or impossible values)
//	GET  /_sim/calls            CallStats as JSON
//	POST /_sim/calls/reset      zero the counts (204)
//	POST /_sim/tokens/revoke    invalidate every OAuth2 token issued (204)
//	POST /_sim/sessions/expire  end every session (204)
//
// The simulator never logs plates, CUITs or DNIs.
package portalsim

import (
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Portal is one simulated jurisdiction portal. It is an http.Handler and is
// safe for concurrent use. Close it when done: that releases hanging and
// sleeping calls.
type Portal struct {
	j   Jurisdiction
	d   *dialect
	mux *http.ServeMux

	byDomain map[string][]Record // by normalised plate
	byID     map[string][]Record // by CUIT digits and by DNI without leading zeros
	byNumber map[string]Record   // by infraction id

	fault     atomic.Pointer[Fault]
	throttled atomic.Uint64 // 429s sent, for HTTPDateEvery

	rngMu sync.Mutex
	rng   *rand.Rand

	calls *counter

	tokens   *tokenStore   // ShapeOAuth2
	sessions *sessionStore // ShapeSession

	closeOnce sync.Once
	done      chan struct{} // closed by Close

	// started is when the portal was built: records with an After appear
	// that long after it.
	started time.Time
}

// New builds the portal of j. It panics if j is not valid (see
// Jurisdiction.Validate), as a ServeMux does with a bad pattern: check
// jurisdictions read from outside with Validate first.
func New(j Jurisdiction) *Portal {
	if err := j.Validate(); err != nil {
		panic(err)
	}
	d, _ := dialectOf(j.Shape)
	j = j.withDefaults()
	seed := j.Seed
	if seed == 0 {
		h := fnv.New64a()
		h.Write([]byte(j.ID))
		seed = h.Sum64()
	}
	p := &Portal{
		j:        j,
		d:        d,
		mux:      http.NewServeMux(),
		byDomain: make(map[string][]Record),
		byID:     make(map[string][]Record),
		byNumber: make(map[string]Record, len(j.Records)),
		rng:      rand.New(rand.NewPCG(seed, seed>>1|1)),
		calls:    newCounter(),
		tokens:   newTokenStore(),
		sessions: newSessionStore(),
		done:     make(chan struct{}),
		started:  time.Now(),
	}
	for _, r := range j.Records {
		if k := normalDomain(r.Domain); k != "" {
			p.byDomain[k] = append(p.byDomain[k], r)
		}
		if k := digits(r.CUIT); k != "" {
			p.byID[k] = append(p.byID[k], r)
		}
		if k := dniKey(r.DNI); k != "" {
			p.byID[k] = append(p.byID[k], r)
		}
		p.byNumber[r.ID] = r
	}
	f := j.Fault
	f.Mode = f.mode()
	p.fault.Store(&f)
	p.routes()
	return p
}

// dniKey is the lookup key of a DNI: digits only, without leading zeros.
func dniKey(s string) string { return strings.TrimLeft(digits(s), "0") }

func (p *Portal) routes() {
	p.mux.HandleFunc("/_sim/fault", p.handleFault)
	p.mux.HandleFunc("/_sim/calls", p.handleCalls)
	p.mux.HandleFunc("/_sim/calls/reset", p.handleCallsReset)
	p.mux.HandleFunc("/_sim/tokens/revoke", p.handleRevokeTokens)
	p.mux.HandleFunc("/_sim/sessions/expire", p.handleExpireSessions)
	p.mux.HandleFunc("/_sim/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody("no such control endpoint"))
	})
	for _, rt := range p.d.routes() {
		p.mux.Handle(rt.pattern, p.handleData(rt))
	}
	if p.d.extra != nil {
		p.d.extra(p)
	}
	p.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		p.call(w, r, kindOther, func() {
			p.fail(w, http.StatusNotFound, "recurso inexistente")
		})
	})
}

// ID is the jurisdiction's source id.
func (p *Portal) ID() string { return p.j.ID }

// Name is the jurisdiction's name.
func (p *Portal) Name() string { return p.j.Name }

// Shape is the dialect the portal speaks.
func (p *Portal) Shape() Shape { return p.j.Shape }

// Jurisdiction is what the portal was built from, with its initial fault
// and the defaults of its settings written out.
func (p *Portal) Jurisdiction() Jurisdiction { return p.j.withDefaults() }

// ServeHTTP answers r as the portal would, with the current fault.
func (p *Portal) ServeHTTP(w http.ResponseWriter, r *http.Request) { p.mux.ServeHTTP(w, r) }

// Fault is the current behaviour, its Mode never empty.
func (p *Portal) Fault() Fault { return *p.fault.Load() }

// SetFault changes the behaviour from the next call on (calls already
// waiting keep theirs). An invalid f (see Fault.Validate) is refused with
// its error and the fault is left as it was.
func (p *Portal) SetFault(f Fault) error {
	if err := f.Validate(); err != nil {
		return err
	}
	f.Mode = f.mode()
	p.fault.Store(&f)
	return nil
}

// Calls is a snapshot of the call counts.
func (p *Portal) Calls() CallStats { return p.calls.snapshot() }

// ResetCalls zeroes the call counts.
func (p *Portal) ResetCalls() { p.calls.reset() }

// Close releases every call that hangs or sleeps (their connections are
// closed without an answer), makes every later data call fail the same
// way, and waits for the calls in flight to return. It is idempotent.
// A call stuck writing to a client that does not read returns only when
// its connection closes: close the portal's server too (Server does).
func (p *Portal) Close() {
	p.release()
	p.calls.waitIdle()
}

func (p *Portal) release() { p.closeOnce.Do(func() { close(p.done) }) }

func (p *Portal) closed() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// chance reports true with probability rate, from the portal's seeded source.
func (p *Portal) chance(rate float64) bool {
	p.rngMu.Lock()
	v := p.rng.Float64()
	p.rngMu.Unlock()
	return v < rate
}

// call counts a data call and applies the current fault; answer runs only
// when the fault lets the call through to the data. Every answer a fault
// makes is in the dialect's format.
func (p *Portal) call(w http.ResponseWriter, r *http.Request, k kind, answer func()) {
	p.calls.begin(k)
	defer p.calls.end()
	f := p.Fault()
	if p.closed() {
		abort(w)
		return
	}
	if f.mode() == Hang {
		select {
		case <-r.Context().Done():
		case <-p.done:
			abort(w)
		}
		return
	}
	if f.Latency > 0 && !p.sleep(w, r, f.Latency) {
		return
	}
	if f.mode() == Down {
		abort(w)
		return
	}
	if f.Status != 0 {
		setRetryAfter(w, f.RetryAfter)
		p.fail(w, f.Status, http.StatusText(f.Status))
		return
	}
	switch f.mode() {
	case Flaky:
		if p.chance(f.FailRate) {
			setRetryAfter(w, f.RetryAfter)
			p.fail(w, http.StatusServiceUnavailable, "Servicio temporalmente no disponible")
			return
		}
	case Throttle:
		p.throttle(w, f.RetryAfter)
		return
	case Error:
		p.garbage(w, r)
		return
	case Oversized:
		p.oversized(w, r)
		return
	case Maintenance, Captcha, Busy:
		if k.lookup() {
			p.refusal(w, f.mode())
			return
		}
	}
	answer()
}

// sleep waits d; false means the call must end: its client went away, or
// the portal closed (then its connection is closed too).
func (p *Portal) sleep(w http.ResponseWriter, r *http.Request, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	case <-p.done:
		abort(w)
		return false
	}
}

// throttle answers 429 with Retry-After (delay-seconds, or an HTTP date
// every HTTPDateEvery-th time) and RateLimit r=0 when d > 0.
func (p *Portal) throttle(w http.ResponseWriter, d time.Duration) {
	n := p.throttled.Add(1)
	if d > 0 {
		secs := ceilSeconds(d)
		if n%HTTPDateEvery == 0 {
			at := time.Now().Add(d)
			if at.Truncate(time.Second) != at {
				at = at.Truncate(time.Second).Add(time.Second)
			}
			w.Header().Set("Retry-After", at.UTC().Format(http.TimeFormat))
		} else {
			w.Header().Set("Retry-After", secs)
		}
		w.Header().Set("RateLimit", `"default";r=0;t=`+secs)
	}
	p.fail(w, http.StatusTooManyRequests, "Demasiadas solicitudes")
}

// oversized streams a valid body of at least OversizedBytes in the
// dialect's format.
func (p *Portal) oversized(w http.ResponseWriter, r *http.Request) {
	pad := p.d.padding()
	w.Header().Set("Content-Type", pad.contentType)
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	chunk := []byte(strings.Repeat(pad.item, 64))
	if _, err := w.Write([]byte(pad.head)); err != nil {
		return
	}
	for sent := 0; sent < OversizedBytes; sent += len(chunk) {
		if r.Context().Err() != nil || p.closed() {
			return
		}
		if _, err := w.Write(chunk); err != nil {
			return
		}
		rc.Flush()
	}
	w.Write([]byte(pad.tail))
}

// maxFormBody bounds the body of a form POST.
const maxFormBody = 64 << 10

// handleData serves the operations that share one method and path.
func (p *Portal) handleData(rt route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if rt.post {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBody)
			if err := r.ParseForm(); err != nil {
				p.call(w, r, kindOther, func() {
					p.fail(w, http.StatusBadRequest, "formulario ilegible")
				})
				return
			}
		}
		op, vals, ok := match(rt, r)
		if !ok {
			p.call(w, r, kindOther, func() {
				if p.d.gate != nil && !p.d.gate(p, w, r, kindOther) {
					return
				}
				p.fail(w, http.StatusBadRequest, "faltan parámetros de consulta")
			})
			return
		}
		p.serve(w, r, op.kind, vals)
	}
}

// serve answers a data call of kind k whose placeholders are vals, behind
// the current fault and the dialect's gate.
func (p *Portal) serve(w http.ResponseWriter, r *http.Request, k kind, vals map[string]string) {
	p.call(w, r, k, func() {
		if p.d.gate != nil && !p.d.gate(p, w, r, k) {
			return
		}
		switch k {
		case kindByDomain:
			p.lookupDomain(w, r, vals["domain"])
		case kindByID:
			p.lookupID(w, r, vals["id"], vals["id_kind"])
		case kindVoucher:
			p.voucher(w, vals["infraction_id"])
		}
	})
}

func (p *Portal) lookupDomain(w http.ResponseWriter, r *http.Request, domain string) {
	key := normalDomain(domain)
	if key == "" {
		p.fail(w, http.StatusBadRequest, "dominio inválido")
		return
	}
	p.writeLookup(w, r, kindByDomain, p.byDomain[key])
}

// lookupID answers a lookup by CUIT (eleven digits, check digit verified)
// or DNI (seven or eight digits). idKind is the {id_kind} of the template,
// empty when the template has none.
func (p *Portal) lookupID(w http.ResponseWriter, r *http.Request, id, idKind string) {
	d := digits(id)
	var got, key string
	switch {
	case len(d) == 11 && validCUIT(d):
		got, key = "cuit", d
	case len(d) == 7 || len(d) == 8:
		got, key = "dni", dniKey(d)
	default:
		p.fail(w, http.StatusBadRequest, "documento inválido")
		return
	}
	if p.d.cuitOnly && got != "cuit" {
		p.fail(w, http.StatusBadRequest, "se requiere un CUIT")
		return
	}
	if idKind != "" && !strings.EqualFold(idKind, got) {
		p.fail(w, http.StatusBadRequest, "el tipo de documento no coincide con el número")
		return
	}
	p.writeLookup(w, r, kindByID, p.byID[key])
}

// visible is recs without those that have not appeared yet (Record.After).
func (p *Portal) visible(recs []Record) []Record {
	since := time.Since(p.started)
	var out []Record
	for _, r := range recs {
		if r.after() <= since {
			out = append(out, r)
		}
	}
	return out
}

func (p *Portal) writeLookup(w http.ResponseWriter, r *http.Request, k kind, recs []Record) {
	recs = p.visible(recs)
	if p.d.answer != nil {
		p.d.answer(p, w, r, k, recs)
		return
	}
	status := http.StatusOK
	if len(recs) == 0 && p.d.emptyNotFound {
		status = http.StatusNotFound
	}
	writeJSON(w, status, p.d.render(p.d, recs))
}

func (p *Portal) voucher(w http.ResponseWriter, number string) {
	rec, ok := p.byNumber[number]
	if !ok || len(p.visible([]Record{rec})) == 0 {
		p.fail(w, http.StatusNotFound, "acta inexistente")
		return
	}
	body := voucherPDF(p.j.Name, rec)
	w.Header().Set("Content-Type", "application/pdf")
	w.Header().Set("Content-Disposition", `inline; filename="boleta-`+safeFileName(rec.ID)+`.pdf"`)
	w.Header().Set("Content-Length", itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	w.Write(body)
}
