package metrics_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/breaker/breakertest"
	"github.com/multas/aggregator/internal/apptest"
	"github.com/multas/aggregator/metrics"
	"github.com/multas/aggregator/portalsim"
	"github.com/multas/aggregator/sources/mapping"
)

const adminToken = "metrics-test-admin-token"

// replica is an aggregator in front of simulated portals, served over real
// HTTP as production serves it.
type replica struct {
	app *app.App
	sim *portalsim.Server
	url string
}

// start runs the demo portals caba (healthy) and rosario (down) and an
// aggregator over them. Breakers trip after 2 calls with half of them
// failing, stay open 60 s, and calls are not retried, so that every count
// below is exact.
func start(t *testing.T, now func() time.Time) *replica {
	t.Helper()
	var js []portalsim.Jurisdiction
	for _, j := range portalsim.Demo() {
		if j.ID == "caba" || j.ID == "rosario" {
			js = append(js, j)
		}
	}
	env := apptest.Start(t, js, fmt.Sprintf(`server: {listen: "127.0.0.1:0", admin_token: %q}
query: {deadline: 5s, max_deadline: 10s}
defaults:
  timeout: 2s
  retry: {max_retries: 0}
  breaker: {window: 60s, min_calls: 2, failure_ratio: 0.5, open_for: 60s}
`, adminToken), app.Options{Now: now})
	return &replica{app: env.App, sim: env.Sim, url: env.URL}
}

