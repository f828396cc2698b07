package deploy_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"go.yaml.in/yaml/v3"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/internal/apptest"
	"github.com/multas/aggregator/portalsim"
)

// exposed maps each metric name a replica exposes, as PromQL sees it
// (histograms as their _bucket, _sum and _count series), to its label
// names.
type exposed map[string]map[string]bool

// targetLabels are the labels Prometheus adds to every scraped series.
var targetLabels = []string{"job", "instance"}

const metricsAdminToken = "deploy-test-metrics-admin-token"

// exposedMetrics starts an aggregator over two demo portals (caba healthy,
// rosario down) and a SPEC 12 one (errflag, healthy), and drives it until
// every kind of metric has series: a
// synchronous query (source calls, their durations, the query and its
// duration; rosario's breaker trips at its first failure, a transition),
// and an asynchronous one delivered to a webhook receiver (deliveries).
// Then it scrapes GET /metrics as Prometheus would.
func exposedMetrics(t *testing.T) exposed {
	t.Helper()
	var js []portalsim.Jurisdiction
	for _, j := range portalsim.Demo() {
		if j.ID == "caba" || j.ID == "rosario" {
			js = append(js, j)
		}
	}
	// A portal of SPEC 12 for the mapping health of SPEC 13: it has an
	// errors rule (whose count starts at zero), and actas without a
	// place or an amount (unmapped fields).
	js = append(js, portalsim.NewJurisdiction(portalsim.ShapeErrorFlag, "errflag", "Mesa de infracciones", portalsim.RealRecords()))
	env := apptest.Start(t, js, fmt.Sprintf(`server: {listen: "127.0.0.1:0", admin_token: %q}
query: {deadline: 5s, max_deadline: 10s}
async: {max_wait: 1m, release_rps: 5}
webhooks: {signing_secret: %q, allow_private: true, backoff: 100ms}
defaults:
  timeout: 2s
  retry: {max_retries: 0}
  breaker: {window: 60s, min_calls: 1, failure_ratio: 0.5, consecutive_failures: 1, open_for: 60s}
`, metricsAdminToken, testEnv["WEBHOOK_SECRET"]), app.Options{})

	received := make(chan struct{}, 1)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
		select {
		case received <- struct{}{}:
		default:
		}
	}))
	t.Cleanup(recv.Close)

	q := url.Values{"domain": {portalsim.DemoPlate}}
	if code, body := call(t, http.MethodGet, env.URL+"/v1/infractions?"+q.Encode(), ""); code != http.StatusOK {
		t.Fatalf("query: %d %s", code, body)
	}
	body := fmt.Sprintf(`{"domain": %q, "sources": ["caba"], "callback_url": %q}`, portalsim.DemoPlate, recv.URL+"/hook")
	if code, body := call(t, http.MethodPost, env.URL+"/v1/queries", body); code != http.StatusAccepted {
		t.Fatalf("async query: %d %s", code, body)
	}
	select {
	case <-received:
	case <-time.After(30 * time.Second):
		t.Fatal("the webhook was not delivered within 30s")
	}

	// The delivery is counted once the receiver's answer is read: scrape
	// until it shows (bounded).
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := scrapeMetrics(t, env.URL)
		if _, ok := got["aggregator_webhook_deliveries_total"]; ok {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatal("aggregator_webhook_deliveries_total not exposed 30s after the delivery")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// call sends a request and returns its status and body.
func call(t *testing.T, method, u, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// scrapeMetrics reads GET /metrics in the text exposition format.
func scrapeMetrics(t *testing.T, base string) exposed {
	t.Helper()
	code, body := call(t, http.MethodGet, base+"/metrics", "")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return exposedFrom(fams)
}

// exposedFrom lists the series names of the families, with their labels.
func exposedFrom(fams map[string]*dto.MetricFamily) exposed {
	e := exposed{}
	add := func(name string, labels map[string]bool, extra ...string) {
		set := map[string]bool{}
		for l := range labels {
			set[l] = true
		}
		for _, l := range extra {
			set[l] = true
		}
		e[name] = set
	}
	for name, f := range fams {
		labels := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = true
			}
		}
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			add(name+"_bucket", labels, "le")
			add(name+"_sum", labels)
			add(name+"_count", labels)
		case dto.MetricType_SUMMARY:
			add(name, labels, "quantile")
			add(name+"_sum", labels)
			add(name+"_count", labels)
		default:
			add(name, labels)
		}
	}
	return e
}

// exprProblems parses a PromQL expression and lists what is wrong with
// it: a syntax error, a selector without a metric name, a metric the
// replicas do not expose, a label matcher on a label the metric has not.
// It returns the metric names the expression selects.
func exprProblems(expr string, e exposed) (names, problems []string) {
	node, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return nil, []string{err.Error()}
	}
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if agg, ok := n.(*parser.AggregateExpr); ok && !agg.Without {
			problems = append(problems, groupingProblems(agg, e)...)
		}
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == model.MetricNameLabel && name == "" && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			problems = append(problems, fmt.Sprintf("%s: no metric name: every selector names one metric", vs))
			return nil
		}
		names = append(names, name)
		labels, ok := e[name]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: the aggregator exposes no metric %s", vs, name))
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name != model.MetricNameLabel && !labels[m.Name] && !slices.Contains(targetLabels, m.Name) {
				problems = append(problems, fmt.Sprintf("%s: %s has no label %q", vs, name, m.Name))
			}
		}
		return nil
	})
	return names, problems
}

