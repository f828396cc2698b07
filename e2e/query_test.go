package e2e

import (
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestQueryShape checks the document of SPEC 3.1 for a complete answer of
// two sources: normalisation of every field, the sources[] entries, the
// summary, the echoed query and the headers.
func TestQueryShape(t *testing.T) {
	t.Parallel()
	caba := newPortal(t, actas(
		// A zone-less time, read in the source's zone; an amount as a JSON
		// number; a status_map key in another case.
		acta{"nro": "Q-1", "fecha": "2026-03-14 09:12", "detalle": "Exceso de velocidad",
			"lugar": "Av. Lugones km 4", "monto": 185000, "estado": "impaga"},
		// A time with its own offset keeps it; an amount as a string with a
		// third decimal, and a fourth so that a lone "." is not ambiguous
		// (SPEC 12), rounded half away from zero; the portal's own currency.
		acta{"nro": "Q-2", "fecha": "2026-03-15T10:00:00+01:00", "monto": "12345.6750",
			"moneda": "usd", "estado": "Pagada"},
		// A JSON number that binary floating point would round down; a
		// status no status_map knows.
		acta{"nro": "Q-3", "fecha": "2026-03-16T08:00:00", "monto": 98765.435, "estado": "prescripta"},
		acta{"nro": "Q-4", "monto": "1.234,5", "estado": "EN GESTION"},
	))
	cordoba := newPortal(t, actas(
		acta{"nro": "C-1", "fecha": "14/03/2026", "monto": "500", "estado": "IMPAGA"},
	))
	e := startWith(t,
		source{id: "caba", url: caba.URL},
		source{id: "cordoba", url: cordoba.URL, extra: []string{"currency: USD", "time_zone: Europe/Madrid"}},
	)

	a := e.byDomain("ab-123 cd")

	for _, p := range []*portal{caba, cordoba} {
		if got, want := p.requests(), []string{"/actas?dominio=AB123CD"}; !slices.Equal(got, want) {
			t.Errorf("portal received %q, want %q", got, want)
		}
	}
	if a.status != http.StatusOK {
		t.Fatalf("got status %d, want 200 (%+v)", a.status, a.problem)
	}
	if got := a.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control: got %q, want no-store", got)
	}
	if got := a.header.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", got)
	}
	r := a.result
	if r.Query.Domain != plate || r.Query.ID != "" {
		t.Errorf("query: got %+v, want domain %s", r.Query, plate)
	}
	if !r.Complete {
		t.Errorf("complete: got false, want true")
	}
	if want := (summary{Total: 2, Succeeded: 2}); r.Summary != want {
		t.Errorf("summary: got %+v, want %+v", r.Summary, want)
	}
	want := []infraction{
		{Source: "caba", Jurisdiction: "Jurisdicción caba", ID: "Q-1", Date: "2026-03-14T09:12:00-03:00",
			Description: "Exceso de velocidad", Place: "Av. Lugones km 4", Amount: "185000.00", Currency: "ARS",
			Status: "unpaid", StatusRaw: "impaga", Voucher: "/v1/sources/caba/infractions/Q-1/voucher"},
		{Source: "caba", Jurisdiction: "Jurisdicción caba", ID: "Q-2", Date: "2026-03-15T10:00:00+01:00",
			Amount: "12345.68", Currency: "USD", Status: "paid", StatusRaw: "Pagada",
			Voucher: "/v1/sources/caba/infractions/Q-2/voucher"},
		{Source: "caba", Jurisdiction: "Jurisdicción caba", ID: "Q-3", Date: "2026-03-16T08:00:00-03:00",
			Amount: "98765.44", Currency: "ARS", Status: "unknown", StatusRaw: "prescripta",
			Voucher: "/v1/sources/caba/infractions/Q-3/voucher"},
		{Source: "caba", Jurisdiction: "Jurisdicción caba", ID: "Q-4", Amount: "1234.50", Currency: "ARS",
			Status: "in_process", StatusRaw: "EN GESTION", Voucher: "/v1/sources/caba/infractions/Q-4/voucher"},
		{Source: "cordoba", Jurisdiction: "Jurisdicción cordoba", ID: "C-1", Date: "2026-03-14T00:00:00+01:00",
			Amount: "500.00", Currency: "USD", Status: "unpaid", StatusRaw: "IMPAGA",
			Voucher: "/v1/sources/cordoba/infractions/C-1/voucher"},
	}
	if len(r.Infractions) != len(want) {
		t.Fatalf("got %d infractions, want %d: %+v", len(r.Infractions), len(want), r.Infractions)
	}
	for i := range want {
		if r.Infractions[i] != want[i] {
			t.Errorf("infraction %d:\n got %+v\nwant %+v", i, r.Infractions[i], want[i])
		}
	}
	if len(r.Sources) != 2 {
		t.Fatalf("got %d sources entries, want 2: %+v", len(r.Sources), r.Sources)
	}
	for i, w := range []struct {
		source string
		count  int
	}{{"caba", 4}, {"cordoba", 1}} {
		got := r.Sources[i]
		checkEntry(t, got, "succeeded", "")
		if got.Source != w.source || got.Jurisdiction != "Jurisdicción "+w.source || got.Operation != "by_domain" {
			t.Errorf("sources[%d]: got %+v, want %s by_domain", i, got, w.source)
		}
		if got.Count == nil || *got.Count != w.count {
			t.Errorf("sources[%d].count: got %v, want %d", i, got.Count, w.count)
		}
		if got.DurationMS == nil || *got.DurationMS < 0 {
			t.Errorf("sources[%d].duration_ms: got %v, want a duration", i, got.DurationMS)
		}
	}
}

