package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP collector: it keeps every span exported to
// POST /v1/traces, decoded from protobuf as a real collector does.
type otlpReceiver struct {
	mu   sync.Mutex
	reqs []*collectortrace.ExportTraceServiceRequest
	errs []string
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		http.NotFound(w, r)
		return
	}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = zr
	}
	b, err := io.ReadAll(io.LimitReader(body, 16<<20))
	req := &collectortrace.ExportTraceServiceRequest{}
	if err == nil {
		err = proto.Unmarshal(b, req)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.errs = append(o.errs, err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	o.reqs = append(o.reqs, req)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// spans are all the spans received, with the text of every export.
func (o *otlpReceiver) spans() ([]*tracepb.Span, []*tracepb.ResourceSpans, string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var spans []*tracepb.Span
	var res []*tracepb.ResourceSpans
	var text strings.Builder
	for _, r := range o.reqs {
		text.WriteString(prototext.Format(r))
		for _, rs := range r.ResourceSpans {
			res = append(res, rs)
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
	}
	return spans, res, text.String()
}

func attr(attrs []*commonpb.KeyValue, key string) (*commonpb.AnyValue, bool) {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return nil, false
}

func strAttr(attrs []*commonpb.KeyValue, key string) string {
	v, _ := attr(attrs, key)
	return v.GetStringValue()
}

// The real binary, with OTEL_EXPORTER_OTLP_ENDPOINT set, exports over
// OTLP/HTTP (SPEC 10): the server span is the child of the caller's
// traceparent and is named by the route template; one lookup span per
// source carries the outcome attributes (and the problem type of the one
// that failed); each portal call is a client span named by its method and
// path template (its url.template), whose traceparent the portal received;
// the access log line and the latency exemplars carry the trace id; and no
// name, attribute or event anywhere holds the plate or the query string.
func TestTracingExportsSpans(t *testing.T) {
	const plate = "AB123CD"
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const parentID = "00f067aa0ba902b7"

	receiver := &otlpReceiver{}
	collector := httptest.NewServer(receiver)
	t.Cleanup(collector.Close)

	var pmu sync.Mutex
	traceparents := map[string]string{}
	portal := func(name string, status int) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			pmu.Lock()
			traceparents[name] = r.Header.Get("traceparent")
			pmu.Unlock()
			if status != http.StatusOK {
				w.WriteHeader(status)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"actas": [{"nro": "Q-1"}]}`)
		}))
		t.Cleanup(s.Close)
		return s
	}
	good, bad := portal("good", http.StatusOK), portal("bad", http.StatusServiceUnavailable)

	addr := freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "aggregator.yaml")
	writeFile(t, cfg, fmt.Sprintf(`
server: {listen: %q, shutdown_delay: 0s}
defaults: {timeout: 5s, retry: {max_retries: 0}}
sources:
  - id: good
    jurisdiction: Good
    base_url: %s
    operations: {by_domain: {path: "/actas?dominio={domain}"}}
    response: {items: /actas, fields: {id: /nro}}
  - id: bad
    jurisdiction: Bad
    breaker_key: bad-portal
    base_url: %s
    operations: {by_domain: {path: "/actas/{domain}"}}
    response: {items: /actas, fields: {id: /nro}}
`, addr, good.URL, bad.URL))

	cmd := exec.Command(binary(t), "-config", cfg, "-log-level", "debug")
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") {
			env = append(env, kv)
		}
	}
	cmd.Env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+collector.URL, "OTEL_BSP_SCHEDULE_DELAY=100",
		"OTEL_SERVICE_NAME=aggregator-test")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
		}
	})
	base := "http://" + addr
	waitHealthy(t, base)

	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	req, _ := http.NewRequest(http.MethodGet, base+"/v1/infractions?domain="+plate, nil)
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("query: %d %s", resp.StatusCode, body)
	}

	// The latency histograms carry the trace id as exemplar in OpenMetrics.
	mreq, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	mreq.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	mresp, err := client.Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(mresp.Body)
	mresp.Body.Close()
	if ct := mresp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("/metrics asked for OpenMetrics answered %q", ct)
	}
	exemplar := `# {trace_id="` + traceID + `"}`
	for _, family := range []string{"aggregator_http_request_duration_seconds_bucket", "aggregator_source_call_duration_seconds_bucket", "aggregator_query_duration_seconds_bucket"} {
		found := false
		for _, l := range strings.Split(string(metrics), "\n") {
			if strings.HasPrefix(l, family) && strings.Contains(l, exemplar) {
				found = true
			}
		}
		if !found {
			t.Errorf("no %s line with exemplar %s:\n%s", family, exemplar, grep(string(metrics), family))
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit: %v\n%s", err, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the process did not exit\n%s", logs.String())
	}

	spans, resources, text := receiver.spans()
	receiver.mu.Lock()
	if len(receiver.errs) > 0 {
		t.Errorf("undecodable exports: %v", receiver.errs)
	}
	receiver.mu.Unlock()
	if len(spans) == 0 {
		t.Fatalf("no spans exported\n%s", logs.String())
	}
	for _, rs := range resources {
		if got := strAttr(rs.GetResource().GetAttributes(), "service.name"); got != "aggregator-test" {
			t.Errorf("service.name = %q, want aggregator-test", got)
		}
	}
	// Nothing exported holds the plate, nor the portal URLs that carry it:
	// the portal calls are named by their path templates.
	for _, s := range []string{plate, strings.ToLower(plate), "dominio"} {
		if strings.Contains(text, s) {
			t.Errorf("the exported spans contain %q:\n%s", s, text)
		}
	}

	hexID := func(b []byte) string { return hex.EncodeToString(b) }
	byID := map[string]*tracepb.Span{}
	for _, s := range spans {
		byID[hexID(s.SpanId)] = s
		// Outside the query's trace: only the probes and the scrape.
		if got := hexID(s.TraceId); got != traceID && s.Name != "GET /healthz" && s.Name != "GET /metrics" {
			t.Errorf("span %q in trace %s, want %s", s.Name, got, traceID)
		}
	}

	// The server span: child of the caller's span, named by the route.
	var server *tracepb.Span
	for _, s := range spans {
		if s.Kind == tracepb.Span_SPAN_KIND_SERVER && s.Name == "GET /v1/infractions" {
			server = s
		}
	}
	if server == nil {
		t.Fatalf("no server span GET /v1/infractions among:\n%s", text)
	}
	if got := hexID(server.ParentSpanId); got != parentID {
		t.Errorf("server span parent %s, want the caller's %s", got, parentID)
	}
	if v, _ := attr(server.Attributes, "http.response.status_code"); v.GetIntValue() != 200 {
		t.Errorf("server span status code %v, want 200", v)
	}

	// One lookup span per source, children of the server span.
	tests := []struct {
		source, breakerKey, outcome, problemType string
		template                                 string // of its portal call
	}{
		{"good", "good", "succeeded", "", "/actas"},
		{"bad", "bad-portal", "unavailable", "source-unavailable", "/actas/{domain}"},
	}
	for _, tt := range tests {
		var lookups []*tracepb.Span
		for _, s := range spans {
			if strAttr(s.Attributes, "aggregator.source") == tt.source {
				lookups = append(lookups, s)
			}
		}
		if len(lookups) != 1 {
			t.Errorf("%s: %d lookup spans, want 1", tt.source, len(lookups))
			continue
		}
		l := lookups[0]
		if !bytes.Equal(l.ParentSpanId, server.SpanId) {
			t.Errorf("%s: lookup span's parent is not the server span", tt.source)
		}
		for key, want := range map[string]string{
			"aggregator.operation": "by_domain", "aggregator.breaker_key": tt.breakerKey, "aggregator.outcome": tt.outcome,
		} {
			if got := strAttr(l.Attributes, key); got != want {
				t.Errorf("%s: %s = %q, want %q", tt.source, key, got, want)
			}
		}
		pt, hasPT := attr(l.Attributes, "aggregator.problem_type")
		switch {
		case tt.problemType == "" && hasPT:
			t.Errorf("%s: problem_type %v on a success", tt.source, pt)
		case tt.problemType != "" && !strings.HasSuffix(pt.GetStringValue(), tt.problemType):
			t.Errorf("%s: problem_type %q, want …%s", tt.source, pt.GetStringValue(), tt.problemType)
		}
		if v, _ := attr(l.Attributes, "aggregator.attempts"); v.GetIntValue() != 1 {
			t.Errorf("%s: attempts %v, want 1", tt.source, v)
		}

		// Its portal call: a client span, whose traceparent the portal got.
		var calls []*tracepb.Span
		for _, s := range spans {
			if s.Kind == tracepb.Span_SPAN_KIND_CLIENT && bytes.Equal(s.ParentSpanId, l.SpanId) {
				calls = append(calls, s)
			}
		}
		if len(calls) != 1 {
			t.Errorf("%s: %d client spans under its lookup, want 1", tt.source, len(calls))
			continue
		}
		pmu.Lock()
		got := traceparents[tt.source]
		pmu.Unlock()
		if want := "00-" + traceID + "-" + hexID(calls[0].SpanId) + "-01"; got != want {
			t.Errorf("%s: portal got traceparent %q, want %q", tt.source, got, want)
		}
		if want := "GET " + tt.template; calls[0].Name != want {
			t.Errorf("%s: client span named %q, want %q", tt.source, calls[0].Name, want)
		}
		if got := strAttr(calls[0].Attributes, "url.template"); got != tt.template {
			t.Errorf("%s: url.template %q, want %q", tt.source, got, tt.template)
		}
		for _, kv := range calls[0].Attributes {
			switch kv.Key {
			case "http.request.method", "url.template", "server.address", "server.port", "http.response.status_code", "error.type":
			default:
				t.Errorf("%s: client span attribute %s = %v: not one of the allowed", tt.source, kv.Key, kv.Value)
			}
		}
	}

	// The access log line of the query carries the trace id.
	var logged bool
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		if l["msg"] == "request" && l["route"] == "/v1/infractions" {
			logged = true
			if l["trace_id"] != traceID {
				t.Errorf("access log line trace_id %v, want %s: %s", l["trace_id"], traceID, sc.Text())
			}
		}
	}
	if !logged {
		t.Errorf("no access log line for the query:\n%s", logs.String())
	}
}
