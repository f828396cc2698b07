package portalsim_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/portalsim"
)

type tokenReply struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int64  `json:"expires_in"`
	Scope       string `json:"scope"`
	Error       string `json:"error"`
}

// tokenRequest asks base's token endpoint for a token with form, and
// Basic credentials when id is not empty.
func tokenRequest(t *testing.T, client *http.Client, base string, form url.Values, id, secret string) (answer, tokenReply) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/oauth/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if id != "" {
		req.SetBasicAuth(id, secret)
	}
	got, err := doReq(client, req)
	if err != nil {
		t.Fatal(err)
	}
	var r tokenReply
	if err := json.Unmarshal(got.body, &r); err != nil {
		t.Fatalf("token endpoint: %d %s: %v", got.status, got.body, err)
	}
	return got, r
}

// bearerGet calls path with the token (none when empty).
func bearerGet(t *testing.T, client *http.Client, url, token string) answer {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	got, err := doReq(client, req)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

var clientCredentials = url.Values{"grant_type": {"client_credentials"}}

func TestOAuth2TokenIsIssuedOnceAndRequired(t *testing.T) {
	t.Parallel()
	p, base, client := startPortal(t, testJurisdiction(portalsim.ShapeOAuth2, portalsim.Fault{}))
	lookup := base + "/api/v1/infracciones?dominio=" + portalsim.DemoPlate

	// Without a token: 401 with a Bearer challenge, and nothing issued.
	got := bearerGet(t, client, lookup, "")
	if got.status != 401 || got.header.Get("WWW-Authenticate") != `Bearer realm="test"` {
		t.Errorf("no token: %d %q, want 401 with a Bearer challenge", got.status, got.header.Get("WWW-Authenticate"))
	}
	if got := bearerGet(t, client, lookup, "made-up"); got.status != 401 || !strings.Contains(got.header.Get("WWW-Authenticate"), `error="invalid_token"`) {
		t.Errorf("unknown token: %d %q, want 401 invalid_token", got.status, got.header.Get("WWW-Authenticate"))
	}

	ans, tok := tokenRequest(t, client, base, clientCredentials, portalsim.DemoClientID, portalsim.DemoClientSecret)
	if ans.status != 200 || tok.AccessToken == "" || tok.TokenType != "Bearer" || tok.ExpiresIn != 3600 || tok.Scope != portalsim.DemoScope ||
		ans.header.Get("Cache-Control") != "no-store" {
		t.Fatalf("token: %d %+v Cache-Control %q", ans.status, tok, ans.header.Get("Cache-Control"))
	}
	// One token serves every call.
	for _, path := range []string{
		"/api/v1/infracciones?dominio=" + portalsim.DemoPlate,
		"/api/v1/infracciones?documento=20123456786&tipo=cuit",
		"/api/v1/infracciones?documento=12345678&tipo=dni",
		"/api/v1/infracciones/T-1/boleta",
	} {
		if got := bearerGet(t, client, base+path, tok.AccessToken); got.status != 200 {
			t.Errorf("%s with the token: %d %s", path, got.status, got.body)
		}
	}
	got = bearerGet(t, client, lookup, tok.AccessToken)
	const want = `{"data":[{"codigo":"T-1","fecha":"2026-03-14T09:12:00.000","concepto":"Exceso de velocidad","lugar":"Av. Lugones km 4","importe":"185000.50","moneda":"ARS","estado":"ADEUDADA"}],"total":1}`
	if string(got.body) != want {
		t.Errorf("answer\n%s\nwant\n%s", got.body, want)
	}
	if c := p.Calls(); c.Token != 1 || c.TokensIssued != 1 || c.Refused != 2 || c.ByDomain != 4 || c.ByID != 2 || c.Voucher != 1 || c.Total != 8 {
		t.Errorf("Calls() = %+v, want 1 token issued, 2 refused", c)
	}

	// Revoked (through the control endpoint): 401 until a new token.
	if got, err := do(t.Context(), client, http.MethodPost, base+"/_sim/tokens/revoke", ""); err != nil || got.status != 204 {
		t.Fatalf("revoke: %d %v", got.status, err)
	}
	if got := bearerGet(t, client, lookup, tok.AccessToken); got.status != 401 {
		t.Errorf("revoked token: %d, want 401", got.status)
	}
	_, tok2 := tokenRequest(t, client, base, url.Values{"grant_type": {"client_credentials"},
		"client_id": {portalsim.DemoClientID}, "client_secret": {portalsim.DemoClientSecret}}, "", "")
	if tok2.AccessToken == "" || tok2.AccessToken == tok.AccessToken {
		t.Fatalf("second token %+v", tok2)
	}
	if got := bearerGet(t, client, lookup, tok2.AccessToken); got.status != 200 {
		t.Errorf("new token: %d, want 200", got.status)
	}
	if c := p.Calls(); c.TokensIssued != 2 {
		t.Errorf("TokensIssued = %d, want 2", c.TokensIssued)
	}
}

func TestOAuth2TokenEndpointRefusals(t *testing.T) {
	t.Parallel()
	j := testJurisdiction(portalsim.ShapeOAuth2, portalsim.Fault{})
	j.OAuth2 = portalsim.OAuth2{ClientID: "cliente", ClientSecret: "s3cr:t ñ", Scopes: []string{"actas.read", "actas.boletas"}}
	p, base, client := startPortal(t, j)
	both := url.Values{"grant_type": {"client_credentials"}, "client_id": {"cliente"}, "client_secret": {"s3cr:t ñ"}}
	tests := []struct {
		name       string
		form       url.Values
		id, secret string
		status     int
		error      string
		scope      string
	}{
		{"basic, form-urlencoded credentials", clientCredentials, "cliente", url.QueryEscape("s3cr:t ñ"), 200, "", "actas.read actas.boletas"},
		{"basic, raw credentials", clientCredentials, "cliente", "s3cr:t ñ", 200, "", "actas.read actas.boletas"},
		{"form credentials, one scope", url.Values{"grant_type": {"client_credentials"}, "client_id": {"cliente"}, "client_secret": {"s3cr:t ñ"}, "scope": {"actas.read"}}, "", "", 200, "", "actas.read"},
		{"wrong secret", clientCredentials, "cliente", "otro", 401, "invalid_client", ""},
		{"unknown client", url.Values{"grant_type": {"client_credentials"}, "client_id": {"x"}, "client_secret": {"s3cr:t ñ"}}, "", "", 401, "invalid_client", ""},
		{"no credentials", clientCredentials, "", "", 401, "invalid_client", ""},
		{"two authentication methods", both, "cliente", "s3cr:t ñ", 400, "invalid_request", ""},
		{"another grant", url.Values{"grant_type": {"password"}}, "cliente", "s3cr:t ñ", 400, "unsupported_grant_type", ""},
		{"no grant", url.Values{}, "cliente", "s3cr:t ñ", 400, "invalid_request", ""},
		{"a scope not allowed", url.Values{"grant_type": {"client_credentials"}, "scope": {"actas.read admin"}}, "cliente", "s3cr:t ñ", 400, "invalid_scope", ""},
	}
	for _, tt := range tests {
		got, r := tokenRequest(t, client, base, tt.form, tt.id, tt.secret)
		if got.status != tt.status || r.Error != tt.error || r.Scope != tt.scope || (tt.status == 200) != (r.AccessToken != "") {
			t.Errorf("%s: %d %+v, want %d %q scope %q", tt.name, got.status, r, tt.status, tt.error, tt.scope)
		}
		if tt.status == 401 && tt.id != "" && got.header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 to Basic credentials without a challenge", tt.name)
		}
		if strings.Contains(string(got.body), "s3cr") {
			t.Errorf("%s: the answer shows the secret", tt.name)
		}
	}
	// A token with only one of the two scopes the API needs: 403.
	_, narrow := tokenRequest(t, client, base, url.Values{"grant_type": {"client_credentials"}, "scope": {"actas.read"}}, "cliente", "s3cr:t ñ")
	got := bearerGet(t, client, base+"/api/v1/infracciones?dominio=AB123CD", narrow.AccessToken)
	if got.status != 403 || !strings.Contains(got.header.Get("WWW-Authenticate"), "insufficient_scope") {
		t.Errorf("narrow token: %d %q, want 403 insufficient_scope", got.status, got.header.Get("WWW-Authenticate"))
	}
	if got, err := get(t.Context(), client, base+"/oauth/token"); err != nil || got.status != 405 || got.header.Get("Allow") != "POST" {
		t.Errorf("GET /oauth/token: %d %v, want 405", got.status, err)
	}
	if c := p.Calls(); c.TokensIssued != 4 || c.Token != 12 {
		t.Errorf("Calls() = %+v, want 4 tokens issued of 12 calls", c)
	}
}