// TestQueryByID checks queries by CUIT and by DNI: normalisation to digits,
// {id_kind} in a path template, `accepts: [cuit]` leaving a source out of a
// DNI query, and the `sources` restriction.
func TestQueryByID(t *testing.T) {
	t.Parallel()
	people := func(prefix string) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("GET /personas/{kind}/{id}", one(prefix+"-1"))
		return mux
	}
	caba, cordoba, mendoza := newPortal(t, people("CABA")), newPortal(t, people("CBA")), newPortal(t, one("M-1"))
	e := startWith(t,
		source{id: "caba", url: caba.URL, ops: `{by_domain: {path: "/actas?dominio={domain}"}, by_id: {path: "/personas/{id_kind}/{id}", accepts: [cuit]}}`},
		source{id: "cordoba", url: cordoba.URL},
		source{id: "mendoza", url: mendoza.URL, ops: `{by_domain: {path: "/actas?dominio={domain}"}}`},
	)

	tests := []struct {
		name   string
		params string
		wantID string
		// what each portal receives, by source id
		want map[string][]string
	}{
		{"CUIT with dashes", "id=" + cuit, cuitDigits, map[string][]string{
			"caba": {"/personas/cuit/" + cuitDigits}, "cordoba": {"/personas/cuit/" + cuitDigits}}},
		{"DNI leaves out a CUIT-only source", "id=" + dni, dni, map[string][]string{
			"cordoba": {"/personas/dni/" + dni}}},
		{"DNI with dots", "id=31.415.926", dni, map[string][]string{
			"cordoba": {"/personas/dni/" + dni}}},
		{"restricted by sources", "id=" + cuitDigits + "&sources=caba", cuitDigits, map[string][]string{
			"caba": {"/personas/cuit/" + cuitDigits}}},
	}
	portals := map[string]*portal{"caba": caba, "cordoba": cordoba, "mendoza": mendoza}
	for _, tt := range tests {
		// Sequential: the subtests share the portals' counts.
		t.Run(tt.name, func(t *testing.T) {
			before := map[string]int{}
			for id, p := range portals {
				before[id] = p.calls()
			}
			a := e.query(tt.params)
			if a.status != http.StatusOK {
				t.Fatalf("got status %d, want 200 (%+v)", a.status, a.problem)
			}
			if a.result.Query.ID != tt.wantID || a.result.Query.Domain != "" {
				t.Errorf("query: got %+v, want id %s", a.result.Query, tt.wantID)
			}
			if want := (summary{Total: len(tt.want), Succeeded: len(tt.want)}); a.result.Summary != want {
				t.Errorf("summary: got %+v, want %+v", a.result.Summary, want)
			}
			if !a.result.Complete {
				t.Errorf("complete: got false, want true")
			}
			for id, p := range portals {
				got := p.requests()[before[id]:]
				if !slices.Equal(got, tt.want[id]) {
					t.Errorf("portal %s received %q, want %q", id, got, tt.want[id])
				}
			}
			for _, en := range a.result.Sources {
				if en.Operation != "by_id" {
					t.Errorf("source %s: got operation %q, want by_id", en.Source, en.Operation)
				}
				if _, ok := tt.want[en.Source]; !ok {
					t.Errorf("source %s: in the answer, want it left out", en.Source)
				}
			}
		})
	}
}

