package sources

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/multas/aggregator"
)

// built is what a compiled request sends for some values.
type built struct {
	method, url, contentType, body string
	header                         map[string]string
}

func buildRequest(t *testing.T, base string, op aggregator.Operation, spec OperationSpec, sc scope, v values) (built, error) {
	t.Helper()
	sc.op = op
	r, err := compileRequest(base, op, spec, sc)
	if err != nil {
		return built{}, err
	}
	req, err := r.build(context.Background(), &v, nil, "", false)
	if err != nil {
		return built{}, err
	}
	b := built{method: req.Method, url: req.URL.String(), contentType: req.Header.Get("Content-Type"), header: map[string]string{}}
	for name := range req.Header {
		b.header[name] = req.Header.Get(name)
	}
	if req.Body != nil {
		data, _ := io.ReadAll(req.Body)
		b.body = string(data)
	}
	return b, nil
}

func TestCompileRequest(t *testing.T) {
	t.Parallel()
	byDomain := func(d string) values { var v values; v.p[paramDomain] = d; return v }
	tests := []struct {
		name string
		base string
		op   aggregator.Operation
		spec OperationSpec
		sc   scope
		v    values
		want built
	}{
		{
			name: "path and query escaping",
			base: "http://portal", op: aggregator.ByDomain,
			spec: OperationSpec{Path: "/a/{domain}?dominio={domain}"},
			v:    byDomain("AB 1/2&x=y"),
			want: built{method: "GET", url: "http://portal/a/AB%201%2F2&x=y?dominio=AB+1%2F2%26x%3Dy"},
		},
		{
			name: "id and kind",
			base: "https://portal/api/", op: aggregator.ByID,
			spec: OperationSpec{Path: "/personas/{id_kind}/{id}"},
			v:    values{p: [numParams]string{paramID: "20123456786", paramIDKind: "cuit"}},
			want: built{method: "GET", url: "https://portal/api/personas/cuit/20123456786"},
		},
		{
			name: "voucher",
			base: "http://portal", op: aggregator.Voucher,
			spec: OperationSpec{Path: "/actas/{infraction_id}/boleta"},
			v:    values{p: [numParams]string{paramInfractionID: "Q-1/2"}},
			want: built{method: "GET", url: "http://portal/actas/Q-1%2F2/boleta"},
		},
		{
			name: "query map appended after the path's own query",
			base: "http://portal", op: aggregator.ByDomain,
			spec: OperationSpec{Path: "/consulta?v=2", Query: map[string]string{"formato": "json", "dominio": "{domain}"}},
			v:    byDomain("AB123CD"),
			want: built{method: "GET", url: "http://portal/consulta?v=2&dominio=AB123CD&formato=json"},
		},
		{
			name: "query map alone",
			base: "http://portal", op: aggregator.ByDomain,
			spec: OperationSpec{Path: "/consulta", Query: map[string]string{"d": "{domain}"}},
			v:    byDomain("A&B"),
			want: built{method: "GET", url: "http://portal/consulta?d=A%26B"},
		},
		{
			name: "form body",
			base: "http://portal", op: aggregator.ByDomain,
			spec: OperationSpec{Method: "post", Path: "/consulta", Body: Body{Form: map[string]string{"dominio": "{domain}", "tipo": "P"}}},
			v:    byDomain("A&B=C"),
			want: built{method: "POST", url: "http://portal/consulta", contentType: "application/x-www-form-urlencoded",
				body: "dominio=A%26B%3DC&tipo=P"},
		},
		{
			name: "json body keeps structure and order",
			base: "http://portal", op: aggregator.ByDomain,
			spec: OperationSpec{Method: "POST", Path: "/consulta", Body: Body{JSON: json.RawMessage(
				`{"filtro":{"dominio":"{domain}","x":"a\"b"},"pagina":1,"tags":[true,null,"{domain}-{domain}"]}`)}},
			v: byDomain(`"}</x>`),
			want: built{method: "POST", url: "http://portal/consulta", contentType: "application/json",
				body: `{"filtro":{"dominio":"\"}\u003c/x\u003e","x":"a\"b"},"pagina":1,"tags":[true,null,"\"}\u003c/x\u003e-\"}\u003c/x\u003e"]}`},
		},
		{
			name: "xml text body",
			base: "http://portal", op: aggregator.ByDomain,
			spec: OperationSpec{Method: "POST", Path: "/ws", Headers: map[string]string{"SOAPAction": "urn:consultarActas"},
				Body: Body{Text: "<e><d>{domain}</d></e>", ContentType: "text/xml; charset=utf-8"}},
			v: byDomain(`</d><x a="1">&'`),
			want: built{method: "POST", url: "http://portal/ws", contentType: "text/xml; charset=utf-8",
				body:   "<e><d>&lt;/d&gt;&lt;x a=&quot;1&quot;&gt;&amp;&apos;</d></e>",
				header: map[string]string{"Soapaction": "urn:consultarActas"}},
		},
		{
			name: "session values in query, header and body",
			base: "http://portal", op: aggregator.ByDomain,
			spec: OperationSpec{Method: "POST", Path: "/c", Query: map[string]string{"t": "{session.token}"},
				Headers: map[string]string{"X-Token": "{session.token}"},
				Body:    Body{Form: map[string]string{"__RequestVerificationToken": "{session.token}", "d": "{domain}"}}},
			sc: scope{sessions: []string{"token"}},
			v:  values{p: [numParams]string{paramDomain: "AB123CD"}, session: map[string]string{"token": "a b+c"}},
			want: built{method: "POST", url: "http://portal/c?t=a+b%2Bc", contentType: "application/x-www-form-urlencoded",
				body:   "__RequestVerificationToken=a+b%2Bc&d=AB123CD",
				header: map[string]string{"X-Token": "a b+c"}},
		},
		{
			name: "pagination placeholders",
			base: "http://portal", op: aggregator.ByDomain,
			spec: OperationSpec{Path: "/actas/{domain}", Query: map[string]string{"pagina": "{page}", "tam": "{size}"}},
			sc:   scope{paging: [numParams]bool{paramPage: true, paramSize: true}},
			v:    values{p: [numParams]string{paramDomain: "AB123CD", paramPage: "2", paramSize: "50"}},
			want: built{method: "GET", url: "http://portal/actas/AB123CD?pagina=2&tam=50"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := buildRequest(t, tt.base, tt.op, tt.spec, tt.sc, tt.v)
			if err != nil {
				t.Fatalf("building: %v", err)
			}
			if got.method != tt.want.method || got.url != tt.want.url || got.contentType != tt.want.contentType || got.body != tt.want.body {
				t.Errorf("got %s %s (%s) %q\nwant %s %s (%s) %q", got.method, got.url, got.contentType, got.body,
					tt.want.method, tt.want.url, tt.want.contentType, tt.want.body)
			}
			for name, want := range tt.want.header {
				if got.header[name] != want {
					t.Errorf("header %s = %q, want %q", name, got.header[name], want)
				}
			}
		})
	}
}

func TestCompileRequestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		op   aggregator.Operation
		spec OperationSpec
		want string
	}{
		{"missing placeholder", aggregator.ByDomain, OperationSpec{Path: "/actas"}, "lacks its placeholder {domain}"},
		{"unknown placeholder", aggregator.ByDomain, OperationSpec{Path: "/{plate}/{domain}"}, "unknown placeholder {plate}"},
		{"placeholder of another operation", aggregator.ByDomain, OperationSpec{Path: "/{domain}/{id}"}, "no value for operation by_domain"},
		{"id_kind outside by_id", aggregator.Voucher, OperationSpec{Path: "/{infraction_id}/{id_kind}"}, "no value"},
		{"unterminated", aggregator.ByDomain, OperationSpec{Path: "/{domain"}, "unterminated"},
		{"stray brace", aggregator.ByDomain, OperationSpec{Path: "/}{domain}"}, "unmatched"},
		{"page without pagination", aggregator.ByDomain, OperationSpec{Path: "/{domain}?p={page}"}, "pagination"},
		{"session value not extracted", aggregator.ByDomain, OperationSpec{Path: "/{domain}", Headers: map[string]string{"X": "{session.t}"}}, "auth.session.extract.t"},
		{"body on GET", aggregator.ByDomain, OperationSpec{Path: "/c", Body: Body{Form: map[string]string{"d": "{domain}"}}}, "has no body"},
		{"two bodies", aggregator.ByDomain, OperationSpec{Method: "POST", Path: "/c", Body: Body{Form: map[string]string{"d": "{domain}"}, Text: "x", ContentType: "text/plain"}}, "at most one"},
		{"text without content type", aggregator.ByDomain, OperationSpec{Method: "POST", Path: "/c", Body: Body{Text: "{domain}"}}, "content_type is required"},
		{"content type without text", aggregator.ByDomain, OperationSpec{Method: "POST", Path: "/c/{domain}", Body: Body{ContentType: "text/plain"}}, "goes with text"},
		{"bad json", aggregator.ByDomain, OperationSpec{Method: "POST", Path: "/c", Body: Body{JSON: json.RawMessage(`{"d":`)}}, "json"},
		{"bad header name", aggregator.ByDomain, OperationSpec{Path: "/{domain}", Headers: map[string]string{"a b": "x"}}, "not a header name"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := compileRequest("http://p", tt.op, tt.spec, scope{op: tt.op})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("compileRequest = %v, want an error with %q", err, tt.want)
			}
		})
	}
}