func TestOAuth2TokenExpires(t *testing.T) {
	t.Parallel()
	j := testJurisdiction(portalsim.ShapeOAuth2, portalsim.Fault{})
	j.OAuth2.TokenTTL = 50 * time.Millisecond
	_, base, client := startPortal(t, j)
	_, tok := tokenRequest(t, client, base, clientCredentials, portalsim.DemoClientID, portalsim.DemoClientSecret)
	if tok.ExpiresIn != 1 {
		t.Errorf("expires_in = %d for a 50ms token, want 1 (at least a second)", tok.ExpiresIn)
	}
	lookup := base + "/api/v1/infracciones?dominio=AB123CD"
	time.Sleep(100 * time.Millisecond)
	if got := bearerGet(t, client, lookup, tok.AccessToken); got.status != 401 || !strings.Contains(got.header.Get("WWW-Authenticate"), "invalid_token") {
		t.Errorf("expired token: %d %q, want 401 invalid_token", got.status, got.header.Get("WWW-Authenticate"))
	}
}

func TestOAuth2SettingsJSON(t *testing.T) {
	t.Parallel()
	j := portalsim.NewJurisdiction(portalsim.ShapeOAuth2, "x", "X", nil)
	j.OAuth2.TokenTTL = 90 * time.Second
	j.Session.TTL = time.Minute
	b, err := json.Marshal(j)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{`"token_ttl":"1m30s"`, `"client_id":"agregador-demo"`, `"session":{"ttl":"1m0s"}`, `"paging":{"style":"page","size":3}`} {
		if !strings.Contains(string(b), s) {
			t.Errorf("JSON %s lacks %s", b, s)
		}
	}
	var back portalsim.Jurisdiction
	if err := json.Unmarshal(b, &back); err != nil || back.OAuth2.TokenTTL != 90*time.Second || back.Session.TTL != time.Minute {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	for _, bad := range []string{`{"oauth2":{"token_ttl":"soon"}}`, `{"oauth2":{"colour":1}}`, `{"session":{"ttl":"x"}}`} {
		if err := json.Unmarshal([]byte(bad), &back); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
