package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/multas/aggregator/portalsim"
)

// syncBuffer is an io.Writer that run may write while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// started runs run with args until the test ends, and waits for its
// banner to contain ready. It returns the output so far, a stop func
// that cancels run's context and returns its error.
func started(t *testing.T, ready string, args ...string) (*syncBuffer, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, append([]string{"portalsim"}, args...), stdout, stderr) }()
	var once sync.Once
	var runErr error
	stop := func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-errc:
			case <-time.After(10 * time.Second):
				t.Fatalf("run did not return after its context was cancelled")
			}
		})
		return runErr
	}
	t.Cleanup(func() { stop() })
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(stdout.String(), ready) {
		select {
		case err := <-errc:
			t.Fatalf("run returned early: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("run did not print %q:\n%s", ready, stdout)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return stdout, stop
}

// status is the status of an answer, whose body it closes; 0 on error.
func status(resp *http.Response, err error) (int, error) {
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

var baseURL = regexp.MustCompile(`(?m)^(\w+)\s.*\s(http://127\.0\.0\.1:\d+)$`)

// baseURLs reads the id → base URL table of the banner.
func baseURLs(banner string) map[string]string {
	m := make(map[string]string)
	for _, sub := range baseURL.FindAllStringSubmatch(banner, -1) {
		m[sub[1]] = sub[2]
	}
	return m
}

func TestRunServesTheDemoUntilCancelled(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "sources.yaml")
	stdout, stop := started(t, "Aggregator sources written", "-listen", "127.0.0.1:0", "-demo", "-config-out", out)
	urls := baseURLs(stdout.String())
	for _, j := range portalsim.DemoAll() {
		if urls[j.ID] == "" {
			t.Errorf("the banner lacks %s:\n%s", j.ID, stdout)
		}
	}
	written, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if want := portalsim.AggregatorYAML(portalsim.DemoAll(), urls); string(written) != want {
		t.Errorf("-config-out wrote\n%s\nwant\n%s", written, want)
	}

	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(client.CloseIdleConnections)
	if got, err := status(client.Get(urls["caba"] + "/api/v2/actas?dominio=" + portalsim.DemoPlate)); got != http.StatusOK {
		t.Errorf("caba by_domain: %d %v, want 200", got, err)
	}
	// The demo speaks every dialect: a SOAP call to neuquen, for one.
	soap := `<soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:m="urn:multas"><soapenv:Body>` +
		`<m:ConsultarPorDominio><m:dominio>` + portalsim.DemoPlate + `</m:dominio></m:ConsultarPorDominio></soapenv:Body></soapenv:Envelope>`
	soapReq, _ := http.NewRequest(http.MethodPost, urls["neuquen"]+"/ws/MultasService", strings.NewReader(soap))
	soapReq.Header.Set("Content-Type", "text/xml; charset=utf-8")
	soapReq.Header.Set("SOAPAction", `"urn:multas#ConsultarPorDominio"`)
	if resp, err := client.Do(soapReq); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "NQN-2026-001234") {
			t.Errorf("neuquen SOAP: %d %s", resp.StatusCode, b)
		}
	}
	for _, s := range []string{"format: xml", "format: html", "pagination:", "oauth2:", "session:"} {
		if !strings.Contains(string(written), s) {
			t.Errorf("the sources lack %q", s)
		}
	}

	req, _ := http.NewRequest(http.MethodPut, urls["caba"]+"/_sim/fault", strings.NewReader(`{"mode":"throttle","retry_after":"3s"}`))
	if got, err := status(client.Do(req)); got != http.StatusOK {
		t.Fatalf("PUT /_sim/fault: %d %v, want 200", got, err)
	}
	if got, err := status(client.Get(urls["caba"] + "/api/v2/actas?dominio=" + portalsim.DemoPlate)); got != http.StatusTooManyRequests {
		t.Errorf("caba after PUT throttle: %d %v, want 429", got, err)
	}

	// The index lists the portals with their current faults.
	index := strings.TrimSuffix(regexp.MustCompile(`index (\S+)`).FindStringSubmatch(stdout.String())[1], "/")
	resp, err := client.Get(index + "/")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Portals []struct {
			ID    string          `json:"id"`
			URL   string          `json:"url"`
			Fault portalsim.Fault `json:"fault"`
		} `json:"portals"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Portals) != len(urls) || list.Portals[0].Fault.Mode != portalsim.Throttle {
		t.Errorf("index = %+v, %v; want every portal, caba throttling", list, err)
	}
	if resp, err := client.Get(index + "/sources.yaml"); err != nil {
		t.Error(err)
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != string(written) {
			t.Errorf("GET /sources.yaml = %s, want what -config-out wrote", b)
		}
	}

	// A call hanging on salta does not hold the shutdown up.
	hung := make(chan error, 1)
	go func() {
		resp, err := client.Get(urls["salta"] + "/v1/vehiculos/" + portalsim.DemoPlate + "/multas")
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if err := stop(); err != nil {
		t.Errorf("run returned %v after cancel, want nil", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("shutdown took %v", d)
	}
	if err := <-hung; err == nil {
		t.Errorf("the hanging call got an answer after shutdown")
	}
	if _, err := client.Get(urls["caba"] + "/_sim/fault"); err == nil {
		t.Errorf("caba still answers after shutdown")
	}
}

func TestRunPrintsSourcesWithoutConfigOut(t *testing.T) {
	t.Parallel()
	stdout, stop := started(t, "status_map", "-listen", "127.0.0.1:0")
	out := stdout.String()
	for _, s := range []string{"sources:", "BEHAVIOUR", "flaky (50% 503, Retry-After 2s)", "/_sim/fault"} {
		if !strings.Contains(out, s) {
			t.Errorf("stdout lacks %q:\n%s", s, out)
		}
	}
	for _, s := range []string{portalsim.DemoPlate, portalsim.DemoCUIT, portalsim.DemoDNI} {
		if strings.Contains(out, s) {
			t.Errorf("stdout shows personal data %q", s)
		}
	}
	if err := stop(); err != nil {
		t.Errorf("run: %v", err)
	}
}

func TestRunServesAJurisdictionsFile(t *testing.T) {
	t.Parallel()
	j := portalsim.Jurisdiction{
		ID: "ushuaia", Name: "Municipalidad de Ushuaia", Shape: portalsim.ShapeMultas,
		Fault: portalsim.Fault{Mode: portalsim.Flaky, FailRate: 1, RetryAfter: 7 * time.Second},
		Records: []portalsim.Record{{Domain: "AD001AA", ID: "USH-1", Date: "2026-01-02T03:04:05",
			Amount: "100.00", Status: portalsim.StatusUnpaid}},
	}
	b, err := json.Marshal([]portalsim.Jurisdiction{j})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "js.json")
	if err := os.WriteFile(file, b, 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, _ := started(t, "status_map", "-listen", "127.0.0.1:0", "-jurisdictions", file)
	url := baseURLs(stdout.String())["ushuaia"]
	resp, err := http.Get(url + "/v1/vehiculos/AD001AA/multas")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "7" {
		t.Errorf("ushuaia: %d Retry-After %q, want 503 and 7", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

func TestRunServesOneDialectStandalone(t *testing.T) {
	t.Parallel()
	stdout, _ := started(t, "status_map", "-listen", "127.0.0.1:0", "-only", "tucuman, chubut")
	urls := baseURLs(stdout.String())
	if len(urls) != 2 || urls["tucuman"] == "" || urls["chubut"] == "" {
		t.Fatalf("-only tucuman,chubut served %v", urls)
	}
	if !strings.Contains(stdout.String(), "html") || strings.Contains(stdout.String(), `id: "caba"`) {
		t.Errorf("banner and sources:\n%s", stdout)
	}
	resp, err := http.Get(urls["tucuman"] + "/infracciones/consulta.asp?patente=" + portalsim.DemoPlate)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/html" || !strings.Contains(string(b), "C\xf3rdoba") {
		t.Errorf("tucuman: %d %q, want a windows-1252 page", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	badJSON := write("bad.json", `[{"id":`)
	unknownKey := write("unknown.json", `[{"id":"x","shape":"multas","colour":"red"}]`)
	invalid := write("invalid.json", `[{"id":"x","shape":"fax"}]`)
	empty := write("empty.json", `[]`)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"-verbose"}, "flag provided but not defined"},
		{"extra argument", []string{"serve"}, "unexpected arguments"},
		{"demo and file", []string{"-demo", "-jurisdictions", empty}, "exclude each other"},
		{"missing file", []string{"-jurisdictions", filepath.Join(dir, "none.json")}, "no such file"},
		{"bad JSON", []string{"-jurisdictions", badJSON}, "bad.json"},
		{"unknown key", []string{"-jurisdictions", unknownKey}, "colour"},
		{"invalid jurisdiction", []string{"-listen", "127.0.0.1:0", "-jurisdictions", invalid}, "unknown shape"},
		{"no jurisdictions", []string{"-jurisdictions", empty}, "no jurisdictions"},
		{"unknown -only id", []string{"-only", "caba,atlantida,narnia"}, "no jurisdiction atlantida, narnia"},
		{"empty -only", []string{"-only", ","}, "no ids"},
		{"bad listen address", []string{"-listen", "nowhere"}, "nowhere"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"portalsim"}, tt.args...), &stdout, &stderr)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("run(%q) = %v, want an error about %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestNextPort(t *testing.T) {
	t.Parallel()
	tests := []struct{ bound, asked, want string }{
		{"127.0.0.1:9100", "127.0.0.1:9100", "127.0.0.1:9101"},
		{"127.0.0.1:41234", "127.0.0.1:0", "127.0.0.1:0"},
		{"[::1]:9100", "[::1]:9100", "[::1]:9101"},
		{"127.0.0.1:9100", "localhost:9100", "127.0.0.1:9101"},
	}
	for _, tt := range tests {
		got, err := nextPort(tt.bound, tt.asked)
		if err != nil || got != tt.want {
			t.Errorf("nextPort(%s, %s) = %s, %v; want %s", tt.bound, tt.asked, got, err, tt.want)
		}
	}
}
