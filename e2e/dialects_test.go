package e2e

import (
	"fmt"
	"sync"
	"testing"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/portalsim"
)

// TestDialectPortals: the aggregator, configured by portalsim's own SPEC 8
// description of its dialect portals (SOAP, HTML in windows-1252, paged
// JSON, OAuth2, session), reads every one of them: the paged portal's
// three pages, one OAuth2 token and one session for twenty queries.
func TestDialectPortals(t *testing.T) {
	t.Parallel()
	js := portalsim.DialectDemo()
	sim, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	text := fmt.Sprintf("server: {admin_token: %q}\nproblems: {base_uri: %q}\n", adminToken, baseURI) +
		"query: {deadline: 5s, max_deadline: 10s}\ndefaults: {timeout: 3s, retry: {max_retries: 0}}\n" +
		portalsim.AggregatorYAML(js, sim.URLs())
	cfg, err := config.Parse([]byte(text), "dialects.yaml", nil)
	if err != nil {
		t.Fatalf("config.Parse: %v\n%s", err, text)
	}
	e := start(t, cfg, app.Options{})

	want := map[string]int{}
	for _, j := range js {
		for _, r := range j.Records {
			if r.Domain == portalsim.DemoPlate {
				want[j.ID]++
			}
		}
	}
	if want["chubut"] != 7 {
		t.Fatalf("chubut has %d records for the plate, want 7 (three pages)", want["chubut"])
	}
	a := e.byDomain(portalsim.DemoPlate)
	got := map[string]int{}
	for _, inf := range a.result.Infractions {
		got[inf.Source]++
	}
	for _, j := range js {
		en := a.entry(t, j.ID)
		if en.Status != "succeeded" || got[j.ID] != want[j.ID] {
			t.Errorf("%s: %s with %d infractions, want succeeded with %d (problem %+v)",
				j.ID, en.Status, got[j.ID], want[j.ID], en.Problem)
		}
	}
	if st := sim.Portal("chubut").Calls(); st.Total != 3 {
		t.Errorf("paged portal called %d times, want 3 (3 pages)", st.Total)
	}

	// Twenty more queries at once, for other plates: still one token and
	// one session.
	const n = 20
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := e.byDomain(plateN(i))
			for _, id := range []string{"entrerios", "misiones"} {
				checkEntry(t, a.entry(t, id), "succeeded", "")
			}
		}()
	}
	wg.Wait()
	if st := sim.Portal("entrerios").Calls(); st.TokensIssued != 1 || st.Token != 1 {
		t.Errorf("OAuth2 tokens issued %d (endpoint called %d times), want 1 for %d queries", st.TokensIssued, st.Token, n+1)
	}
	if st := sim.Portal("misiones").Calls(); st.SessionsIssued != 1 || st.SessionPage != 1 {
		t.Errorf("sessions issued %d, session page visited %d times; want 1 and 1 for %d queries", st.SessionsIssued, st.SessionPage, n+1)
	}

	// Every token revoked, every session ended: the next query's calls
	// are refused once (401; the session page again), then repeated with
	// a fresh token and a fresh session.
	sim.Portal("entrerios").RevokeTokens()
	sim.Portal("misiones").ExpireSessions()
	sim.Portal("misiones").ResetCalls()
	a = e.byDomain(portalsim.DemoPlate)
	checkEntry(t, a.entry(t, "entrerios"), "succeeded", "")
	checkEntry(t, a.entry(t, "misiones"), "succeeded", "")
	got = map[string]int{}
	for _, inf := range a.result.Infractions {
		got[inf.Source]++
	}
	if got["misiones"] != want["misiones"] || got["entrerios"] != want["entrerios"] {
		t.Errorf("after renewal: %d and %d infractions, want %d and %d", got["misiones"], got["entrerios"], want["misiones"], want["entrerios"])
	}
	if st := sim.Portal("entrerios").Calls(); st.TokensIssued != 2 {
		t.Errorf("OAuth2 tokens issued after revocation: %d, want 2", st.TokensIssued)
	}
	if st := sim.Portal("misiones").Calls(); st.SessionPage != 1 {
		t.Errorf("session page visited %d times after expiry, want 1 (%+v)", st.SessionPage, st)
	}
}
