package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Secrets never reach the logs: the program runs with a configuration
// holding an admin token, API keys, source headers with tokens, a webhook
// signing secret and a Redis password (all from ${ENV}), at debug level,
// and is driven through every path that handles them, with wrong
// credentials that contain the right ones, and a portal that echoes the
// credentials it receives into its answers. Neither its output nor any
// answer it gives may contain a secret.
func TestSecretsNeverLogged(t *testing.T) {
	// In memory, with an asynchronous query delivered (and signed); and
	// with a Redis that cannot be reached, whose errors are logged.
	t.Run("memory", func(t *testing.T) { secretsScenario(t, false) })
	t.Run("redis unreachable", func(t *testing.T) { secretsScenario(t, true) })
}

func secretsScenario(t *testing.T, withRedis bool) {
	signingKey := []byte("signing key of the secrets test!")
	secrets := map[string]string{
		"ADMIN":     "adm-Zq8vT2-secret-token",
		"KEY_FLEET": "key-Xy7Rw4-fleet-secret",
		"KEY_OTHER": "key-Lm3Np9-other-secret",
		"CABA":      "caba-Pq3Hs5-portal-token",
		"ROSARIO":   "ros-Jk8Fd2-header-value",
		"WH":        "whsec_" + base64.StdEncoding.EncodeToString(signingKey),
		"REDISPW":   "redis-Vb6Gt1-password",
	}
	// What must never appear: every value, the signing key both encoded
	// and raw.
	forbidden := []string{base64.StdEncoding.EncodeToString(signingKey), string(signingKey)}
	for _, v := range secrets {
		forbidden = append(forbidden, v)
	}
	getenv := func(k string) string { return secrets[k] }

	// The portal echoes whatever credentials it gets into its answers.
	portal := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		echo := r.Header.Get("Authorization") + " " + r.Header.Get("X-Portal-Token")
		switch {
		case strings.HasPrefix(r.URL.Path, "/fail"):
			w.Header().Set("X-Echo", echo)
			http.Error(w, `{"error": "`+echo+`"}`, http.StatusInternalServerError)
		case strings.HasPrefix(r.URL.Path, "/garbage"):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"actas": [{"nro": {"token": %q}}]} trailing %s`, echo, echo)
		case strings.HasPrefix(r.URL.Path, "/reject"):
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", token="`+echo+`"`)
			http.Error(w, echo, http.StatusUnauthorized)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"actas": [{"nro": "Q-1", "nota": %q}]}`, echo)
		}
	}))
	t.Cleanup(portal.Close)

	var mu sync.Mutex
	var deliveries []http.Header
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		deliveries = append(deliveries, r.Header.Clone())
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(receiver.Close)

	store := ""
	if withRedis {
		store = fmt.Sprintf(`store: {redis_url: "redis://:${REDISPW}@%s/0"}`, freeAddr(t))
	}
	cfg := filepath.Join(t.TempDir(), "aggregator.yaml")
	writeFile(t, cfg, fmt.Sprintf(`
server:
  listen: "127.0.0.1:1"
  shutdown_delay: 0s
  admin_token: "${ADMIN}"
  api_keys: [{name: fleet, key: "${KEY_FLEET}", rps: 1000, burst: 1000}, {name: other, key: "${KEY_OTHER}", rps: 1, burst: 1}]
%s
webhooks: {signing_secret: "${WH}", allow_private: true, max_attempts: 1}
defaults: {timeout: 500ms, retry: {max_retries: 0}}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: %s
    headers: {Authorization: "Bearer ${CABA}", X-Portal-Token: "${ROSARIO}"}
    operations:
      by_domain: {path: "/ok?d={domain}"}
      by_id: {path: "/fail/{id}"}
      voucher: {path: "/reject/{infraction_id}"}
    response: {items: /actas, fields: {id: /nro}}
  - id: rosario
    jurisdiction: Rosario
    base_url: %s
    headers: {Authorization: "Basic ${ROSARIO}"}
    operations:
      by_domain: {path: "/garbage?d={domain}"}
      voucher: {path: "/fail/{infraction_id}"}
    response: {items: /actas, fields: {id: /nro}}
