package e2e

import (
	"encoding/json"
	"fmt"
	"math/big"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the portals' zones, wherever the tests run

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/portalsim"
)

// The shapes of SPEC 12 through the whole aggregator: portalsim's real
// portals, configured by portalsim's own description of each (SPEC 12's
// keys), over real HTTP.

// startShapes serves js and an aggregator configured for them, with more
// defaults (YAML flow-mapping members) when given.
func startShapes(t *testing.T, js []portalsim.Jurisdiction, defaults string) (*portalsim.Server, *env) {
	t.Helper()
	sim, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	if defaults != "" {
		defaults = ", " + defaults
	}
	text := fmt.Sprintf("server: {admin_token: %q}\nproblems: {base_uri: %q}\n", adminToken, baseURI) +
		"query: {deadline: 5s, max_deadline: 10s}\n" +
		"defaults: {timeout: 3s, retry: {max_retries: 0}" + defaults + "}\n" +
		portalsim.AggregatorYAML(js, sim.URLs())
	cfg, err := config.Parse([]byte(text), "shapes.yaml", nil)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, text)
	}
	return sim, start(t, cfg, app.Options{})
}

// realPortals is a portal of each of shapes (its id the shape's name)
// serving portalsim.RealRecords, with fault f.
func realPortals(f portalsim.Fault, shapes ...portalsim.Shape) []portalsim.Jurisdiction {
	var js []portalsim.Jurisdiction
	for _, s := range shapes {
		j := portalsim.NewJurisdiction(s, string(s), "Jurisdicción "+string(s), portalsim.RealRecords())
		j.Fault = f
		js = append(js, j)
	}
	return js
}

// shapeInfraction is an infraction as the answer writes it, with its units
// (SPEC 12).
type shapeInfraction struct {
	infraction
	Units *units `json:"units"`
}

type units struct {
	Value string `json:"value"`
	Code  string `json:"code"`
}

// key is an infraction in one comparable line, without status_raw (each
// portal words a status its own way).
func (in shapeInfraction) key() string {
	u := "-"
	if in.Units != nil {
		u = in.Units.Value + " " + in.Units.Code
	}
	return strings.Join([]string{in.ID, in.Date, in.Description, in.Place, in.Amount, in.Currency, in.Status, u}, " | ")
}

