package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/internal/apitest"
)

const fuzzBase = "https://problems.test/"

// closedPort returns a loopback address nothing listens on.
func closedPort(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// FuzzInfractionsQuery sends raw query strings to GET /v1/infractions of
// the real server (every middleware, the real fan-out) over sources whose
// portal is down, so that no answer can be a success: every answer must be
// a 400 invalid-query naming only the query's parameters, or a 503
// no-source-available, each a problem that matches api/openapi.yaml; never
// a 500, never a panic. Queries a client can put on a request line also go
// through a real connection (httptest.Server).
func FuzzInfractionsQuery(f *testing.F) {
	for _, seed := range []string{
		"domain=AB123CD",
		"domain=ab+123+cd",
		"domain=AB-123-CD&sources=caba",
		"id=20-31415926-9",
		"id=31415926&sources=caba,cuitonly",
		"id=31415926&sources=cuitonly",
		"domain=AB123CD&id=31415926",
		"",
		"domain=",
		"domain=AB123CD&domain=XYZ999",
		"domain=AB123CD&timeout=2.5s",
		"domain=AB123CD&timeout=-1s",
		"domain=AB123CD&timeout=1ns",
		"domain=AB123CD&timeout=9223372036854775807ns",
		"domain=AB123CD&timeout=1e400h",
		"domain=AB123CD&sources=,,,",
		"domain=AB123CD&sources=nowhere&sources=caba",
		"domain=%zz",
		"domain=AB123CD;id=1",
		"domain=\x00\xff%00",
		"id=20-31415926-8",
		"id=" + strings.Repeat("9", 300),
		"timeout=1s",
		"sources=caba",
		"domain=AB123CD&sources=" + strings.Repeat("a,", 100),
	} {
		f.Add(seed)
	}

	a, srv := fuzzApp(f)
	client := srv.Client()
	v := apitest.New(f)

	f.Fuzz(func(t *testing.T, raw string) {
		req := httptest.NewRequest(http.MethodGet, "/v1/infractions", nil)
		req.URL.RawQuery = raw
		rec := httptest.NewRecorder()
		a.Server.ServeHTTP(rec, req)
		res := rec.Result()
		checkQueryAnswer(t, raw, res.StatusCode, res.Header, rec.Body.Bytes())
		v.Check(t, req, res.StatusCode, res.Header, rec.Body.Bytes())

		if !onRequestLine(raw) {
			return
		}
		wire, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/infractions?"+raw, nil)
		if err != nil || wire.URL.RawQuery != raw {
			return
		}
		resp, err := client.Do(wire)
		if err != nil {
			t.Fatalf("GET /v1/infractions?%s: %v", raw, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		checkQueryAnswer(t, raw, resp.StatusCode, resp.Header, body)
		v.Check(t, wire, resp.StatusCode, resp.Header, body)
	})
}

// fuzzAdminToken is the admin token of fuzzApp.
const fuzzAdminToken = "fuzz-admin-token"

// fuzzApp is a replica whose two sources' portal is down (a closed port,
// connections refused at once), served by the real server until the test
// ends.
func fuzzApp(f testing.TB) (*app.App, *httptest.Server) {
	f.Helper()
	down := "http://" + closedPort(f)
	cfg, err := config.Parse([]byte(`server: {admin_token: "`+fuzzAdminToken+`"}
problems: {base_uri: "`+fuzzBase+`"}
query: {deadline: 1s, max_deadline: 2s}
defaults: {timeout: 200ms, retry: {max_retries: 0}}
sources:
  - id: caba
    jurisdiction: Ciudad de Buenos Aires
    base_url: `+down+`
    operations:
      by_domain: {path: "/actas?dominio={domain}"}
      by_id: {path: "/personas/{id}"}
    response: {items: /actas, fields: {id: /nro}}
  - id: cuitonly
    jurisdiction: Provincia de Córdoba
    base_url: `+down+`
    operations:
      by_id: {path: "/cuit/{id}", accepts: [cuit]}
    response: {items: /actas, fields: {id: /nro}}
`), "fuzz.yaml", nil)
	if err != nil {
		f.Fatal(err)
	}
	a, err := app.New(cfg, app.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = a.Close() })
	srv := httptest.NewServer(a.Server)
	f.Cleanup(srv.Close)
	return a, srv
}

// onRequestLine reports whether raw can be sent as the query of a request
// line as is: visible ASCII but '#'.
func onRequestLine(raw string) bool {
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// checkQueryAnswer checks one answer of FuzzInfractionsQuery.
func checkQueryAnswer(t *testing.T, raw string, status int, header http.Header, body []byte) {
	t.Helper()
	var p struct {
		Type          string `json:"type"`
		Title         string `json:"title"`
		Status        int    `json:"status"`
		InvalidParams []struct {
			Name   string `json:"name"`
			Reason string `json:"reason"`
		} `json:"invalid_params"`
		Sources []json.RawMessage `json:"sources"`
	}
	if ct := header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("?%s: %d with Content-Type %q, want a problem: %s", raw, status, ct, body)
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("?%s: %d, body not JSON (%v): %s", raw, status, err, body)
	}
	if p.Status != status || p.Title == "" {
		t.Errorf("?%s: problem %+v in a %d", raw, p, status)
	}
	switch status {
	case http.StatusBadRequest:
		if p.Type != fuzzBase+"invalid-query" || len(p.InvalidParams) == 0 {
			t.Errorf("?%s: 400 %s", raw, body)
		}
		for _, ip := range p.InvalidParams {
			switch ip.Name {
			case "domain", "id", "timeout", "sources":
			default:
				t.Errorf("?%s: invalid_params names %q", raw, ip.Name)
			}
			if ip.Reason == "" {
				t.Errorf("?%s: invalid_params %q without a reason", raw, ip.Name)
			}
		}
	case http.StatusServiceUnavailable:
		if p.Type != fuzzBase+"no-source-available" || len(p.Sources) == 0 {
			t.Errorf("?%s: 503 %s", raw, body)
		}
		if cc := header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("?%s: 503 with Cache-Control %q, want no-store", raw, cc)
		}
	default:
		t.Errorf("?%s: status %d, want 400 or 503: %s", raw, status, body)
	}
}

// FuzzUpdateBreaker sends bodies to PUT /v1/admin/sources/{id}/breaker
// and then runs a query and reads the breakers, so that whatever settings
// the server accepts are also used: every answer to the PUT is a 200 with
// the effective settings or a 400 invalid-query, both as api/openapi.yaml
// says; the query after it is a 503 (the portal is down), and neither
// panics nor hangs, whatever settings were accepted.
func FuzzUpdateBreaker(f *testing.F) {
	for _, seed := range []string{
		`{}`,
		`{"open_for": "5s"}`,
		`{"window": "2m", "min_calls": 3, "failure_ratio": 0.25, "consecutive_failures": 4, "open_for": "1m", "slow_call": "800ms", "failure_statuses": [503]}`,
		`{"window": "1ns", "min_calls": 1, "failure_ratio": 1, "open_for": "1ns"}`,
		`{"window": "2000000h"}`,
		`{"open_for": "2562047h"}`,
		`{"min_calls": 9223372036854775807, "consecutive_failures": 9223372036854775807}`,
		`{"failure_ratio": 5e-324}`,
		`{"failure_statuses": [500, 500, 599]}`,
		`{"window": 5, "min_calls": 1.5}`,
		`{"open_fro": "5s"}`,
		`not json`,
		``,
	} {
		f.Add([]byte(seed))
	}
	a, _ := fuzzApp(f)
	v := apitest.New(f)
	defaults := func() []byte {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "/v1/admin/breakers", nil)
		req.Header.Set("Authorization", "Bearer "+fuzzAdminToken)
		a.Server.ServeHTTP(rec, req)
		var doc struct {
			Breakers []struct {
				Settings json.RawMessage `json:"settings"`
			} `json:"breakers"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil || len(doc.Breakers) == 0 {
			f.Fatalf("GET /v1/admin/breakers: %d %s", rec.Code, rec.Body)
		}
		return doc.Breakers[0].Settings
	}()
	serve := func(t *testing.T, method, target string, body []byte) *httptest.ResponseRecorder {
		t.Helper()
		req := httptest.NewRequest(method, target, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+fuzzAdminToken)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		a.Server.ServeHTTP(rec, req)
		v.CheckRecorder(t, req, rec)
		return rec
	}

	f.Fuzz(func(t *testing.T, body []byte) {
		// Every run starts from the configured settings, breakers closed.
		if rec := serve(t, http.MethodPut, "/v1/admin/sources/caba/breaker", defaults); rec.Code != http.StatusOK {
			t.Fatalf("restoring the settings: %d %s", rec.Code, rec.Body)
		}
		for _, op := range []string{"by_domain", "by_id"} {
			if rec := serve(t, http.MethodPost, "/v1/admin/breakers/caba/"+op+"/reset", nil); rec.Code != http.StatusOK {
				t.Fatalf("resetting caba/%s: %d %s", op, rec.Code, rec.Body)
			}
		}
		rec := serve(t, http.MethodPut, "/v1/admin/sources/caba/breaker", body)
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest:
		default:
			t.Fatalf("PUT %q: got %d %s, want 200 or 400", body, rec.Code, rec.Body)
		}
		for range 3 {
			if rec := serve(t, http.MethodGet, "/v1/infractions?domain=AB123CD&sources=caba", nil); rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("query after PUT %q: got %d %s, want 503", body, rec.Code, rec.Body)
			}
		}
		if rec := serve(t, http.MethodGet, "/v1/admin/breakers", nil); rec.Code != http.StatusOK {
			t.Fatalf("GET /v1/admin/breakers after PUT %q: got %d %s", body, rec.Code, rec.Body)
		}
	})
}
