package portalsim_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/multas/aggregator/portalsim"
)

// spec8Shapes are the dialects of SPEC 8.
var spec8Shapes = []portalsim.Shape{portalsim.ShapeSOAP, portalsim.ShapeHTML, portalsim.ShapePaged, portalsim.ShapeOAuth2, portalsim.ShapeSession}

// lookupRequest makes, while the portal is healthy, what a by_domain
// lookup of DemoPlate needs (a token, a session), and returns a maker of
// that request.
func lookupRequest(t *testing.T, s portalsim.Shape, base string, client *http.Client) func(context.Context) *http.Request {
	t.Helper()
	var bearer string
	var session sessionVisit
	switch s {
	case portalsim.ShapeOAuth2:
		_, tok := tokenRequest(t, client, base, clientCredentials, portalsim.DemoClientID, portalsim.DemoClientSecret)
		bearer = tok.AccessToken
	case portalsim.ShapeSession:
		session = visit(t, client, base)
	}
	return func(ctx context.Context) *http.Request {
		var req *http.Request
		switch s {
		case portalsim.ShapeSOAP:
			req, _ = http.NewRequestWithContext(ctx, http.MethodPost, base+"/ws/MultasService",
				strings.NewReader(envelope("ConsultarPorDominio", "<m:dominio>AB123CD</m:dominio>")))
			req.Header.Set("Content-Type", "text/xml; charset=utf-8")
			req.Header.Set("SOAPAction", `"urn:multas#ConsultarPorDominio"`)
		case portalsim.ShapeHTML:
			req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/infracciones/consulta.asp?patente=AB123CD", nil)
		case portalsim.ShapePaged:
			req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/actas?dominio=AB123CD&page=1&size=3", nil)
		case portalsim.ShapeOAuth2:
			req, _ = http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/v1/infracciones?dominio=AB123CD", nil)
			req.Header.Set("Authorization", "Bearer "+bearer)
		case portalsim.ShapeSession:
			form := url.Values{"dominio": {"AB123CD"}, "__RequestVerificationToken": {session.token}}
			req, _ = http.NewRequestWithContext(ctx, http.MethodPost, base+"/consulta", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(session.cookie)
		}
		return req
	}
}

// responseOf is the response block AggregatorYAML writes for j at base.
func responseOf(t *testing.T, j portalsim.Jurisdiction, base string) spec8Source {
	t.Helper()
	c := parseSpec8(t, portalsim.AggregatorYAML([]portalsim.Jurisdiction{j}, map[string]string{j.ID: base}))
	return c.Sources[0]
}

// selects reports whether the selector sel of src's format matches in
// got, and whether got is readable in that format at all.
func selects(t *testing.T, src spec8Source, got answer, sel string) (matched, readable bool) {
	t.Helper()
	switch src.Response.Format {
	case "xml":
		doc, err := parseXML(got.body)
		if err != nil {
			return false, false
		}
		_, v, err := xpath(doc, doc, src.Response.Namespaces, sel)
		return err == nil && len(v) > 0, true
	case "html":
		doc := parseHTMLAnswer(t, got)
		if sel == "" {
			return false, true
		}
		n, err := css(doc, sel)
		return err == nil && len(n) > 0, true
	}
	var doc any
	if err := json.Unmarshal(got.body, &doc); err != nil {
		return false, false
	}
	_, ok := pointer(doc, sel)
	return ok, true
}

func TestDialectFaults(t *testing.T) {
	t.Parallel()
	contentType := map[string]string{"json": "application/json; charset=utf-8", "xml": "text/xml; charset=utf-8"}
	for _, s := range spec8Shapes {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			tests := []struct {
				name     string
				fault    portalsim.Fault
				timeout  time.Duration
				connErr  bool
				timedOut bool
				status   int
				// unavailable: the answer matches the source's unavailable
				// selector; unreadable: it cannot be read into items.
				unavailable, unreadable bool
				minBody                 int
				minElapsed              time.Duration
				retryAfter              string
			}{
				{name: "healthy", status: 200},
				{name: "slow", fault: portalsim.Fault{Mode: portalsim.Slow, Latency: 100 * time.Millisecond}, status: 200, minElapsed: 100 * time.Millisecond},
				{name: "down", fault: portalsim.Fault{Mode: portalsim.Down}, connErr: true},
				{name: "hang", fault: portalsim.Fault{Mode: portalsim.Hang}, timeout: 100 * time.Millisecond, timedOut: true},
				{name: "flaky 503", fault: portalsim.Fault{Mode: portalsim.Flaky, FailRate: 1, RetryAfter: 2 * time.Second}, status: 503, retryAfter: "2"},
				{name: "forced 502", fault: portalsim.Fault{Status: 502}, status: 502},
				{name: "throttle", fault: portalsim.Fault{Mode: portalsim.Throttle, RetryAfter: 5 * time.Second}, status: 429, retryAfter: "5"},
				{name: "maintenance", fault: portalsim.Fault{Mode: portalsim.Maintenance}, status: 200, unavailable: true},
				{name: "error", fault: portalsim.Fault{Mode: portalsim.Error}, status: 200, unreadable: true},
				{name: "oversized", fault: portalsim.Fault{Mode: portalsim.Oversized}, status: 200, minBody: portalsim.OversizedBytes},
			}
			for _, tt := range tests {
				p, base, client := startPortal(t, testJurisdiction(s, portalsim.Fault{}))
				src := responseOf(t, p.Jurisdiction(), base)
				request := lookupRequest(t, s, base, client)
				if err := p.SetFault(tt.fault); err != nil {
					t.Fatal(err)
				}
				ctx := t.Context()
				if tt.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.timeout)
					defer cancel()
				}
				start := time.Now()
				got, err := doReq(client, request(ctx))
				elapsed := time.Since(start)
				switch {
				case tt.timedOut:
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("%s: %v, want the client's deadline", tt.name, err)
					}
					continue
				case tt.connErr:
					if err == nil {
						t.Errorf("%s: %d, want a connection error", tt.name, got.status)
					}
					continue
				case err != nil:
					t.Fatalf("%s: %v", tt.name, err)
				}
				if got.status != tt.status || got.header.Get("Retry-After") != tt.retryAfter {
					t.Errorf("%s: %d Retry-After %q, want %d %q (%.300s)", tt.name, got.status, got.header.Get("Retry-After"), tt.status, tt.retryAfter, got.body)
				}
				if want, ok := contentType[src.Response.Format]; ok && got.header.Get("Content-Type") != want {
					t.Errorf("%s: Content-Type %q, want %q", tt.name, got.header.Get("Content-Type"), want)
				} else if !ok && !strings.HasPrefix(got.header.Get("Content-Type"), "text/html") {
					t.Errorf("%s: Content-Type %q, want text/html", tt.name, got.header.Get("Content-Type"))
				}
				unavailable, readable := selects(t, src, got, src.Response.Unavailable)
				if unavailable != tt.unavailable {
					t.Errorf("%s: unavailable selector %q matches: %v, want %v", tt.name, src.Response.Unavailable, unavailable, tt.unavailable)
				}
				unreadable := !readable
				if readable && got.status == 200 && !unavailable {
					// Items are there and each has its id.
					items, _ := selectsItems(t, src, got)
					for _, hasID := range items {
						unreadable = unreadable || !hasID
					}
					if len(items) == 0 && !tt.unreadable && tt.minBody == 0 {
						t.Errorf("%s: no items", tt.name)
					}
				}
				if tt.minBody == 0 && unreadable != tt.unreadable {
					t.Errorf("%s: unreadable %v, want %v (%.300s)", tt.name, unreadable, tt.unreadable, got.body)
				}
				if len(got.body) < tt.minBody {
					t.Errorf("%s: %d bytes, want at least %d", tt.name, len(got.body), tt.minBody)
				}
				if tt.minBody > 0 && !readable {
					t.Errorf("%s: the oversized body is not valid %s", tt.name, src.Response.Format)
				}
				if elapsed < tt.minElapsed {
					t.Errorf("%s: answered after %v, want at least %v", tt.name, elapsed, tt.minElapsed)
				}
			}
		})
	}
}