// infractionsBySource queries params and groups the answer's infractions
// by source, each as sorted keys.
func (e *env) infractionsBySource(params string) (answer, map[string][]string) {
	e.t.Helper()
	resp, body := e.get("/v1/infractions?" + params)
	a := answer{status: resp.StatusCode, header: resp.Header}
	var doc struct {
		result
		Infractions []shapeInfraction `json:"infractions"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || resp.StatusCode != 200 {
		e.t.Fatalf("query %s: %d %v\n%s", params, resp.StatusCode, err, body)
	}
	a.result = doc.result
	by := map[string][]string{}
	for _, in := range doc.Infractions {
		by[in.Source] = append(by[in.Source], in.key())
	}
	for _, keys := range by {
		slices.Sort(keys)
	}
	return a, by
}

// wantShape is what the aggregator must answer from a portal of shape s
// for recs: each record's values normalised (the date in RFC 3339 in the
// portal's zone, the amount with two decimals, the currency, its units),
// as sorted keys.
func wantShape(t *testing.T, s portalsim.Shape, recs []portalsim.Record) []string {
	t.Helper()
	l := s.Locale()
	loc, err := time.LoadLocation(l.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range recs {
		date, err := time.ParseInLocation("2006-01-02T15:04:05", r.Date, loc)
		if err != nil {
			t.Fatal(err)
		}
		in := shapeInfraction{infraction: infraction{ID: r.ID, Date: date.Format(time.RFC3339), Description: r.Description, Place: r.Place, Status: r.Status}}
		if r.Amount != "" && !l.UnitsOnly {
			in.Amount = decimal2(t, r.Amount)
		}
		if r.Units != "" && l.Units != "" {
			in.Units = &units{decimal2(t, r.Units), l.Units}
		}
		// The source's currency goes with an amount, and with an
		// infraction that states neither money nor units (SPEC 3.1);
		// units alone are never money (SPEC 12).
		if in.Amount != "" || in.Units == nil {
			in.Currency = l.Currency
		}
		keys = append(keys, in.key())
	}
	slices.Sort(keys)
	return keys
}

func decimal2(t *testing.T, d string) string {
	t.Helper()
	v, ok := new(big.Rat).SetString(d)
	if !ok {
		t.Fatalf("%q is not a decimal", d)
	}
	return v.FloatString(2)
}

// TestRealShapesMapToIdenticalInfractions serves the same actas from a
// portal in every shape of SPEC 12 (JSON in an HTML attribute, arrays in
// arrays, several arrays, a DETRAN page in windows-1252, JSON in SOAP,
// header-named columns in a misdeclared page, HTML in JSON, {"error": …}
// bodies that also answer other plates, OAuth2 with credentials in the
// body) and checks, through the whole aggregator, that every one maps them
// to the same infractions: same id, date (RFC 3339 in the portal's zone),
// description, place, amount (two decimals, in its currency), status, and
// units where the portal states them; a warning without money stays
// without an amount, a placeholder is no value.
func TestRealShapesMapToIdenticalInfractions(t *testing.T) {
	t.Parallel()
	js := realPortals(portalsim.Fault{}, portalsim.RealShapes()...)
	_, e := startShapes(t, js, "")
	var plate []portalsim.Record
	for _, r := range portalsim.RealRecords() {
		if r.Domain == portalsim.DemoPlate {
			plate = append(plate, r)
		}
	}
	for _, q := range []struct {
		params string
		want   []portalsim.Record
	}{
		{"domain=" + url.QueryEscape("ab 123 cd"), plate},
		{"id=" + portalsim.DemoCUIT, portalsim.RealRecords()},
	} {
		a, got := e.infractionsBySource(q.params)
		if !a.result.Complete || a.result.Summary.Succeeded != len(js) {
			t.Errorf("%s: summary %+v, sources %+v; want every source succeeded", q.params, a.result.Summary, a.result.Sources)
		}
		for _, j := range js {
			checkEntry(t, a.result.entry(t, j.ID), "succeeded", "")
			if want := wantShape(t, j.Shape, q.want); !slices.Equal(got[j.ID], want) {
				t.Errorf("%s: %s (%s) maps to\n%s\nwant\n%s", q.params, j.ID, j.Shape, strings.Join(got[j.ID], "\n"), strings.Join(want, "\n"))
			}
		}
		// Identical: with each portal's zone, money and units set apart,
		// every portal said the same thing, and every one that states
		// money the same amounts.
		var core, money []string
		for _, j := range js {
			var c, m []string
			for _, k := range got[j.ID] {
				parts := strings.Split(k, " | ")
				if d, err := time.Parse(time.RFC3339, parts[1]); err == nil {
					parts[1] = d.Format("2006-01-02T15:04:05")
				}
				c = append(c, strings.Join([]string{parts[0], parts[1], parts[2], parts[3], parts[6]}, " | "))
				m = append(m, parts[0]+" | "+parts[4])
			}
			if core == nil {
				core = c
			} else if !slices.Equal(c, core) {
				t.Errorf("%s: %s differs from %s:\n%s\nwant\n%s", q.params, j.ID, js[0].ID, strings.Join(c, "\n"), strings.Join(core, "\n"))
			}
			if j.Shape.Locale().UnitsOnly {
				continue
			}
			if money == nil {
				money = m
			} else if !slices.Equal(m, money) {
				t.Errorf("%s: %s's amounts differ:\n%s\nwant\n%s", q.params, j.ID, strings.Join(m, "\n"), strings.Join(money, "\n"))
			}
		}
	}
}

// TestRealShapeCaptchaIsRejected: a portal that answers its captcha
// challenge (a 200 page with a div.g-recaptcha, a 200 {"error": true,
// "mensaje": "Debe completar el captcha"}) is source-rejected, with the
// portal's message as detail where the rule names one; never "no
// infractions", and never counted by the breaker.
func TestRealShapeCaptchaIsRejected(t *testing.T) {
	t.Parallel()
	js := realPortals(portalsim.Fault{Mode: portalsim.Captcha}, portalsim.ShapeDataJSON, portalsim.ShapeDetran, portalsim.ShapeErrorFlag)
	sim, e := startShapes(t, js, "breaker: {min_calls: 1, consecutive_failures: 1, open_for: 5s}")
	for i := range 3 {
		a := e.byDomain(portalsim.DemoPlate)
		if a.status != 503 {
			t.Errorf("query %d: %d, want 503 (no source succeeded)", i+1, a.status)
		}
		for _, j := range js {
			en := a.entry(t, j.ID)
			checkEntry(t, en, "failed", "source-rejected")
			if j.Shape == portalsim.ShapeErrorFlag && (en.Problem == nil || en.Problem.Detail != "Debe completar el captcha") {
				t.Errorf("query %d: %s detail %+v, want the portal's message", i+1, j.ID, en.Problem)
			}
		}
	}
	for _, j := range js {
		if b := e.breaker(j.ID, "by_domain"); b.State != "closed" || b.Window.Failures != 0 {
			t.Errorf("%s: breaker %s with %d failures, want closed with none", j.ID, b.State, b.Window.Failures)
		}
		if c := sim.Portal(j.ID).Calls(); c.ByDomain != 3 {
			t.Errorf("%s: portal called %d times, want 3", j.ID, c.ByDomain)
		}
	}
	// Healthy again: the same portals answer their actas.
	for _, j := range js {
		if err := sim.Portal(j.ID).SetFault(portalsim.Fault{}); err != nil {
			t.Fatal(err)
		}
	}
	a := e.byDomain(portalsim.DemoPlate)
	for _, j := range js {
		en := a.entry(t, j.ID)
		checkEntry(t, en, "succeeded", "")
		if en.Count == nil || *en.Count != 4 {
			t.Errorf("%s: count %v, want 4", j.ID, en.Count)
		}
	}
}

// TestRealShapeMissingCaptchaNeverTrips: ShapeNested's 500 {"code": "999",
// "message": "missing captcha"} is a refusal (its errors rule), so ten of
// them leave the breaker closed with an empty window, while a plain 500
// from the same kind of portal trips its breaker as an outage.
func TestRealShapeMissingCaptchaNeverTrips(t *testing.T) {
	t.Parallel()
	refusing := realPortals(portalsim.Fault{Mode: portalsim.Captcha}, portalsim.ShapeNested)[0]
	failing := realPortals(portalsim.Fault{Status: 500}, portalsim.ShapeNested)[0]
	refusing.ID, failing.ID = "refusing", "failing"
	sim, e := startShapes(t, []portalsim.Jurisdiction{refusing, failing},
		"breaker: {window: 10s, min_calls: 2, failure_ratio: 0.5, consecutive_failures: 2, open_for: 30s}")
	const n = 10
	for i := range n {
		a := e.byDomain(plateN(i))
		en := a.entry(t, "refusing")
		checkEntry(t, en, "failed", "source-rejected")
		if en.Problem != nil && en.Problem.Detail != "missing captcha" {
			t.Errorf("query %d: detail %q, want the portal's message", i+1, en.Problem.Detail)
		}
		if st := a.entry(t, "failing").Status; i >= 2 && st != "skipped" {
			t.Errorf("query %d: the failing portal %s, want skipped (circuit open)", i+1, st)
		}
	}
	if b := e.breaker("refusing", "by_domain"); b.State != "closed" || b.Window.Failures != 0 || b.LastTransition != nil {
		t.Errorf("refusing: breaker %s, window %+v, last %+v; want closed, no failure, no transition", b.State, b.Window, b.LastTransition)
	}
	if c := sim.Portal("refusing").Calls(); c.ByDomain != n {
		t.Errorf("refusing: called %d times, want %d", c.ByDomain, n)
	}
	if b := e.breaker("failing", "by_domain"); b.State != "open" {
		t.Errorf("failing: breaker %s, want open (a plain 500 is an outage)", b.State)
	}
}

// TestRealShapeTooManyQueriesIsRateLimited: a 200 page whose h1 says
// "demasiadas consultas" (or, at a DETRAN, "excesso de consultas") is a
// rate limit with the rule's retry_after: the call fails rate-limited, the
// next query skips the source without calling it, and the breaker never
// hears of it.
func TestRealShapeTooManyQueriesIsRateLimited(t *testing.T) {
	t.Parallel()
	js := realPortals(portalsim.Fault{Mode: portalsim.Busy}, portalsim.ShapeDataJSON, portalsim.ShapeColumns, portalsim.ShapeDetran)
	retry := map[string]int{"datajson": 60, "columns": 60, "detran": 120}
	sim, e := startShapes(t, js, "breaker: {min_calls: 1, consecutive_failures: 1, open_for: 5s}")
	a := e.byDomain(portalsim.DemoPlate)
	for _, j := range js {
		en := a.entry(t, j.ID)
		checkEntry(t, en, "failed", "rate-limited")
		if ra := retryAfter(en.Problem); ra < retry[j.ID]-1 || ra > retry[j.ID] {
			t.Errorf("%s: retry_after %d, want %d", j.ID, ra, retry[j.ID])
		}
	}
	a = e.byDomain(portalsim.DemoPlate)
	for _, j := range js {
		en := a.entry(t, j.ID)
		checkEntry(t, en, "skipped", "rate-limited")
		if ra := retryAfter(en.Problem); ra < 1 || ra > retry[j.ID] {
			t.Errorf("%s paused: retry_after %d, want 1 to %d", j.ID, ra, retry[j.ID])
		}
		if c := sim.Portal(j.ID).Calls(); c.ByDomain != 1 {
			t.Errorf("%s: called %d times, want 1 (paused after the first)", j.ID, c.ByDomain)
		}
		if b := e.breaker(j.ID, "by_domain"); b.State != "closed" || b.Window.Calls != 0 {
			t.Errorf("%s: breaker %s, window %+v; want closed and empty", j.ID, b.State, b.Window)
		}
	}
	// Operators see which rule paused the source (by its index: never
	// the portal's words).
	for id, s := range e.opsSources() {
		if _, ok := retry[id]; ok && (s.Pause == nil || !strings.Contains(s.Pause.Reason, "matched response.errors[")) {
			t.Errorf("%s: pause %+v, want the rule that set it", id, s.Pause)
		}
	}
}