// do sends a request and returns the status, failing the test on a
// transport error.
func (r *replica) do(t *testing.T, method, path string) int {
	t.Helper()
	req, err := http.NewRequest(method, r.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(path, "/v1/admin/") {
		req.Header.Set("Authorization", "Bearer "+adminToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// query asks for a plate or an id from the given sources.
func (r *replica) query(t *testing.T, param, value, sources string) int {
	t.Helper()
	q := url.Values{param: {value}, "sources": {sources}}
	return r.do(t, http.MethodGet, "/v1/infractions?"+q.Encode())
}

// scrape is a real scrape of GET /metrics: the exposition text and its
// parsed families.
type scrape struct {
	text     string
	families map[string]*dto.MetricFamily
}

func (r *replica) scrape(t *testing.T) scrape {
	t.Helper()
	resp, err := http.Get(r.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("GET /metrics Content-Type = %q, want the text exposition format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return scrape{text: string(body), families: fams}
}

// value is the value of the sample of family name whose labels are exactly
// labels: a counter's or gauge's value, a histogram's sample count.
func (s scrape) value(name string, labels map[string]string) (float64, bool) {
	f, ok := s.families[name]
	if !ok {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		match := true
		for _, l := range m.GetLabel() {
			if v, ok := labels[l.GetName()]; !ok || v != l.GetValue() {
				match = false
				break
			}
		}
		if !match {
			continue
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			return m.GetCounter().GetValue(), true
		case dto.MetricType_GAUGE:
			return m.GetGauge().GetValue(), true
		case dto.MetricType_HISTOGRAM:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// want checks that the sample exists and has value v.
func (s scrape) want(t *testing.T, name string, labels map[string]string, v float64) {
	t.Helper()
	got, ok := s.value(name, labels)
	if !ok {
		t.Errorf("%s%v: no such sample", name, labels)
		return
	}
	if got != v {
		t.Errorf("%s%v = %v, want %v", name, labels, got, v)
	}
}

func breakerLabels(key string, op aggregator.Operation) map[string]string {
	return map[string]string{"breaker": key, "operation": string(op)}
}

func callLabels(source string, op aggregator.Operation, outcome aggregator.Outcome) map[string]string {
	return map[string]string{"source": source, "operation": string(op), "outcome": string(outcome)}
}

// The SPEC 7 metrics, their types and their exact label names.
var families = map[string]struct {
	typ    dto.MetricType
	labels []string
}{
	"aggregator_breaker_state":                {dto.MetricType_GAUGE, []string{"breaker", "operation"}},
	"aggregator_breaker_open_seconds_total":   {dto.MetricType_COUNTER, []string{"breaker", "operation"}},
	"aggregator_breaker_transitions_total":    {dto.MetricType_COUNTER, []string{"breaker", "from", "operation", "to"}},
	"aggregator_source_calls_total":           {dto.MetricType_COUNTER, []string{"operation", "outcome", "source"}},
	"aggregator_source_call_duration_seconds": {dto.MetricType_HISTOGRAM, []string{"operation", "source"}},
	"aggregator_queries_total":                {dto.MetricType_COUNTER, []string{"operation", "outcome"}},
	"aggregator_query_duration_seconds":       {dto.MetricType_HISTOGRAM, []string{"operation"}},
	"aggregator_webhook_deliveries_total":     {dto.MetricType_COUNTER, []string{"outcome"}},
	"aggregator_dlq_entries":                  {dto.MetricType_GAUGE, nil},
	"aggregator_build_info":                   {dto.MetricType_GAUGE, []string{"goversion", "revision", "version"}},
	"aggregator_memory_entries":               {dto.MetricType_GAUGE, nil},
	// SPEC 13.
	"aggregator_source_items_total":         {dto.MetricType_COUNTER, []string{"source"}},
	"aggregator_source_lookups_total":       {dto.MetricType_COUNTER, []string{"result", "source"}},
	"aggregator_source_shape_changes_total": {dto.MetricType_COUNTER, []string{"source"}},
}

// Every value a label may take: configuration ids and fixed vocabularies,
// never anything a client sent.
func allowedValues(a *app.App) map[string][]string {
	var keys, sources []string
	for _, id := range a.Breakers.IDs() {
		if !slices.Contains(keys, id.Key) {
			keys = append(keys, id.Key)
		}
	}
	for _, s := range a.Config.Sources {
		sources = append(sources, s.ID)
	}
	var ops []string
	for _, op := range aggregator.Operations {
		ops = append(ops, string(op))
	}
	states := []string{"closed", "half_open", "open", "forced_open"}
	var rules []string
	for _, s := range a.Config.Sources {
		for i := len(rules); i < len(s.Response.Errors); i++ {
			rules = append(rules, strconv.Itoa(i))
		}
	}
	return map[string][]string{
		"breaker": keys, "source": sources, "operation": ops, "from": states, "to": states,
		"kind":   {"fresh", "stale"},
		"result": {"items", "empty", "error"}, "field": mapping.FieldNames(),
		"reason": {mapping.ReasonMissing, mapping.ReasonInvalid, mapping.ReasonUnknownStatus, mapping.ReasonSuspectText},
		"rule":   rules,
	}
}

var callOutcomes = []string{"succeeded", "timeout", "unavailable", "rejected", "error",
	"rate_limited", "skipped_open", "skipped_rate_limited", "deadline"}

var queryOutcomes = []string{"complete", "partial", "unavailable", "invalid"}

func TestScrapeNamesLabelsAndOutcomes(t *testing.T) {
	r := start(t, nil)

	// Breakers exist from start-up: every one is in the first scrape,
	// closed and never open, before any traffic.
	first := r.scrape(t)
	ids := r.app.Breakers.IDs()
	if len(ids) != 6 {
		t.Fatalf("breakers = %v, want the 3 operations of caba and rosario", ids)
	}
	for _, id := range ids {
		first.want(t, "aggregator_breaker_state", breakerLabels(id.Key, id.Operation), 0)
		first.want(t, "aggregator_breaker_open_seconds_total", breakerLabels(id.Key, id.Operation), 0)
	}
	// So are the mapping health series of every source (SPEC 13).
	for _, source := range []string{"caba", "rosario"} {
		first.want(t, "aggregator_source_items_total", map[string]string{"source": source}, 0)
		first.want(t, "aggregator_source_shape_changes_total", map[string]string{"source": source}, 0)
		for _, r := range []string{"items", "empty", "error"} {
			first.want(t, "aggregator_source_lookups_total", map[string]string{"source": source, "result": r}, 0)
		}
	}

	// Personal data through every query path: plates in their accepted
	// spellings, a CUIT with and without dashes, a DNI.
	if got := r.query(t, "domain", portalsim.DemoPlate, "caba"); got != http.StatusOK {
		t.Fatalf("caba by plate: %d, want 200", got)
	}
	if got := r.query(t, "domain", "aa-a 123", "caba"); got != http.StatusOK {
		t.Fatalf("caba by old plate: %d, want 200", got)
	}
	if got := r.query(t, "id", portalsim.DemoCUIT, "caba"); got != http.StatusOK {
		t.Fatalf("caba by CUIT: %d, want 200", got)
	}
	// rosario is down: two failures trip its breaker, the third query
	// finds it open and skips it. Each answers 503 no-source-available.
	for i, plate := range []string{"AB 123 CD", "ab123cd", portalsim.DemoPlateMoto} {
		if got := r.query(t, "domain", plate, "rosario"); got != http.StatusServiceUnavailable {
			t.Fatalf("rosario query %d: %d, want 503", i, got)
		}
	}
	if got := r.query(t, "id", portalsim.DemoCUITFleet, "rosario"); got != http.StatusServiceUnavailable {
		t.Fatalf("rosario by CUIT: %d, want 503", got)
	}
	// Refused queries: a bad plate, and a DNI for portals that take CUITs only.
	if got := r.query(t, "domain", "not a plate", "caba"); got != http.StatusBadRequest {
		t.Fatalf("invalid plate: %d, want 400", got)
	}
	if got := r.query(t, "id", portalsim.DemoDNI, "caba"); got != http.StatusBadRequest {
		t.Fatalf("caba by DNI: %d, want 400 (caba takes CUITs only)", got)
	}
	// No webhook path exists yet to count a delivery; count one by hand
	// so that the family is exposed and its labels can be checked.
	if _, ok := first.families["aggregator_webhook_deliveries_total"]; !ok {
		r.app.Metrics.Deliveries.WithLabelValues("succeeded").Inc()
	}

	s := r.scrape(t)

	t.Run("names and labels", func(t *testing.T) {
		for name, want := range families {
			f, ok := s.families[name]
			if !ok {
				t.Errorf("%s: missing from /metrics", name)
				continue
			}
			if f.GetType() != want.typ {
				t.Errorf("%s: type %v, want %v", name, f.GetType(), want.typ)
			}
			if f.GetHelp() == "" {
				t.Errorf("%s: no HELP", name)
			}
			for _, m := range f.GetMetric() {
				var got []string
				for _, l := range m.GetLabel() {
					got = append(got, l.GetName())
				}
				slices.Sort(got)
				if !slices.Equal(got, want.labels) {
					t.Errorf("%s: labels %v, want %v", name, got, want.labels)
				}
			}
		}
	})

	t.Run("label values are bounded", func(t *testing.T) {
		allowed := allowedValues(r.app)
		for name, f := range s.families {
			if !strings.HasPrefix(name, "aggregator_") {
				continue
			}
			if strings.HasPrefix(name, "aggregator_http_") {
				checkHTTPLabels(t, name, f)
				continue
			}
			if name == "aggregator_build_info" {
				continue // the build's own identity (TestBuildInfo)
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					vals, ok := allowed[l.GetName()]
					if l.GetName() == "outcome" {
						ok = true
						switch name {
						case "aggregator_source_calls_total":
							vals = callOutcomes
						case "aggregator_queries_total":
							vals = queryOutcomes
						default:
							continue // webhook outcomes: not fixed by SPEC 7 yet
						}
					}
					if !ok {
						t.Errorf("%s: unexpected label %s=%q", name, l.GetName(), l.GetValue())
						continue
					}
					if !slices.Contains(vals, l.GetValue()) {
						t.Errorf("%s: label %s=%q, want one of %v", name, l.GetName(), l.GetValue(), vals)
					}
				}
			}
		}
	})

	t.Run("no personal data", func(t *testing.T) {
		for _, pii := range []string{
			portalsim.DemoPlate, "AB 123 CD", "AAA123", "aa-a 123", portalsim.DemoPlateMoto,
			portalsim.DemoCUIT, strings.ReplaceAll(portalsim.DemoCUIT, "-", ""),
			portalsim.DemoCUITFleet, strings.ReplaceAll(portalsim.DemoCUITFleet, "-", ""),
			"not a plate",
		} {
			if strings.Contains(strings.ToUpper(s.text), strings.ToUpper(pii)) {
				t.Errorf("/metrics contains %q", pii)
			}
		}
		// A DNI is only digits, which a runtime metric's value may happen
		// to contain: look for it in label values instead.
		for name, f := range s.families {
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if strings.Contains(l.GetValue(), portalsim.DemoDNI) {
						t.Errorf("%s: label %s=%q holds the DNI", name, l.GetName(), l.GetValue())
					}
				}
			}
		}
	})

	t.Run("source call outcomes", func(t *testing.T) {
		s.want(t, "aggregator_source_calls_total", callLabels("caba", aggregator.ByDomain, aggregator.Succeeded), 2)
		s.want(t, "aggregator_source_calls_total", callLabels("caba", aggregator.ByID, aggregator.Succeeded), 1)
		s.want(t, "aggregator_source_calls_total", callLabels("rosario", aggregator.ByDomain, aggregator.Unavailable), 2)
		s.want(t, "aggregator_source_calls_total", callLabels("rosario", aggregator.ByDomain, aggregator.SkippedOpen), 1)
		// rosario's by_id breaker is its own: the CUIT query was made, and failed.
		s.want(t, "aggregator_source_calls_total", callLabels("rosario", aggregator.ByID, aggregator.Unavailable), 1)
		// Only calls that were made are timed: 2 of rosario's 3 by_domain.
		s.want(t, "aggregator_source_call_duration_seconds", map[string]string{"source": "caba", "operation": "by_domain"}, 2)
		s.want(t, "aggregator_source_call_duration_seconds", map[string]string{"source": "rosario", "operation": "by_domain"}, 2)
	})

	t.Run("mapping health", func(t *testing.T) {
		// caba answered its three lookups with items; rosario's answers
		// were never read (503s, then skipped): they say nothing of its
		// mapping.
		s.want(t, "aggregator_source_lookups_total", map[string]string{"source": "caba", "result": "items"}, 3)
		s.want(t, "aggregator_source_lookups_total", map[string]string{"source": "rosario", "result": "error"}, 0)
		if n, _ := s.value("aggregator_source_items_total", map[string]string{"source": "caba"}); n < 3 {
			t.Errorf("caba mapped %v items, want at least one per lookup", n)
		}
		s.want(t, "aggregator_source_items_total", map[string]string{"source": "rosario"}, 0)
	})

	t.Run("breakers", func(t *testing.T) {
		s.want(t, "aggregator_breaker_state", breakerLabels("rosario", aggregator.ByDomain), 2)
		s.want(t, "aggregator_breaker_state", breakerLabels("rosario", aggregator.ByID), 0)
		s.want(t, "aggregator_breaker_state", breakerLabels("caba", aggregator.ByDomain), 0)
		s.want(t, "aggregator_breaker_transitions_total",
			map[string]string{"breaker": "rosario", "operation": "by_domain", "from": "closed", "to": "open"}, 1)
		if _, ok := s.value("aggregator_breaker_transitions_total",
			map[string]string{"breaker": "caba", "operation": "by_domain", "from": "closed", "to": "open"}); ok {
			t.Error("caba/by_domain counted a transition it never made")
		}
	})

	t.Run("queries", func(t *testing.T) {
		total := 0.0
		for _, m := range s.families["aggregator_queries_total"].GetMetric() {
			total += m.GetCounter().GetValue()
		}
		if total != 9 {
			t.Errorf("aggregator_queries_total sums to %v, want the 9 queries sent", total)
		}
		// A refused query counts under the operation it asked for: the bad
		// plate is by_domain (not by_id), the DNI caba cannot take by_id.
		s.want(t, "aggregator_queries_total", map[string]string{"operation": "by_domain", "outcome": "invalid"}, 1)
		s.want(t, "aggregator_queries_total", map[string]string{"operation": "by_id", "outcome": "invalid"}, 1)
		if n, _ := s.value("aggregator_query_duration_seconds", map[string]string{"operation": "by_domain"}); n < 5 {
			t.Errorf("aggregator_query_duration_seconds{operation=by_domain} counted %v queries, want at least 5", n)
		}
	})

	t.Run("runtime", func(t *testing.T) {
		for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "go_gc_duration_seconds", "go_info",
			"process_cpu_seconds_total", "process_resident_memory_bytes"} {
			if _, ok := s.families[name]; !ok {
				t.Errorf("%s: missing from /metrics", name)
			}
		}
	})
}

// TestOpenSecondsFollowTheClock drives one breaker through open, half-open,
// closed, forced open and reset on a fake clock, scraping between steps:
// open time grows at every scrape while open, with no transition to push
// it, and stands still otherwise.
func TestOpenSecondsFollowTheClock(t *testing.T) {
	clk := breakertest.NewClock()
	r := start(t, clk.Now)
	rosario := breakerLabels("rosario", aggregator.ByDomain)
	transition := func(from, to string) map[string]string {
		return map[string]string{"breaker": "rosario", "operation": "by_domain", "from": from, "to": to}
	}
	step := func(name string, check func(t *testing.T, s scrape)) {
		t.Helper()
		t.Run(name, func(t *testing.T) { check(t, r.scrape(t)) })
	}

	step("closed", func(t *testing.T, s scrape) {
		s.want(t, "aggregator_breaker_state", rosario, 0)
		s.want(t, "aggregator_breaker_open_seconds_total", rosario, 0)
	})

	for range 2 {
		if got := r.query(t, "domain", portalsim.DemoPlate, "rosario"); got != http.StatusServiceUnavailable {
			t.Fatalf("query to a down portal: %d, want 503", got)
		}
	}
	step("tripped", func(t *testing.T, s scrape) {
		s.want(t, "aggregator_breaker_state", rosario, 2)
		s.want(t, "aggregator_breaker_open_seconds_total", rosario, 0)
		s.want(t, "aggregator_breaker_transitions_total", transition("closed", "open"), 1)
		s.want(t, "aggregator_source_calls_total", callLabels("rosario", aggregator.ByDomain, aggregator.Unavailable), 2)
	})

	clk.Advance(10 * time.Second)
	step("open 10s", func(t *testing.T, s scrape) {
		s.want(t, "aggregator_breaker_state", rosario, 2)
		s.want(t, "aggregator_breaker_open_seconds_total", rosario, 10)
		s.want(t, "aggregator_breaker_transitions_total", transition("closed", "open"), 1)
	})
	clk.Advance(15 * time.Second)
	step("open 25s", func(t *testing.T, s scrape) {
		s.want(t, "aggregator_breaker_open_seconds_total", rosario, 25)
		s.want(t, "aggregator_breaker_transitions_total", transition("closed", "open"), 1)
		if _, ok := s.value("aggregator_breaker_transitions_total", transition("open", "half_open")); ok {
			t.Error("a transition was counted while the breaker stayed open")
		}
	})

	if got := r.query(t, "domain", portalsim.DemoPlate, "rosario"); got != http.StatusServiceUnavailable {
		t.Fatalf("query while open: %d, want 503", got)
	}
	step("skipped while open", func(t *testing.T, s scrape) {
		s.want(t, "aggregator_source_calls_total", callLabels("rosario", aggregator.ByDomain, aggregator.SkippedOpen), 1)
		s.want(t, "aggregator_source_calls_total", callLabels("rosario", aggregator.ByDomain, aggregator.Unavailable), 2)
	})

	// open_for is 60s: 50s later the breaker is half-open, as seen by the
	// scrape itself, and its open time stopped at 60s.
	clk.Advance(50 * time.Second)
	step("half-open", func(t *testing.T, s scrape) {
		s.want(t, "aggregator_breaker_state", rosario, 1)
		s.want(t, "aggregator_breaker_open_seconds_total", rosario, 60)
	})
	clk.Advance(30 * time.Second)
	step("still half-open", func(t *testing.T, s scrape) {
		s.want(t, "aggregator_breaker_state", rosario, 1)
		s.want(t, "aggregator_breaker_open_seconds_total", rosario, 60)
		// The scrape that saw the breaker turn half-open may have gathered
		// the transitions counter before that read published the event;
		// by the next scrape it is counted, once.
		s.want(t, "aggregator_breaker_transitions_total", transition("open", "half_open"), 1)
	})

	// The portal recovers; the next query is the probe and closes it.
	if err := r.sim.Portal("rosario").SetFault(portalsim.Fault{Mode: portalsim.Healthy}); err != nil {
		t.Fatal(err)
	}
	if got := r.query(t, "domain", portalsim.DemoPlate, "rosario"); got != http.StatusOK {
		t.Fatalf("probe query: %d, want 200", got)
	}
	clk.Advance(100 * time.Second)
	step("closed again", func(t *testing.T, s scrape) {
		s.want(t, "aggregator_breaker_state", rosario, 0)
		s.want(t, "aggregator_breaker_open_seconds_total", rosario, 60)
		s.want(t, "aggregator_breaker_transitions_total", transition("half_open", "closed"), 1)
		s.want(t, "aggregator_source_calls_total", callLabels("rosario", aggregator.ByDomain, aggregator.Succeeded), 1)
	})

	// Forced open counts as open until it is reset.
	if got := r.do(t, http.MethodPost, "/v1/admin/breakers/rosario/by_domain/open"); got != http.StatusOK {
		t.Fatalf("force open: %d, want 200", got)
	}
	clk.Advance(5 * time.Second)
	step("forced open", func(t *testing.T, s scrape) {
		s.want(t, "aggregator_breaker_state", rosario, 2)
		s.want(t, "aggregator_breaker_open_seconds_total", rosario, 65)
		s.want(t, "aggregator_breaker_transitions_total", transition("closed", "forced_open"), 1)
	})
	clk.Advance(5 * time.Minute)
	step("forced open stays open", func(t *testing.T, s scrape) {
		s.want(t, "aggregator_breaker_state", rosario, 2)
		s.want(t, "aggregator_breaker_open_seconds_total", rosario, 365)
	})
	if got := r.do(t, http.MethodPost, "/v1/admin/breakers/rosario/by_domain/reset"); got != http.StatusOK {
		t.Fatalf("reset: %d, want 200", got)
	}
	clk.Advance(time.Hour)
	step("reset", func(t *testing.T, s scrape) {
		s.want(t, "aggregator_breaker_state", rosario, 0)
		s.want(t, "aggregator_breaker_open_seconds_total", rosario, 365)
		s.want(t, "aggregator_breaker_transitions_total", transition("forced_open", "closed"), 1)
		// The other breakers never opened.
		s.want(t, "aggregator_breaker_open_seconds_total", breakerLabels("caba", aggregator.ByDomain), 0)
		s.want(t, "aggregator_breaker_open_seconds_total", breakerLabels("rosario", aggregator.ByID), 0)
	})
}

// checkHTTPLabels: HTTP metrics are labelled by route pattern (never the
// URL, which carries plates and ids), method and status code.
func checkHTTPLabels(t *testing.T, name string, f *dto.MetricFamily) {
	t.Helper()
	for _, m := range f.GetMetric() {
		for _, l := range m.GetLabel() {
			v := l.GetValue()
			ok := false
			switch l.GetName() {
			case "route":
				ok = v == "unmatched" || (strings.HasPrefix(v, "/") && !strings.ContainsAny(v, "?="))
			case "method":
				ok = slices.Contains([]string{"GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"}, v)
			case "code":
				ok = len(v) == 3 && v[0] >= '1' && v[0] <= '5'
			}
			if !ok {
				t.Errorf("%s: label %s=%q is not bounded", name, l.GetName(), v)
			}
		}
	}
}

// aggregator_build_info is 1, labelled with what the program passed in;
// "unknown" for what it did not know.
func TestBuildInfo(t *testing.T) {
	tests := []struct {
		name  string
		build metrics.BuildInfo
		want  map[string]string
	}{
		{"known", metrics.BuildInfo{Version: "v1.4.2", Revision: "0123abcd", GoVersion: "go1.26.8"},
			map[string]string{"version": "v1.4.2", "revision": "0123abcd", "goversion": "go1.26.8"}},
		{"nothing known", metrics.BuildInfo{},
			map[string]string{"version": "unknown", "revision": "unknown", "goversion": "unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := apptest.Start(t, portalsim.Demo()[:1], `server: {listen: "127.0.0.1:0"}`+"\n", app.Options{Build: tt.build})
			r := &replica{app: env.App, sim: env.Sim, url: env.URL}
			s := r.scrape(t)
			if n := len(s.families["aggregator_build_info"].GetMetric()); n != 1 {
				t.Errorf("aggregator_build_info has %d series, want 1", n)
			}
			s.want(t, "aggregator_build_info", tt.want, 1)
		})
	}
}