// selectsItems reads the items of a 200 answer through src's mapping and
// reports for each whether it has an id.
func selectsItems(t *testing.T, src spec8Source, got answer) ([]bool, error) {
	t.Helper()
	var ids []bool
	r := src.Response
	switch r.Format {
	case "xml":
		doc, err := parseXML(got.body)
		if err != nil {
			return nil, err
		}
		nodes, _, _ := xpath(doc, doc, r.Namespaces, r.Items)
		for _, n := range nodes {
			_, v, _ := xpath(doc, n, r.Namespaces, r.Fields["id"])
			ids = append(ids, len(v) > 0 && v[0] != "")
		}
	case "html":
		nodes, _ := css(parseHTMLAnswer(t, got), r.Items)
		for _, n := range nodes {
			v, ok, _ := cssValue(n, r.Fields["id"])
			ids = append(ids, ok && v != "")
		}
	default:
		var doc any
		if err := json.Unmarshal(got.body, &doc); err != nil {
			return nil, err
		}
		list, _ := pointer(doc, r.Items)
		items, _ := list.([]any)
		for _, it := range items {
			v, ok := pointer(it, r.Fields["id"])
			ids = append(ids, ok && v != "")
		}
	}
	return ids, nil
}

func TestFaultsReachTheTokenEndpointAndSessionPage(t *testing.T) {
	t.Parallel()
	for _, s := range []portalsim.Shape{portalsim.ShapeOAuth2, portalsim.ShapeSession} {
		p, base, client := startPortal(t, testJurisdiction(s, portalsim.Fault{Status: 503, RetryAfter: time.Second}))
		request := func() *http.Request {
			if s == portalsim.ShapeSession {
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/consulta", nil)
				return req
			}
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/oauth/token", strings.NewReader(clientCredentials.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.SetBasicAuth(portalsim.DemoClientID, portalsim.DemoClientSecret)
			return req
		}
		got, err := doReq(client, request())
		if err != nil || got.status != 503 || got.header.Get("Retry-After") != "1" {
			t.Errorf("%s: %d %v, want 503", s, got.status, err)
		}
		p.SetFault(portalsim.Fault{Mode: portalsim.Down})
		if got, err := doReq(client, request()); err == nil {
			t.Errorf("%s: answered %d while down", s, got.status)
		}
		// Maintenance is for lookups: the session page and the token
		// endpoint are served.
		p.SetFault(portalsim.Fault{Mode: portalsim.Maintenance})
		if s == portalsim.ShapeSession {
			visit(t, client, base)
		} else {
			if got, tok := tokenRequest(t, client, base, clientCredentials, portalsim.DemoClientID, portalsim.DemoClientSecret); got.status != 200 || tok.AccessToken == "" {
				t.Errorf("token in maintenance: %d", got.status)
			}
		}
		// (Go's client may repeat the GET that met a closed connection.)
		if c := p.Calls(); c.Token+c.SessionPage < 3 || c.TokensIssued+c.SessionsIssued != 1 {
			t.Errorf("%s: Calls() = %+v", s, c)
		}
	}
}