// TestQueryInvalid checks the 400 invalid-query answers and that an invalid
// query reaches no portal.
func TestQueryInvalid(t *testing.T) {
	t.Parallel()
	p := newPortal(t, one("Q-1"))
	idOnly := newPortal(t, one("Q-1"))
	e := startWith(t,
		source{id: "caba", url: p.URL, ops: `{by_domain: {path: "/actas?dominio={domain}"}, by_id: {path: "/personas/{id_kind}/{id}", accepts: [cuit]}}`},
		source{id: "pba", url: idOnly.URL, ops: `{by_id: {path: "/personas/{id_kind}/{id}"}}`},
	)
	tests := []struct {
		name   string
		params string
		want   []string
	}{
		{"both domain and id", "domain=" + plate + "&id=" + cuitDigits, []string{"domain", "id"}},
		{"neither domain nor id", "", []string{"domain", "id"}},
		{"empty domain", "domain=", []string{"domain"}},
		{"bad plate", "domain=AB12", []string{"domain"}},
		{"plate with a foreign letter", "domain=" + url.QueryEscape("AÑ123CD"), []string{"domain"}},
		{"bad CUIT check digit", "id=" + badCUIT, []string{"id"}},
		{"id of 9 digits", "id=123456789", []string{"id"}},
		{"timeout not a duration", "domain=" + plate + "&timeout=soon", []string{"timeout"}},
		{"timeout zero", "domain=" + plate + "&timeout=0s", []string{"timeout"}},
		{"timeout negative", "domain=" + plate + "&timeout=-1s", []string{"timeout"}},
		{"unknown source", "domain=" + plate + "&sources=caba,nope", []string{"sources"}},
		{"source without the operation", "domain=" + plate + "&sources=pba", []string{"sources"}},
		{"source without the kind of id", "id=" + dni + "&sources=caba", []string{"sources"}},
		{"empty sources", "domain=" + plate + "&sources=", []string{"sources"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := e.query(tt.params)
			if a.status != http.StatusBadRequest {
				t.Fatalf("got status %d, want 400", a.status)
			}
			if got := a.header.Get("Content-Type"); got != "application/problem+json" {
				t.Errorf("Content-Type: got %q, want application/problem+json", got)
			}
			checkType(t, a.problem, "invalid-query")
			if a.problem.Status != http.StatusBadRequest {
				t.Errorf("problem status: got %d, want 400", a.problem.Status)
			}
			if got := paramNames(a.problem); !slices.Equal(got, tt.want) {
				t.Errorf("invalid_params names: got %q, want %q (%+v)", got, tt.want, a.problem.InvalidParams)
			}
			for _, ip := range a.problem.InvalidParams {
				if ip.Reason == "" {
					t.Errorf("invalid_params %s: empty reason", ip.Name)
				}
			}
		})
	}
	if n := p.calls() + idOnly.calls(); n != 0 {
		t.Errorf("portals received %d calls for invalid queries, want 0", n)
	}

	// A timeout above query.max_deadline is clamped, not refused.
	if a := e.byDomain(plate, "timeout=1h"); a.status != http.StatusOK {
		t.Errorf("timeout=1h: got status %d, want 200 (%+v)", a.status, a.problem)
	}
}