// hostile are values that try to change a request's structure.
var hostile = []string{
	`"quoted"`, `a'b`, `<x>&amp;</x>`, `a&b=c`, `a/b`, `..`, `.`, `../../admin`, `%2e%2e`,
	"Córdoba ñandú", "line\r\nX-Injected: 1", "\x00nul", `{domain}`, "a?b#c", "\xff\xfe",
}

// TestHostileValuesKeepStructure sends every hostile value through every
// landing and checks that the request parses back to the same structure
// with the value intact (or is refused, for what cannot be sent).
func TestHostileValuesKeepStructure(t *testing.T) {
	t.Parallel()
	spec := OperationSpec{
		Method:  "POST",
		Path:    "/actas/{infraction_id}/boleta?x={infraction_id}",
		Query:   map[string]string{"q": "{infraction_id}"},
		Headers: map[string]string{"X-Id": "{infraction_id}"},
	}
	bodies := map[string]Body{
		"form": {Form: map[string]string{"id": "{infraction_id}", "k": "v"}},
		"json": {JSON: json.RawMessage(`{"id":"{infraction_id}","k":["v"]}`)},
		"xml":  {Text: `<r><id a="{infraction_id}">{infraction_id}</id></r>`, ContentType: "application/soap+xml"},
	}
	for kind, body := range bodies {
		for _, value := range hostile {
			spec.Body = body
			var v values
			v.p[paramInfractionID] = value
			got, err := buildRequest(t, "http://portal", aggregator.Voucher, spec, scope{}, v)
			switch {
			case value == "." || value == "..":
				if !errors.Is(err, errDotSegment) {
					t.Errorf("%s %q: err = %v, want a refused dot segment", kind, value, err)
				}
				continue
			case strings.ContainsAny(value, "\r\n\x00"):
				if !errors.Is(err, errControl) {
					t.Errorf("%s %q: err = %v, want a refused header value", kind, value, err)
				}
				continue
			case err != nil:
				t.Errorf("%s %q: %v", kind, value, err)
				continue
			}
			u, err := url.Parse(got.url)
			if err != nil {
				t.Fatalf("%s %q: URL %q does not parse: %v", kind, value, got.url, err)
			}
			segs := strings.Split(u.EscapedPath(), "/")
			if len(segs) != 4 || segs[1] != "actas" || segs[3] != "boleta" {
				t.Errorf("%s %q: path %q changed structure", kind, value, u.EscapedPath())
			}
			if seg, _ := url.PathUnescape(segs[2]); seg != value {
				t.Errorf("%s %q: path segment decodes to %q", kind, value, seg)
			}
			qv := u.Query()
			if len(qv) != 2 || qv.Get("x") != value || qv.Get("q") != value {
				t.Errorf("%s %q: query %v changed", kind, value, qv)
			}
			if got.header["X-Id"] != value {
				t.Errorf("%s %q: header = %q", kind, value, got.header["X-Id"])
			}
			checkBody(t, kind, value, got.body)
		}
	}
}