func TestDialectNotFoundPages(t *testing.T) {
	t.Parallel()
	for _, s := range []portalsim.Shape{portalsim.ShapeHTML, portalsim.ShapeSession} {
		p, base, client := startPortal(t, testJurisdiction(s, portalsim.Fault{}))
		src := responseOf(t, p.Jurisdiction(), base)
		request := lookupRequest(t, s, base, client)
		req := request(t.Context())
		// The same request for a plate without records.
		if req.Method == http.MethodGet {
			req.URL.RawQuery = strings.ReplaceAll(req.URL.RawQuery, "AB123CD", portalsim.DemoPlateClean)
		} else {
			var b bytes.Buffer
			b.ReadFrom(req.Body)
			req = req.Clone(t.Context())
			body := strings.ReplaceAll(b.String(), "AB123CD", portalsim.DemoPlateClean)
			req.Body, req.ContentLength = nopCloser{strings.NewReader(body)}, int64(len(body))
		}
		got, err := doReq(client, req)
		if err != nil {
			t.Fatal(err)
		}
		if nf, _ := selects(t, src, got, src.Response.NotFound); got.status != 200 || !nf {
			t.Errorf("%s: %d, not_found %q matches %v: %s", s, got.status, src.Response.NotFound, nf, got.body)
		}
		if ids, _ := selectsItems(t, src, got); len(ids) != 0 {
			t.Errorf("%s: %d items for a clean plate", s, len(ids))
		}
	}
}

type nopCloser struct{ *strings.Reader }

func (nopCloser) Close() error { return nil }

// FuzzDialectRequests sends any request to a portal of each SPEC 8
// dialect: it answers, never panics, with a status of its own.
func FuzzDialectRequests(f *testing.F) {
	f.Add("GET", "/api/v1/actas?dominio=AB123CD&cursor=ZGVzZGU9Ng&limit=3", "", "")
	f.Add("GET", "/api/v1/actas?dominio=AB123CD&page=99999999999999999999&size=-1", "", "")
	f.Add("POST", "/oauth/token", "grant_type=client_credentials&scope=%zz", "Basic Og==")
	f.Add("POST", "/consulta", "dominio=AB123CD&__RequestVerificationToken=x", "")
	f.Add("GET", "/infracciones/consulta.asp?patente=%C3%B1&cuit=1", "", "Bearer x")
	var portals []*portalsim.Portal
	for _, s := range spec8Shapes {
		j := testJurisdiction(s, portalsim.Fault{})
		j.Paging.Style = portalsim.PageCursor
		portals = append(portals, portalsim.New(j))
	}
	defer func() {
		for _, p := range portals {
			p.Close()
		}
	}()
	f.Fuzz(func(t *testing.T, method, target, body, auth string) {
		req, err := http.NewRequest(method, "http://portal"+target, strings.NewReader(body))
		if err != nil || req.URL.Path == "" || !strings.HasPrefix(target, "/") || strings.HasPrefix(target, "/_sim") {
			return
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", auth)
		for _, p := range portals {
			w := httptest.NewRecorder()
			p.ServeHTTP(w, req.Clone(t.Context()))
			if w.Code < 200 || w.Code > 599 {
				t.Errorf("%s %s %q: status %d", p.Shape(), method, target, w.Code)
			}
			req.Body = io.NopCloser(strings.NewReader(body))
		}
	})
}