// TestHangingSourceWithinBudget checks that a query with one hanging source
// returns within its budget with the others' results (SPEC 4.1, issue 2).
func TestHangingSourceWithinBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		timeout  string // the hanging source's own timeout
		params   string
		budget   time.Duration
		wantSlug string
	}{
		{"query budget runs out first", "2s", "timeout=1s", time.Second, "deadline-exceeded"},
		{"source timeout runs out first", "200ms", "", 3 * time.Second, "source-timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b, h := newPortal(t, one("A-1")), newPortal(t, one("B-1")), newPortal(t, nil)
			h.set(h.hang())
			e := startWith(t,
				source{id: "a", url: a.URL},
				source{id: "hang", url: h.URL, extra: []string{"timeout: " + tt.timeout}},
				source{id: "b", url: b.URL},
			)
			params := []string{}
			if tt.params != "" {
				params = append(params, tt.params)
			}
			got := e.byDomain(plate, params...)
			if got.took > tt.budget+time.Second {
				t.Errorf("answered after %v, want within the budget %v (+1s)", got.took, tt.budget)
			}
			if got.status != http.StatusOK {
				t.Fatalf("got status %d, want 200 (%+v)", got.status, got.problem)
			}
			r := got.result
			if r.Complete {
				t.Errorf("complete: got true, want false")
			}
			if want := (summary{Total: 3, Succeeded: 2, Failed: 1}); r.Summary != want {
				t.Errorf("summary: got %+v, want %+v", r.Summary, want)
			}
			checkEntry(t, r.entry(t, "a"), "succeeded", "")
			checkEntry(t, r.entry(t, "b"), "succeeded", "")
			checkEntry(t, r.entry(t, "hang"), "failed", tt.wantSlug)
			if len(r.Infractions) != 2 {
				t.Errorf("got %d infractions, want 2 (a's and b's)", len(r.Infractions))
			}
			for _, p := range []*portal{a, b, h} {
				if n := p.calls(); n != 1 {
					t.Errorf("portal received %d calls, want 1", n)
				}
			}
		})
	}
}

