package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAdapterValidation(t *testing.T) {
	t.Parallel()
	garbage := filepath.Join(t.TempDir(), "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	const ops = "sources[0].operations.by_domain"
	tests := []struct {
		name string
		data string
		want []want
	}{
		// requests
		{"placeholder in the query is enough", doc("", src(`operations: {by_domain: {path: /consulta, query: {d: "{domain}"}}}`)), nil},
		{"placeholder in a form body is enough", doc("", src(`operations: {by_domain: {method: POST, path: /c, body: {form: {d: "{domain}"}}}}`)), nil},
		{"placeholder in a json body is enough", doc("", src(`operations: {by_domain: {method: POST, path: /c, body: {json: {f: {d: "{domain}"}, n: [1, true, null]}}}}`)), nil},
		{"placeholder in a header is enough", doc("", src(`operations: {by_domain: {path: /c, headers: {X-Dominio: "{domain}"}}}`)), nil},
		{"text body without content type", doc("", src(`operations: {by_domain: {method: POST, path: /c, body: {text: "<d>{domain}</d>"}}}`)), []want{
			{ops + ".body.content_type", "required with text"}}},
		{"content type without text", doc("", src(`operations: {by_domain: {method: POST, path: "/c/{domain}", body: {content_type: text/xml}}}`)), []want{
			{ops + ".body.content_type", "goes with text only"}}},
		{"two bodies", doc("", src(`operations: {by_domain: {method: POST, path: /c, body: {form: {d: "{domain}"}, json: {d: x}}}}`)), []want{
			{ops + ".body", "at most one of form, json and text"}}},
		{"body on a GET", doc("", src(`operations: {by_domain: {path: /c, body: {form: {d: "{domain}"}}}}`)), []want{
			{ops + ".body", "set method: POST"}}},
		{"bad content type", doc("", src(`operations: {by_domain: {method: POST, path: /c, body: {text: "{domain}", content_type: "a b"}}}`)), []want{
			{ops + ".body.content_type", "not a media type"}}},
		{"unknown placeholder in a body", doc("", src(`operations: {by_domain: {method: POST, path: "/c/{domain}", body: {form: {x: "{plate}"}}}}`)), []want{
			{ops + ".body.form.x", "unknown placeholder {plate}"}}},
		{"no placeholder anywhere", doc("", src(`operations: {by_domain: {method: POST, path: /c, query: {a: b}, body: {form: {t: P}}}}`)), []want{
			{ops + ".path", "must contain {domain} (here, or in query, headers or body)"}}},
		{"page without pagination", doc("", src(`operations: {by_domain: {path: "/c/{domain}", query: {p: "{page}"}}}`)), []want{
			{ops + ".query.p", "{page} needs a pagination style"}}},
		{"session value not extracted", doc("", src(`operations: {by_domain: {path: "/c/{domain}", headers: {X-T: "{session.token}"}}}`)), []want{
			{ops + ".headers.X-T", "needs auth.session.extract.token"}}},
		{"session value extracted", doc("", src(`operations: {by_domain: {path: "/c/{domain}", headers: {X-T: "{session.token}"}}}`,
			`auth: {session: {path: /login, extract: {token: "input[name=t]@value"}}}`)), nil},
		// pagination
		{"pagination ok", doc("", src(`operations: {by_domain: {path: "/c/{domain}", query: {p: "{page}", n: "{size}"}}}`, "pagination: {style: page, size: 50}")), nil},
		{"pagination style", doc("", src("pagination: {style: pages, size: 5}")), []want{{"sources[0].pagination.style", `got "pages"`}}},
		{"pagination size", doc("", src("pagination: {style: offset}")), []want{{"sources[0].pagination.size", "required with style offset"}}},
		{"cursor without next", doc("", src("pagination: {style: cursor}")), []want{{"sources[0].pagination.next", "required with style cursor"}}},
		{"next with page style", doc("", src("pagination: {style: page, size: 5, next: /n}")), []want{{"sources[0].pagination.next", "cursor or link only"}}},
		{"max pages", doc("", src("pagination: {style: link, max_pages: -1}")), []want{{"sources[0].pagination.max_pages", "at least 1"}}},
		// auth
		{"both kinds of auth", doc("", src(`auth: {oauth2: {token_url: "http://a/t", client_id: a, client_secret: b}, session: {path: /l, extract: {t: x}}}`)), []want{
			{"sources[0].auth", "at most one of oauth2 and session"}}},
		{"token_url scheme in capitals", doc("", src(`auth: {oauth2: {token_url: "HTTP://a/t?tenant=x", client_id: a, client_secret: b}}`)), nil},
		{"token_url scheme mixed case", doc("", src(`auth: {oauth2: {token_url: "hTTpS://a:8443/t", client_id: a, client_secret: b}}`)), nil},
		{"token_url not http", doc("", src(`auth: {oauth2: {token_url: "ftp://a/t", client_id: a, client_secret: b}}`)), []want{
			{"sources[0].auth.oauth2.token_url", "absolute http:// or https://"}}},
		{"token_url without host", doc("", src(`auth: {oauth2: {token_url: "https:///t", client_id: a, client_secret: b}}`)), []want{
			{"sources[0].auth.oauth2.token_url", "absolute http:// or https://"}}},
		{"token_url with a fragment", doc("", src(`auth: {oauth2: {token_url: "https://a/t#x", client_id: a, client_secret: b}}`)), []want{
			{"sources[0].auth.oauth2.token_url", "must not have a fragment"}}},
		{"oauth2 incomplete", doc("", src(`auth: {oauth2: {token_url: "/token", scopes: ["a b"]}}`)), []want{
			{"sources[0].auth.oauth2.token_url", "absolute"},
			{"sources[0].auth.oauth2.client_id", "required"},
			{"sources[0].auth.oauth2.client_secret", "required"},
			{"sources[0].auth.oauth2.scopes[0]", "not a valid OAuth2 scope"}}},
		{"session incomplete", doc("", src(`auth: {session: {method: PUT, path: login, ttl: -1s, format: pdf}}`)), []want{
			{"sources[0].auth.session.method", `got "PUT"`},
			{"sources[0].auth.session.path", `must start with a single "/"`},
			{"sources[0].auth.session.ttl", "must be positive"},
			{"sources[0].auth.session.format", `got "pdf"`},
			{"sources[0].auth.session.extract", "at least one"}}},
		// tls
		{"tls on http", doc("", src(`tls: {server_name: portal.example}`)), []want{{"sources[0].tls", "needs an https:// base_url"}}},
		{"tls files", doc("", src("base_url: https://127.0.0.1:9101", `tls: {ca_file: /nonexistent/ca.pem, cert_file: `+garbage+`}`)), []want{
			{"sources[0].tls.ca_file", "cannot be read"},
			{"sources[0].tls", "cert_file and key_file go together"}}},
		{"tls garbage", doc("", src("base_url: https://127.0.0.1:9101", `tls: {ca_file: `+garbage+`, cert_file: `+garbage+`, key_file: `+garbage+`}`)), []want{
			{"sources[0].tls.ca_file", "holds no PEM certificate"},
			{"sources[0].tls.cert_file", "cannot load"}}},
		// type
		{"type of another adapter", doc("", "  - id: archivo\n    type: registry\n    jurisdiction: Archivo\n    operations: {by_domain: {}}\n"), nil},
		{"type not a name", doc("", src("type: Bad Type")), []want{{"sources[0].type", "lower-case"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.want == nil {
				mustParse(t, tc.data, nil)
				return
			}
			errs := parseErrors(t, tc.data, nil)
			if len(errs) != len(tc.want) {
				t.Errorf("got %d errors, want %d:\n%v\nin:\n%s", len(errs), len(tc.want), errs, tc.data)
			}
			for _, w := range tc.want {
				found := false
				for _, e := range errs {
					found = found || e.Key == w.key && strings.Contains(e.Msg, w.msg)
				}
				if !found {
					t.Errorf("no error %s: …%s… in:\n%v", w.key, w.msg, errs)
				}
			}
		})
	}
}

func TestJSONBody(t *testing.T) {
	t.Parallel()
	c := mustParse(t, doc("", src(`operations: {by_domain: {method: POST, path: /c, body: {json: {z: "{domain}", a: [1, 2.5, true, null, "${X}"], n: {m: 0x10}}}}}`)),
		func(string) string { return `quote"d` })
	got := string(c.Sources[0].Operations["by_domain"].Body.JSON.Raw)
	want := `{"z":"{domain}","a":[1,2.5,true,null,"quote\"d"],"n":{"m":16}}`
	if got != want {
		t.Errorf("json body = %s, want %s", got, want)
	}
}
