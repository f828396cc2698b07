package e2e

import (
	"fmt"
	"slices"
	"testing"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/portalsim"
)

// TestSameRecordsEveryDialect serves one set of records from a portal in
// each lossless dialect (JSON shapes, SOAP, an HTML table in
// windows-1252, a paged API, OAuth2, a session page) and checks, through
// the whole aggregator, that every portal's infractions normalise to the
// same values: the dialect is configuration, never a difference in the
// answer.
func TestSameRecordsEveryDialect(t *testing.T) {
	t.Parallel()
	recs := portalsim.Demo()[0].Records // caba's: accents, zone-less dates, statuses
	var js []portalsim.Jurisdiction
	for _, s := range portalsim.LosslessShapes() {
		js = append(js, portalsim.NewJurisdiction(s, "p-"+string(s), "Jurisdicción "+string(s), recs))
	}
	sim, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	text := fmt.Sprintf("server: {admin_token: %q}\nproblems: {base_uri: %q}\n", adminToken, baseURI) +
		"query: {deadline: 5s, max_deadline: 10s}\ndefaults: {timeout: 3s, retry: {max_retries: 0}}\n" +
		portalsim.AggregatorYAML(js, sim.URLs())
	cfg, err := config.Parse([]byte(text), "same.yaml", nil)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, text)
	}
	e := start(t, cfg, app.Options{})

	a := e.byDomain(portalsim.DemoPlate)
	if a.status != 200 || !a.result.Complete || a.result.Summary.Succeeded != len(js) {
		t.Fatalf("query: %d, summary %+v, sources %+v", a.status, a.result.Summary, a.result.Sources)
	}
	// What a portal's dialect must not change: everything but who said it
	// and in which words.
	type norm struct{ ID, Date, Description, Place, Amount, Currency, Status string }
	bySource := map[string][]norm{}
	for _, in := range a.result.Infractions {
		bySource[in.Source] = append(bySource[in.Source], norm{in.ID, in.Date, in.Description, in.Place, in.Amount, in.Currency, in.Status})
	}
	ref := bySource["p-"+string(portalsim.ShapeActas)]
	if len(ref) == 0 {
		t.Fatalf("the JSON portal gave no infractions: %+v", a.result.Infractions)
	}
	sortNorm := func(ns []norm) {
		slices.SortFunc(ns, func(x, y norm) int {
			if x.ID < y.ID {
				return -1
			}
			if x.ID > y.ID {
				return 1
			}
			return 0
		})
	}
	sortNorm(ref)
	for _, j := range js {
		got := bySource[j.ID]
		sortNorm(got)
		if !slices.Equal(got, ref) {
			t.Errorf("%s (%s) maps to\n%+v\nwant (as JSON)\n%+v", j.ID, j.Shape, got, ref)
		}
	}
}
