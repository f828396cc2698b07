package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// testVersion is the version the test binary is built with.
const testVersion = "v9.9.9-test"

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// binary builds the real aggregator once for the package's tests, as a
// release is built: with its version set by -ldflags -X main.version.
func binary(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "aggregator-bin-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "aggregator")
		cmd := exec.Command("go", "build", "-o", built.path, "-ldflags", "-X main.version="+testVersion, ".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.path
}

func removeBinary() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// stampedRevision is the VCS revision the toolchain stamped into bin, as
// `go version -m` reads it ("-dirty" for a modified tree), or "unknown"
// when it stamped none (no VCS, or GOFLAGS=-buildvcs=false).
func stampedRevision(t *testing.T, bin string) string {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	rev, dirty := "unknown", ""
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 || f[0] != "build" {
			continue
		}
		if v, ok := strings.CutPrefix(f[1], "vcs.revision="); ok {
			rev = v
		}
		if f[1] == "vcs.modified=true" {
			dirty = "-dirty"
		}
	}
	if rev == "unknown" {
		return rev
	}
	return rev + dirty
}

// The real binary says which build it is, and refuses what it cannot run
// with exit status 2 without starting anything.
func TestBinaryCommandLine(t *testing.T) {
	bin := binary(t)
	wantRev := stampedRevision(t, bin)
	for _, args := range [][]string{{"version"}, {"-version"}} {
		out, err := exec.Command(bin, args...).Output()
		if err != nil {
			t.Fatalf("aggregator %v: %v", args, err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 3 {
			t.Fatalf("aggregator %v printed %q, want 3 lines", args, out)
		}
		if lines[0] != "aggregator "+testVersion {
			t.Errorf("aggregator %v: %q, want the -ldflags version %s", args, lines[0], testVersion)
		}
		if rev := strings.TrimSpace(strings.TrimPrefix(lines[1], "revision")); rev != wantRev {
			t.Errorf("aggregator %v: revision %q, want the stamped %q", args, rev, wantRev)
		}
		if got := strings.TrimSpace(strings.TrimPrefix(lines[2], "go")); got != runtime.Version() {
			t.Errorf("aggregator %v: go %q, want %s", args, got, runtime.Version())
		}
	}
	for _, args := range [][]string{{"serve"}, {"-bogus"}, {"-listen", "0.0.0.0:8080"}, {"-listen", "127.0.0.1:0", "extra"},
		{"validate", "-bogus"}, {"query", "--plate", "AB123CD", "--server", "http://127.0.0.1:1"}, {"sources", "check", "-nope"},
		{"version", "--short"}, {"help", "nosuch"}} {
		cmd := exec.Command(bin, args...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		done := make(chan error, 1)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 2 {
				t.Errorf("aggregator %v: %v, want exit status 2", args, err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
			t.Fatalf("aggregator %v kept running (a demo started?)", args)
		}
		if stdout.Len() > 0 || !strings.Contains(stderr.String(), "usage: aggregator") && !strings.Contains(stderr.String(), "loopback only") {
			t.Errorf("aggregator %v: stdout %q, stderr %q; want the usage or the reason on stderr only", args, stdout.String(), stderr.String())
		}
	}
}

// SIGTERM drains the real binary (SPEC 10): /readyz turns 503 at once; for
// server.shutdown_delay new connections and requests are still served;
// then the server stops accepting, the requests in flight finish, and the
// process exits 0. The portal takes 4 s to answer, the delay is 2 s, so
// that a query started before the signal and one started during the delay
// are both still running when the server stops accepting.
func TestGracefulDrain(t *testing.T) {
	const portalDelay = 4 * time.Second
	arrived := make(chan struct{}, 8)
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-time.After(portalDelay):
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"actas": [{"nro": "Q-1"}]}`)
	}))
	t.Cleanup(portal.Close)

	addr := freeAddr(t)
	cfg := filepath.Join(t.TempDir(), "aggregator.yaml")
	writeFile(t, cfg, fmt.Sprintf(`
server: {listen: %q, shutdown_delay: 2s, shutdown_timeout: 20s}
query: {deadline: 10s, max_deadline: 10s}
defaults: {timeout: 10s, retry: {max_retries: 0}}
sources:
  - id: slow
    jurisdiction: Slow
    base_url: %s
    operations: {by_domain: {path: "/actas?dominio={domain}"}}
    response: {items: /actas, fields: {id: /nro}}
`, addr, portal.URL))

	cmd := exec.Command(binary(t), "-config", cfg, "-log-level", "debug")
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var exitErr error
	go func() {
		exitErr = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	base := "http://" + addr
	waitHealthy(t, base)

	// Every request on a new connection: one kept alive from before the
	// signal would prove nothing about accepting.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	get := func(path string) (int, []byte, error) {
		resp, err := client.Get(base + path)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		return resp.StatusCode, body, err
	}

	// The build, on the real /metrics.
	_, metrics, err := get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf(`aggregator_build_info{goversion=%q,revision=`, runtime.Version()); !strings.Contains(string(metrics), want) ||
		!strings.Contains(string(metrics), `version="`+testVersion+`"} 1`) {
		t.Errorf("/metrics lacks aggregator_build_info for %s, %s:\n%s", testVersion, runtime.Version(), grep(string(metrics), "build_info"))
	}
	// The collector's default target, unless the environment set one.
	if os.Getenv("GOGC") == "" && !strings.Contains(string(metrics), "\ngo_gc_gogc_percent 200\n") {
		t.Errorf("without GOGC the collector's target is not %d:\n%s", defaultGCPercent, grep(string(metrics), "gogc"))
	}

	type answer struct {
		code int
		err  error
	}
	var slowDone atomic.Bool
	// Each query its own plate: identical queries in flight may share
	// their portal calls.
	query := func(plate string, done *atomic.Bool) <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			code, body, err := get("/v1/infractions?domain=" + plate)
			if err == nil && code != http.StatusOK {
				err = fmt.Errorf("body %s", body)
			}
			if done != nil {
				done.Store(true)
			}
			ch <- answer{code, err}
		}()
		return ch
	}
	inFlight := func(what string) {
		t.Helper()
		select {
		case <-arrived:
		case <-time.After(15 * time.Second):
			t.Fatalf("%s never reached the portal\n%s", what, logs.String())
		}
	}
	slow := query("AB123CD", &slowDone)
	inFlight("the first query")

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	signalled := time.Now()

	// /readyz turns 503 promptly: well within the delay.
	for {
		code, body, err := get("/readyz")
		if err != nil {
			t.Fatalf("/readyz after SIGTERM: %v", err)
		}
		if code == http.StatusServiceUnavailable {
			var doc struct{ Status string }
			if json.Unmarshal(body, &doc) != nil || doc.Status != "unavailable" {
				t.Errorf("/readyz while draining: %s, want status unavailable", body)
			}
			break
		}
		if time.Since(signalled) > 1500*time.Millisecond {
			t.Fatalf("/readyz still %d %s 1.5 s after SIGTERM", code, body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// New connections and requests are still served during the delay.
	if code, body, err := get("/healthz"); err != nil || code != http.StatusOK {
		t.Errorf("/healthz during the delay: %d %s %v, want 200", code, body, err)
	}
	fresh := query("AC456BD", nil)
	inFlight("the query sent during the delay")
	if time.Since(signalled) >= 2*time.Second {
		t.Logf("warning: the machine is slow; the new query went out %v after the signal", time.Since(signalled))
	}

	// Then the server stops accepting while the queries are in flight.
	var refusedInFlight bool
	for deadline := time.Now().Add(portalDelay + 5*time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if _, _, err := get("/healthz"); err != nil {
			refusedInFlight = !slowDone.Load()
			break
		}
	}
	if !refusedInFlight {
		t.Errorf("the server did not stop accepting while the slow query was in flight")
	}

	for name, ch := range map[string]<-chan answer{"the query from before the signal": slow, "the query from during the delay": fresh} {
		a := <-ch
		if a.err != nil || a.code != http.StatusOK {
			t.Errorf("%s: %d %v, want 200", name, a.code, a.err)
		}
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Errorf("exit: %v, want status 0\n%s", exitErr, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the process did not exit\n%s", logs.String())
	}

	// Its log: the drain, and access lines with request_id and duration_ms.
	var draining, requests int
	sc := bufio.NewScanner(strings.NewReader(logs.String()))
	for sc.Scan() {
		var l map[string]any
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		switch l["msg"] {
		case "request":
			requests++
			if id, _ := l["request_id"].(string); len(id) != 32 {
				t.Errorf("access log line without a request_id: %s", sc.Text())
			}
			if _, ok := l["duration_ms"].(float64); !ok {
				t.Errorf("access log line without duration_ms: %s", sc.Text())
			}
		default:
			if strings.HasPrefix(fmt.Sprint(l["msg"]), "draining") {
				draining++
			}
		}
	}
	if draining != 1 || requests < 5 {
		t.Errorf("logs: %d draining lines (want 1), %d access lines (want at least 5):\n%s", draining, requests, logs.String())
	}
}

// grep returns the lines of text containing s.
func grep(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