func checkBody(t *testing.T, kind, value, body string) {
	t.Helper()
	valid := strings.Map(func(r rune) rune { return r }, value) // one U+FFFD per invalid byte
	switch kind {
	case "form":
		f, err := url.ParseQuery(body)
		if err != nil || len(f) != 2 || f.Get("id") != value || f.Get("k") != "v" {
			t.Errorf("form %q: body %q parses to %v, %v", value, body, f, err)
		}
	case "json":
		var doc struct {
			ID string   `json:"id"`
			K  []string `json:"k"`
		}
		dec := json.NewDecoder(strings.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&doc); err != nil || doc.ID != valid || len(doc.K) != 1 {
			t.Errorf("json %q: body %q decodes to %+v, %v", value, body, doc, err)
		}
	case "xml":
		var doc struct {
			XMLName xml.Name `xml:"r"`
			ID      struct {
				A    string `xml:"a,attr"`
				Text string `xml:",chardata"`
			} `xml:"id"`
		}
		want := strings.Map(func(r rune) rune {
			if r < 0x20 && r != '\t' && r != '\n' && r != '\r' {
				return '\uFFFD'
			}
			return r
		}, valid)
		if err := xml.Unmarshal([]byte(body), &doc); err != nil || doc.ID.Text != want || doc.ID.A != want {
			t.Errorf("xml %q: body %q decodes to %+v, %v", value, body, doc.ID, err)
		}
	}
}

// FuzzRequestBuilding checks that no value changes a request's structure
// and that building never panics.
func FuzzRequestBuilding(f *testing.F) {
	for _, h := range hostile {
		f.Add(h)
	}
	spec := OperationSpec{
		Method: "POST", Path: "/actas/{infraction_id}?x={infraction_id}",
		Query:   map[string]string{"q": "{infraction_id}"},
		Headers: map[string]string{"X-Id": "{infraction_id}"},
	}
	bodies := map[string]Body{
		"form": {Form: map[string]string{"id": "{infraction_id}", "k": "v"}},
		"json": {JSON: json.RawMessage(`{"id":"{infraction_id}","k":["v"]}`)},
		"xml":  {Text: `<r><id a="{infraction_id}">{infraction_id}</id></r>`, ContentType: "text/xml"},
	}
	f.Fuzz(func(t *testing.T, value string) {
		if value == "." || value == ".." || strings.ContainsFunc(value, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
			return // refused, as TestHostileValuesKeepStructure shows
		}
		for kind, body := range bodies {
			spec.Body = body
			var v values
			v.p[paramInfractionID] = value
			got, err := buildRequest(t, "http://portal", aggregator.Voucher, spec, scope{}, v)
			if err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
			u, err := url.Parse(got.url)
			if err != nil {
				t.Fatalf("URL %q does not parse: %v", got.url, err)
			}
			if segs := strings.Split(u.EscapedPath(), "/"); len(segs) != 3 || segs[1] != "actas" {
				t.Fatalf("path %q changed structure", u.EscapedPath())
			}
			if q := u.Query(); len(q) != 2 || q.Get("x") != value {
				t.Fatalf("query %v changed", q)
			}
			if kind != "xml" {
				checkBody(t, kind, value, got.body)
			} else if err := xml.Unmarshal([]byte(got.body), new(struct{})); err != nil {
				t.Fatalf("xml body %q is not well-formed: %v", got.body, err)
			}
		}
	})
}