`, store, portal.URL, portal.URL))

	addr := freeAddr(t)
	base := "http://" + addr
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-config", cfg, "-listen", addr, "-log-level", "debug"}, getenv, &stdout, &stderr)
	}()
	select {
	case err := <-done:
		t.Fatalf("run: %v\n%s", err, stderr.String())
	case <-time.After(200 * time.Millisecond):
	}
	waitHealthy(t, base)

	client := &http.Client{Timeout: 10 * time.Second}
	defer client.CloseIdleConnections()
	var answers strings.Builder
	do := func(method, path, body string, record bool, header ...string) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if record {
			fmt.Fprintf(&answers, "%d %v\n%s\n", resp.StatusCode, resp.Header, b)
		}
		return resp.StatusCode
	}
	admin, fleet, other := secrets["ADMIN"], secrets["KEY_FLEET"], secrets["KEY_OTHER"]
	async := http.StatusAccepted
	if withRedis {
		async = 0 // accepted or not, with its store away: not this test's concern
	}
	// want 0: any status. reflects: the request itself carries a secret,
	// which its answer may echo back to the client that sent it (the logs
	// may not).
	steps := []struct {
		method, path, body string
		header             []string
		want               int
		reflects           bool
	}{
		{"GET", "/v1/admin/breakers", "", []string{"Authorization", "Bearer " + admin + "x"}, 401, false},
		{"GET", "/v1/admin/breakers", "", []string{"Authorization", "Bearer x" + admin}, 401, false},
		{"GET", "/v1/admin/breakers", "", []string{"Authorization", "Basic " + admin}, 401, false},
		{"GET", "/v1/admin/breakers", "", []string{"Authorization", "Bearer " + admin}, 200, false},
		{"PUT", "/v1/admin/sources/caba/breaker", `{"open_for": "` + admin + `"}`, []string{"Authorization", "Bearer " + admin}, 400, false},
		{"PUT", "/v1/admin/sources/caba/breaker", `{"open_for": "5s"}`, []string{"Authorization", "Bearer " + admin}, 200, false},
		{"GET", "/v1/admin/events", "", []string{"Authorization", "Bearer " + admin}, 200, false},
		{"GET", "/v1/infractions?domain=AB123CD", "", []string{"X-API-Key", fleet + "x"}, 401, false},
		{"GET", "/v1/infractions?domain=AB123CD", "", []string{"X-API-Key", admin}, 401, false},
		{"GET", "/v1/infractions?domain=AB123CD", "", []string{"X-API-Key", fleet}, 200, false},
		{"GET", "/v1/infractions?id=20-31415926-9", "", []string{"X-API-Key", fleet}, 503, false},
		{"GET", "/v1/infractions?domain=AB123CD&sources=" + fleet, "", []string{"X-API-Key", fleet}, 400, true},
		{"GET", "/v1/infractions?domain=" + admin, "", []string{"X-API-Key", fleet}, 400, true},
		{"GET", "/v1/sources/caba/infractions/Q-1/voucher", "", []string{"X-API-Key", fleet}, 502, false},
		{"GET", "/v1/sources/rosario/infractions/Q-1/voucher", "", []string{"X-API-Key", fleet}, 502, false},
		{"GET", "/v1/sources", "", []string{"X-API-Key", other}, 200, false},
		{"GET", "/v1/sources", "", []string{"X-API-Key", other}, 429, false},
		{"POST", "/v1/queries", `{"domain": "AB123CD", "sources": ["caba"], "callback_url": "` + receiver.URL + `/hook"}`, []string{"X-API-Key", fleet, "Content-Type", "application/json"}, async, false},
		{"GET", "/metrics", "", nil, 200, false},
		{"GET", "/readyz", "", nil, 0, false},
	}
	for _, s := range steps {
		if got := do(s.method, s.path, s.body, !s.reflects, s.header...); s.want != 0 && got != s.want {
			t.Errorf("%s %s: got %d, want %d", s.method, s.path, got, s.want)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !withRedis {
		mu.Lock()
		n := len(deliveries)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Error("no webhook delivery within 10s")
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("run: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	mu.Lock()
	for _, h := range deliveries {
		fmt.Fprintf(&answers, "delivery %v\n", h)
		if !strings.HasPrefix(h.Get("webhook-signature"), "v1,") {
			t.Errorf("a delivery without a v1 signature: %v", h)
		}
	}
	mu.Unlock()
	if withRedis && !strings.Contains(stderr.String(), "redis") {
		t.Errorf("the logs never mention the unreachable Redis: the path that could show its URL was not taken\n%s", stderr.String())
	}

	outputs := map[string]string{"stdout": stdout.String(), "stderr (the logs)": stderr.String(), "the answers and deliveries": answers.String()}
	for where, text := range outputs {
		for _, secret := range forbidden {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s show the secret %q: …%s…", where, secret, text[max(0, i-200):min(len(text), i+len(secret)+100)])
			}
		}
	}
	if !strings.Contains(stderr.String(), `"level":"DEBUG"`) {
		t.Errorf("no debug lines in the logs: the test did not run at debug level\n%s", stderr.String())
	}
	t.Logf("%d bytes of logs, %d of answers checked", len(stderr.String()), answers.Len())
}