// groupingProblems lists the labels of `by (...)` that no series under
// the aggregation carries.
func groupingProblems(agg *parser.AggregateExpr, e exposed) []string {
	have := map[string]bool{}
	for _, l := range targetLabels {
		have[l] = true
	}
	parser.Inspect(agg.Expr, func(n parser.Node, _ []parser.Node) error {
		switch n := n.(type) {
		case *parser.VectorSelector:
			for l := range e[n.Name] {
				have[l] = true
			}
		case *parser.Call:
			if n.Func.Name == "label_replace" || n.Func.Name == "label_join" {
				have["*"] = true // makes labels of its own
			}
		}
		return nil
	})
	var problems []string
	for _, l := range agg.Grouping {
		if !have[l] && !have["*"] {
			problems = append(problems, fmt.Sprintf("%s: no series under it has the label %q", agg, l))
		}
	}
	return problems
}

// grafanaVar is a variable reference of a Grafana query: $name, ${name}
// or ${name:format}.
var grafanaVar = regexp.MustCompile(`\$(?:\{(\w+)(?::\w+)?\}|(\w+))`)

// grafanaIntervals are Grafana's built-in interval variables.
var grafanaIntervals = []string{"__interval", "__rate_interval", "__range"}

// grafanaExpr is expr as Grafana sends it to Prometheus: the interval
// variables a duration, the dashboard's own (regex-matched, multi-value)
// variables `.*`. A reference to any other variable is an error.
func grafanaExpr(expr string, vars []string) (string, error) {
	var err error
	out := grafanaVar.ReplaceAllStringFunc(expr, func(ref string) string {
		m := grafanaVar.FindStringSubmatch(ref)
		name := m[1] + m[2]
		switch {
		case slices.Contains(grafanaIntervals, name):
			return "5m"
		case slices.Contains(vars, name):
			return ".*"
		}
		err = fmt.Errorf("unknown variable $%s", name)
		return ref
	})
	return out, err
}

// labelValues is a Grafana variable query over Prometheus.
var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// promQL is one PromQL expression of a file, with where it is.
type promQL struct {
	where, expr string
}

// dashboardExprs walks a Grafana dashboard: every "expr" member anywhere
// (panel targets, annotations), with the variables substituted.
func dashboardExprs(t *testing.T, dash map[string]any) ([]promQL, []string) {
	t.Helper()
	var vars []string
	tmpl, _ := dash["templating"].(map[string]any)
	list, _ := tmpl["list"].([]any)
	for _, v := range list {
		if m, ok := v.(map[string]any); ok {
			name, _ := m["name"].(string)
			vars = append(vars, name)
		}
	}
	var out []promQL
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				if s, ok := c.(string); ok && k == "expr" {
					e, err := grafanaExpr(s, vars)
					if err != nil {
						t.Errorf("%s: %v", where, err)
					}
					out = append(out, promQL{where, e})
					continue
				}
				walk(where+"."+k, c)
			}
		case []any:
			for i, c := range v {
				if m, ok := c.(map[string]any); ok {
					if title, ok := m["title"].(string); ok {
						walk(fmt.Sprintf("%s[%d %q]", where, i, title), c)
						continue
					}
					if name, ok := m["name"].(string); ok {
						walk(fmt.Sprintf("%s[%d %q]", where, i, name), c)
						continue
					}
				}
				walk(fmt.Sprintf("%s[%d]", where, i), c)
			}
		}
	}
	walk("dashboard", dash)
	return out, vars
}

// alertExprs lists the expressions of a Prometheus rules file.
func alertExprs(t *testing.T, data []byte) []promQL {
	t.Helper()
	var rules struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &rules); err != nil {
		t.Fatal(err)
	}
	var out []promQL
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, promQL{g.Name + "/" + r.Alert + r.Record, r.Expr})
		}
	}
	return out
}