// TestNoSourceAvailable checks the 503 answer when no source succeeded, and
// its Retry-After when every source was skipped (SPEC 3.1).
func TestNoSourceAvailable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// forced lists the sources whose by_domain breaker is forced open.
		forced         []string
		wantRetryAfter string
		want           map[string][2]string // source: entry status, slug
	}{
		{"every source failed", nil, "", map[string][2]string{
			"a": {"failed", "source-unavailable"}, "b": {"failed", "source-unavailable"}}},
		{"one skipped, one failed", []string{"a"}, "", map[string][2]string{
			"a": {"skipped", "circuit-open"}, "b": {"failed", "source-unavailable"}}},
		{"every source skipped", []string{"a", "b"}, "3", map[string][2]string{
			"a": {"skipped", "circuit-open"}, "b": {"skipped", "circuit-open"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := newPortal(t, status(http.StatusInternalServerError)), newPortal(t, hangUp())
			e := startWith(t,
				source{id: "a", url: a.URL, extra: []string{"breaker: {open_for: 7s}"}},
				source{id: "b", url: b.URL, extra: []string{"breaker: {open_for: 3s}"}},
			)
			for _, id := range tt.forced {
				e.forceOpen(id, "by_domain")
			}
			got := e.byDomain(plate)
			if got.status != http.StatusServiceUnavailable {
				t.Fatalf("got status %d, want 503", got.status)
			}
			if ct := got.header.Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type: got %q, want application/problem+json", ct)
			}
			if cc := got.header.Get("Cache-Control"); cc != "no-store" {
				t.Errorf("Cache-Control: got %q, want no-store", cc)
			}
			if ra := got.header.Get("Retry-After"); ra != tt.wantRetryAfter {
				t.Errorf("Retry-After: got %q, want %q", ra, tt.wantRetryAfter)
			}
			checkType(t, got.problem, "no-source-available")
			if len(got.problem.Sources) != 2 {
				t.Fatalf("sources extension: got %+v, want 2 entries", got.problem.Sources)
			}
			for id, w := range tt.want {
				checkEntry(t, findEntry(t, got.problem.Sources, id), w[0], w[1])
			}
			if tt.wantRetryAfter == "3" {
				if ra := retryAfter(findEntry(t, got.problem.Sources, "a").Problem); ra != 7 {
					t.Errorf("a's retry_after: got %d, want 7 (its open_for)", ra)
				}
			}
			for id, p := range map[string]*portal{"a": a, "b": b} {
				want := 1
				if slices.Contains(tt.forced, id) {
					want = 0
				}
				if n := p.calls(); n != want {
					t.Errorf("portal %s received %d calls, want %d", id, n, want)
				}
			}
		})
	}
}

// TestSingleflight checks that identical queries in flight at the same time
// make one call to the portal.
func TestSingleflight(t *testing.T) {
	t.Parallel()
	p := newPortal(t, nil)
	gate := make(chan struct{})
	p.set(p.gated(gate, one("S-1")))
	e := startWith(t, source{id: "caba", url: p.URL})

	const n = 10
	answers := make([]answer, n)
	var wg sync.WaitGroup
	release := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-release
			answers[i] = e.byDomain(plate)
		}()
	}
	close(release)
	// The portal is slow: it answers once every query has reached the
	// aggregator, and 300ms more.
	eventually(t, 5*time.Second, "every query arrived", func() bool { return e.queries.Load() == n && p.calls() > 0 })
	time.Sleep(300 * time.Millisecond)
	close(gate)
	wg.Wait()

	if got := p.calls(); got != 1 {
		t.Errorf("portal received %d calls, want 1", got)
	}
	for i, a := range answers {
		if a.status != http.StatusOK {
			t.Errorf("query %d: got status %d, want 200", i, a.status)
			continue
		}
		checkEntry(t, a.result.entry(t, "caba"), "succeeded", "")
		if len(a.result.Infractions) != 1 || a.result.Infractions[0].ID != "S-1" {
			t.Errorf("query %d: got infractions %+v, want S-1", i, a.result.Infractions)
		}
	}
}

// TestSingleflightLeaderCut: a query that joined another's call, which the
// other's shorter budget cut short, makes the call for itself.
func TestSingleflightLeaderCut(t *testing.T) {
	t.Parallel()
	p := newPortal(t, nil)
	p.set(p.slow(500*time.Millisecond, one("S-1")))
	e := startWith(t, source{id: "caba", url: p.URL})

	short := make(chan answer, 1)
	go func() { short <- e.byDomain(plate, "timeout=200ms") }()
	eventually(t, 5*time.Second, "the short query's call", func() bool { return p.calls() == 1 })
	long := e.byDomain(plate)

	checkEntry(t, (<-short).entry(t, "caba"), "failed", "deadline-exceeded")
	if long.status != http.StatusOK {
		t.Fatalf("long query: got status %d, want 200", long.status)
	}
	checkEntry(t, long.result.entry(t, "caba"), "succeeded", "")
	if n := p.calls(); n != 2 {
		t.Errorf("portal received %d calls, want 2", n)
	}
}