// TestPromQL: every PromQL expression of the Grafana dashboard and of the
// alert rules parses, and names only metrics, and labels of them, that a
// running aggregator exposes on GET /metrics; the dashboard shows what
// SPEC 10 asks of it and the rules watch cumulative open time (SPEC 7).
func TestPromQL(t *testing.T) {
	metrics := exposedMetrics(t)

	check := func(t *testing.T, exprs []promQL, want []string) {
		if len(exprs) == 0 {
			t.Fatal("no PromQL expression found")
		}
		used := map[string]bool{}
		for _, q := range exprs {
			names, problems := exprProblems(q.expr, metrics)
			for _, p := range problems {
				t.Errorf("%s: %s", q.where, p)
			}
			for _, n := range names {
				used[n] = true
			}
		}
		for _, n := range want {
			if !used[n] {
				t.Errorf("no expression uses %s", n)
			}
		}
	}

	t.Run("grafana/aggregator.json", func(t *testing.T) {
		var dash map[string]any
		if err := json.Unmarshal(read(t, "deploy", "grafana", "aggregator.json"), &dash); err != nil {
			t.Fatal(err)
		}
		exprs, _ := dashboardExprs(t, dash)
		check(t, exprs, []string{
			"aggregator_breaker_state",
			"aggregator_breaker_open_seconds_total",
			"aggregator_breaker_transitions_total",
			"aggregator_source_calls_total",
			"aggregator_source_call_duration_seconds_bucket",
			"aggregator_queries_total",
			"aggregator_query_duration_seconds_bucket",
			"aggregator_webhook_deliveries_total",
			"aggregator_dlq_entries",
			"aggregator_store_degraded",
			"aggregator_source_lookups_total",
			"aggregator_source_items_total",
			"aggregator_source_unmapped_total",
			"aggregator_source_shape_changes_total",
			"aggregator_source_errors_matched_total",
		})
		// Variable queries: label_values(metric, label).
		tmpl, _ := dash["templating"].(map[string]any)
		list, _ := tmpl["list"].([]any)
		for _, v := range list {
			m, _ := v.(map[string]any)
			q, _ := m["query"].(map[string]any)
			text, _ := q["query"].(string)
			lv := labelValues.FindStringSubmatch(text)
			if lv == nil {
				t.Errorf("variable %v: query %q is not label_values(metric, label)", m["name"], text)
				continue
			}
			if labels, ok := metrics[lv[1]]; !ok || !labels[lv[2]] {
				t.Errorf("variable %v: %s{%s} is not exposed", m["name"], lv[1], lv[2])
			}
		}
	})

	t.Run("prometheus/alerts.yml", func(t *testing.T) {
		check(t, alertExprs(t, read(t, "deploy", "prometheus", "alerts.yml")), []string{
			"aggregator_breaker_open_seconds_total",
			"aggregator_source_shape_changes_total",
			"aggregator_source_lookups_total",
			"aggregator_source_unmapped_total",
			"aggregator_source_items_total",
		})
	})
}

// TestExprProblems: the checker of TestPromQL catches what it must.
func TestExprProblems(t *testing.T) {
	t.Parallel()
	e := exposed{
		"aggregator_source_calls_total":                  {"source": true, "operation": true, "outcome": true},
		"aggregator_source_call_duration_seconds_bucket": {"source": true, "operation": true, "le": true},
	}
	tests := []struct {
		expr    string
		problem string // "" for none
	}{
		{`sum by (outcome) (rate(aggregator_source_calls_total{source="caba", instance="a:8080"}[5m]))`, ""},
		{`histogram_quantile(0.95, sum by (le) (rate(aggregator_source_call_duration_seconds_bucket[5m])))`, ""},
		{`{__name__="aggregator_source_calls_total", outcome="timeout"}`, ""},
		{`rate(aggregator_source_calls_total[5m]`, "unclosed"},
		{`aggregator_source_calls`, "exposes no metric aggregator_source_calls"},
		{`aggregator_source_call_duration_seconds`, "exposes no metric"},
		{`aggregator_source_calls_total{breaker="caba"}`, `has no label "breaker"`},
		{`{__name__=~"aggregator_.*"}`, "no metric name"},
		{`sum by (source, instance) (aggregator_source_calls_total)`, ""},
		{`sum by (code) (aggregator_source_calls_total)`, `no series under it has the label "code"`},
		{`sum without (code) (aggregator_source_calls_total)`, ""},
	}
	for _, tt := range tests {
		_, problems := exprProblems(tt.expr, e)
		switch {
		case tt.problem == "" && len(problems) > 0:
			t.Errorf("%s: problems %q, want none", tt.expr, problems)
		case tt.problem != "" && (len(problems) == 0 || !strings.Contains(strings.Join(problems, "\n"), tt.problem)):
			t.Errorf("%s: problems %q, want one with %q", tt.expr, problems, tt.problem)
		}
	}
}

func TestGrafanaExpr(t *testing.T) {
	t.Parallel()
	vars := []string{"breaker", "source"}
	tests := []struct {
		in, want string
		err      bool
	}{
		{`rate(x{source=~"$source"}[$__rate_interval])`, `rate(x{source=~".*"}[5m])`, false},
		{`x{breaker=~"${breaker}"}[$__range]`, `x{breaker=~".*"}[5m]`, false},
		{`x{breaker=~"${breaker:regex}"}`, `x{breaker=~".*"}`, false},
		{`x{job="$job"}`, "", true},
	}
	for _, tt := range tests {
		got, err := grafanaExpr(tt.in, vars)
		if (err != nil) != tt.err || (!tt.err && got != tt.want) {
			t.Errorf("grafanaExpr(%q) = %q, %v; want %q (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}
