package portalsim_test

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"

	"github.com/multas/aggregator/portalsim"
)

// spec8Config is the part of the aggregator config that AggregatorYAML
// writes for the SPEC 8 dialects, in SPEC 8's keys; decoding it with
// KnownFields rejects any other key.
type spec8Config struct {
	Sources []spec8Source `yaml:"sources"`
}

type spec8Source struct {
	ID           string                    `yaml:"id"`
	Jurisdiction string                    `yaml:"jurisdiction"`
	BaseURL      string                    `yaml:"base_url"`
	Operations   map[string]spec8Operation `yaml:"operations"`
	Response     struct {
		Format      string            `yaml:"format"`
		Charset     string            `yaml:"charset"`
		Namespaces  map[string]string `yaml:"namespaces"`
		Items       string            `yaml:"items"`
		Fields      map[string]string `yaml:"fields"`
		NotFound    string            `yaml:"not_found"`
		Unavailable string            `yaml:"unavailable"`
		Decimal     string            `yaml:"decimal"`
		StatusMap   map[string]string `yaml:"status_map"`
	} `yaml:"response"`
	Pagination *struct {
		Style    string `yaml:"style"`
		Start    *int   `yaml:"start"`
		Size     int    `yaml:"size"`
		Next     string `yaml:"next"`
		MaxPages int    `yaml:"max_pages"`
	} `yaml:"pagination"`
	Auth *struct {
		OAuth2 *struct {
			TokenURL     string   `yaml:"token_url"`
			ClientID     string   `yaml:"client_id"`
			ClientSecret string   `yaml:"client_secret"`
			Scopes       []string `yaml:"scopes"`
		} `yaml:"oauth2"`
		Session *struct {
			Method  string            `yaml:"method"`
			Path    string            `yaml:"path"`
			TTL     string            `yaml:"ttl"`
			Format  string            `yaml:"format"`
			Extract map[string]string `yaml:"extract"`
		} `yaml:"session"`
	} `yaml:"auth"`
}

type spec8Operation struct {
	Method  string            `yaml:"method"`
	Path    string            `yaml:"path"`
	Query   yaml.Node         `yaml:"query"` // a mapping, read in order
	Headers map[string]string `yaml:"headers"`
	Body    *struct {
		Form        yaml.Node `yaml:"form"`
		JSON        any       `yaml:"json"`
		Text        string    `yaml:"text"`
		ContentType string    `yaml:"content_type"`
	} `yaml:"body"`
	Accepts []string `yaml:"accepts"`
}

// pairs reads a YAML mapping node in order.
func pairs(n yaml.Node) [][2]string {
	var ps [][2]string
	for i := 0; i+1 < len(n.Content); i += 2 {
		ps = append(ps, [2]string{n.Content[i].Value, n.Content[i+1].Value})
	}
	return ps
}

func parseSpec8(t *testing.T, doc string) spec8Config {
	t.Helper()
	var c spec8Config
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("AggregatorYAML is not the expected SPEC 8 YAML: %v\n%s", err, doc)
	}
	return c
}

func TestDialectDemoYAMLHasSPEC8Keys(t *testing.T) {
	t.Parallel()
	js := portalsim.DialectDemo()
	urls := make(map[string]string)
	for i, j := range js {
		urls[j.ID] = "http://127.0.0.1:" + strconv.Itoa(9110+i)
	}
	doc := portalsim.AggregatorYAML(js, urls)
	var generic map[string]any
	if err := yaml.Unmarshal([]byte(doc), &generic); err != nil {
		t.Fatalf("not YAML: %v", err)
	}
	c := parseSpec8(t, doc)
	if len(c.Sources) != 5 {
		t.Fatalf("%d sources, want 5", len(c.Sources))
	}
	src := make(map[string]spec8Source)
	for i, s := range c.Sources {
		src[s.ID] = s
		if s.ID != js[i].ID || s.Jurisdiction != js[i].Name || s.BaseURL != urls[s.ID] {
			t.Errorf("source %d = %s %q %s", i, s.ID, s.Jurisdiction, s.BaseURL)
		}
		if len(s.Operations) != 3 || s.Response.Fields["id"] == "" || s.Response.Items == "" || s.Response.Unavailable == "" {
			t.Errorf("%s: operations %d, fields %v, items %q, unavailable %q", s.ID, len(s.Operations), s.Response.Fields, s.Response.Items, s.Response.Unavailable)
		}
		for k, v := range s.Response.StatusMap {
			if !slices.Contains([]string{"unpaid", "paid", "in_process"}, v) {
				t.Errorf("%s: status_map %q: %q", s.ID, k, v)
			}
		}
	}

	soap := src["neuquen"]
	byDomain := soap.Operations["by_domain"]
	if soap.Response.Format != "xml" || soap.Response.Namespaces["s"] != "http://schemas.xmlsoap.org/soap/envelope/" || soap.Response.Namespaces["m"] != "urn:multas" ||
		byDomain.Method != "POST" || byDomain.Headers["SOAPAction"] != `"urn:multas#ConsultarPorDominio"` || byDomain.Body == nil ||
		!strings.Contains(byDomain.Body.Text, "<m:dominio>{domain}</m:dominio>") || byDomain.Body.ContentType != "text/xml; charset=utf-8" ||
		!strings.Contains(soap.Operations["by_id"].Body.Text, "{id_kind}") {
		t.Errorf("neuquen is not a SOAP mapping: %+v", soap)
	}
	table := src["tucuman"]
	if table.Response.Format != "html" || table.Response.Charset != "" || table.Response.NotFound != "p.sin-resultados" ||
		table.Response.Unavailable != "div#mantenimiento" || !slices.Equal(table.Operations["by_id"].Accepts, []string{"cuit"}) ||
		!slices.Equal(pairs(table.Operations["by_domain"].Query), [][2]string{{"patente", "{domain}"}}) {
		t.Errorf("tucuman is not an HTML mapping: %+v", table)
	}
	paged := src["chubut"]
	if p := paged.Pagination; p == nil || p.Style != "page" || p.Size != 3 || p.Start == nil || *p.Start != 1 || p.MaxPages < 3 ||
		!slices.Contains(pairs(paged.Operations["by_domain"].Query), [2]string{"page", "{page}"}) {
		t.Errorf("chubut is not a paginated mapping: %+v", paged)
	}
	oauth := src["entrerios"]
	if a := oauth.Auth; a == nil || a.Session != nil || a.OAuth2 == nil || a.OAuth2.TokenURL != urls["entrerios"]+"/oauth/token" ||
		a.OAuth2.ClientID != portalsim.DemoClientID || a.OAuth2.ClientSecret != portalsim.DemoClientSecret ||
		!slices.Equal(a.OAuth2.Scopes, []string{portalsim.DemoScope}) {
		t.Errorf("entrerios has no OAuth2 block: %+v", oauth.Auth)
	}
	session := src["misiones"]
	if a := session.Auth; a == nil || a.OAuth2 != nil || a.Session == nil || a.Session.Method != "GET" || a.Session.Path != "/consulta" ||
		a.Session.Format != "html" || a.Session.Extract["token"] != "input[name=__RequestVerificationToken]@value" {
		t.Errorf("misiones has no session block: %+v", session.Auth)
	} else if ttl, err := time.ParseDuration(a.Session.TTL); err != nil || ttl <= 0 || ttl >= portalsim.DefaultSessionTTL {
		t.Errorf("misiones session ttl %q (%v), want a duration shorter than the portal's", a.Session.TTL, err)
	}
	if op := session.Operations["by_domain"]; op.Method != "POST" || op.Body == nil ||
		!slices.Equal(pairs(op.Body.Form), [][2]string{{"dominio", "{domain}"}, {"__RequestVerificationToken", "{session.token}"}}) {
		t.Errorf("misiones by_domain is not a form POST with the session token: %+v", op)
	}

	// The SPEC 6 shapes keep their SPEC 6 form.
	if got := portalsim.AggregatorYAML(portalsim.Demo(), urls); strings.Contains(got, "format:") {
		t.Errorf("the SPEC 6 demo gained SPEC 8 keys:\n%s", got)
	}
}

// everyPagingStyle is the paginated demo jurisdiction in each style.
func everyPagingStyle() []portalsim.Jurisdiction {
	var js []portalsim.Jurisdiction
	for _, j := range portalsim.DialectDemo() {
		if j.Shape != portalsim.ShapePaged {
			continue
		}
		for _, s := range portalsim.PagingStyles() {
			j := j
			j.ID = "paged-" + string(s)
			j.Paging.Style = s
			js = append(js, j)
		}
	}
	return js
}

// TestDialectYAMLMapsEveryPortal reads every SPEC 8 portal through the
// mapping AggregatorYAML wrote for it, as the aggregator will: token or
// session first, templates expanded into path, query, headers and body,
// every page followed, items and fields by XPath or CSS selector after
// decoding the page's charset, statuses by status_map ignoring case; and
// checks what comes out against the portal's records.
func TestDialectYAMLMapsEveryPortal(t *testing.T) {
	t.Parallel()
	js := append(portalsim.DialectDemo(), everyPagingStyle()...)
	s, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c := parseSpec8(t, portalsim.AggregatorYAML(js, s.URLs()))
	t.Cleanup(func() { // after the subtests, before the servers close
		// Seven records for DemoPlate (and DemoCUIT, DemoDNI) in pages of
		// three: three pages each.
		if got := s.Portal("chubut").Calls(); got.ByDomain < 3 || got.ByID < 6 {
			t.Errorf("chubut served %+v, want at least 3 pages by domain and 6 by id", got)
		}
	})

	for i, src := range c.Sources {
		j := js[i]
		t.Run(src.ID, func(t *testing.T) {
			t.Parallel()
			m := newMapper(t, src)
			type query struct{ op, value string }
			var queries []query
			for _, plate := range []string{portalsim.DemoPlate, portalsim.DemoPlateOld, portalsim.DemoPlateMoto, portalsim.DemoPlateClean} {
				queries = append(queries, query{"by_domain", plate})
			}
			for _, id := range []string{portalsim.DemoCUIT, portalsim.DemoDNI, portalsim.DemoCUITFleet, portalsim.DemoCUITClean} {
				queries = append(queries, query{"by_id", digitsOf(id)})
			}
			found := 0
			for _, q := range queries {
				kind := idKind(q.value)
				if q.op == "by_id" && len(src.Operations["by_id"].Accepts) > 0 && !slices.Contains(src.Operations["by_id"].Accepts, kind) {
					continue
				}
				items, pages := m.lookup(q.op, map[string]string{"domain": q.value, "id": q.value, "id_kind": kind})
				want := recordsFor(j, q.op, q.value)
				if len(items) != len(want) {
					t.Errorf("%s %s: %d items, want %d", q.op, q.value, len(items), len(want))
					continue
				}
				for k, item := range items {
					checkMapped(t, src, item, want[k])
					found++
				}
				if src.Pagination != nil && len(want) > src.Pagination.Size {
					if wantPages := (len(want) + src.Pagination.Size - 1) / src.Pagination.Size; pages < wantPages {
						t.Errorf("%s %s: %d pages, want at least %d", q.op, q.value, pages, wantPages)
					}
				}
			}
			if found == 0 {
				t.Errorf("no record of %s was read through its mapping", src.ID)
			}
			for _, r := range j.Records {
				got := m.call("voucher", map[string]string{"infraction_id": r.ID}, nil)
				if got.status != 200 || got.header.Get("Content-Type") != "application/pdf" || !bytes.HasPrefix(got.body, []byte("%PDF-")) {
					t.Errorf("voucher %s: %d %q, want a PDF", r.ID, got.status, got.header.Get("Content-Type"))
				}
			}
		})
	}
}

// mapper is the test's stand-in for the aggregator's adapter of a source.
type mapper struct {
	t      *testing.T
	src    spec8Source
	client *http.Client
	bearer string
	token  string // the session's token
}

func newMapper(t *testing.T, src spec8Source) *mapper {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(client.CloseIdleConnections)
	m := &mapper{t: t, src: src, client: client}
	if src.Auth == nil {
		return m
	}
	if o := src.Auth.OAuth2; o != nil {
		form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(o.Scopes, " ")}}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, o.TokenURL, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(url.QueryEscape(o.ClientID), url.QueryEscape(o.ClientSecret))
		got := m.do(req)
		var tok struct {
			AccessToken string `json:"access_token"`
			TokenType   string `json:"token_type"`
		}
		if err := json.Unmarshal(got.body, &tok); got.status != 200 || err != nil || tok.AccessToken == "" || tok.TokenType != "Bearer" {
			t.Fatalf("token endpoint: %d %s", got.status, got.body)
		}
		m.bearer = tok.AccessToken
	}
	if s := src.Auth.Session; s != nil {
		req, _ := http.NewRequestWithContext(t.Context(), s.Method, src.BaseURL+s.Path, nil)
		got := m.do(req)
		doc := parseHTMLAnswer(t, got)
		v, ok, err := cssValue(doc, s.Extract["token"])
		if got.status != 200 || !ok || err != nil || v == "" {
			t.Fatalf("session page: %d, token %q %v %v", got.status, v, ok, err)
		}
		m.token = v
	}
	return m
}

func (m *mapper) do(req *http.Request) answer {
	m.t.Helper()
	resp, err := m.client.Do(req)
	if err != nil {
		m.t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		m.t.Fatal(err)
	}
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

// expand replaces the placeholders of s; escape escapes each value.
func expand(s string, vals map[string]string, escape func(string) string) string {
	return regexp.MustCompile(`\{[a-z_.]+\}`).ReplaceAllStringFunc(s, func(ph string) string {
		return escape(vals[ph[1:len(ph)-1]])
	})
}

// call sends operation op with vals (and the page placeholders), or to
// next when it is a URL.
func (m *mapper) call(op string, vals map[string]string, next *url.URL) answer {
	m.t.Helper()
	o := m.src.Operations[op]
	vals = maps(vals, map[string]string{"session.token": m.token})
	var u *url.URL
	if next != nil {
		u = next
	} else {
		var err error
		if u, err = url.Parse(m.src.BaseURL + expand(o.Path, vals, url.PathEscape)); err != nil {
			m.t.Fatal(err)
		}
		q := u.Query()
		for _, kv := range pairs(o.Query) {
			q.Set(kv[0], expand(kv[1], vals, func(s string) string { return s }))
		}
		u.RawQuery = q.Encode()
	}
	var body io.Reader
	contentType := ""
	if o.Body != nil && next == nil {
		switch {
		case o.Body.Text != "":
			body, contentType = strings.NewReader(expand(o.Body.Text, vals, xmlEscape)), o.Body.ContentType
		default:
			form := url.Values{}
			for _, kv := range pairs(o.Body.Form) {
				form.Set(kv[0], expand(kv[1], vals, func(s string) string { return s }))
			}
			body, contentType = strings.NewReader(form.Encode()), "application/x-www-form-urlencoded"
		}
	}
	req, err := http.NewRequestWithContext(m.t.Context(), o.Method, u.String(), body)
	if err != nil {
		m.t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range o.Headers {
		req.Header.Set(k, expand(v, vals, func(s string) string { return s }))
	}
	if m.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+m.bearer)
	}
	return m.do(req)
}

func maps(a, b map[string]string) map[string]string {
	m := make(map[string]string, len(a)+len(b))
	for k, v := range a {
		m[k] = v
	}
	for k, v := range b {
		m[k] = v
	}
	return m
}

func xmlEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// lookup runs a lookup through every page and returns its items, each
// read into field → value, and the number of pages.
func (m *mapper) lookup(op string, vals map[string]string) ([]map[string]string, int) {
	m.t.Helper()
	p := m.src.Pagination
	var all []map[string]string
	pageNo, offset, cursor := 1, 0, ""
	if p != nil && p.Start != nil {
		pageNo, offset = *p.Start, *p.Start
	}
	var next *url.URL
	for pages := 1; ; pages++ {
		v := maps(vals, nil)
		if p != nil {
			v["page"], v["offset"], v["size"], v["cursor"] = strconv.Itoa(pageNo), strconv.Itoa(offset), strconv.Itoa(p.Size), cursor
		}
		got := m.call(op, v, next)
		if got.status != 200 {
			m.t.Fatalf("%s %v: status %d: %.300s", op, vals, got.status, got.body)
		}
		items, nextRef := m.items(got)
		all = append(all, items...)
		if p == nil {
			return all, pages
		}
		if pages > p.MaxPages {
			m.t.Fatalf("more than %d pages", p.MaxPages)
		}
		switch p.Style {
		case "page", "offset":
			if len(items) < p.Size {
				return all, pages
			}
			pageNo++
			offset += p.Size
		case "cursor":
			if nextRef == "" {
				return all, pages
			}
			cursor = nextRef
		case "link":
			link := nextLink(got.header.Get("Link"))
			if link == "" {
				if nextRef != "" {
					m.t.Errorf("the body names a next page %q, the Link header none", nextRef)
				}
				return all, pages
			}
			u, err := url.Parse(link)
			if err != nil || u.Host != mustParse(m.t, m.src.BaseURL).Host {
				m.t.Fatalf("Link next %q is not of the portal's origin", link)
			}
			if body := mustParse(m.t, m.src.BaseURL).ResolveReference(mustParse(m.t, nextRef)); body.String() != u.String() {
				m.t.Errorf("body next %q resolves to %s, Link says %s", nextRef, body, u)
			}
			next = u
		}
	}
}

func mustParse(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var linkNext = regexp.MustCompile(`<([^>]*)>\s*;\s*rel="next"`)

func nextLink(h string) string {
	if m := linkNext.FindStringSubmatch(h); m != nil {
		return m[1]
	}
	return ""
}

// items reads the items of one answer, and the next page's reference
// (pagination.next, or the body's paginacion/siguiente for link style).
func (m *mapper) items(got answer) ([]map[string]string, string) {
	m.t.Helper()
	r := m.src.Response
	var out []map[string]string
	next := ""
	switch r.Format {
	case "xml":
		doc, err := parseXML(got.body)
		if err != nil {
			m.t.Fatalf("answer is not XML: %v", err)
		}
		if _, v, _ := xpath(doc, doc, r.Namespaces, r.Unavailable); len(v) > 0 {
			m.t.Fatalf("healthy portal answered its maintenance page")
		}
		nodes, _, err := xpath(doc, doc, r.Namespaces, r.Items)
		if err != nil {
			m.t.Fatal(err)
		}
		for _, n := range nodes {
			item := make(map[string]string)
			for name, sel := range r.Fields {
				_, v, err := xpath(doc, n, r.Namespaces, sel)
				if err != nil {
					m.t.Fatal(err)
				}
				if len(v) > 0 {
					item[name] = v[0]
				}
			}
			out = append(out, item)
		}
	case "html":
		doc := parseHTMLAnswer(m.t, got)
		if n, _ := css(doc, r.Unavailable); len(n) > 0 {
			m.t.Fatalf("healthy portal answered its maintenance page")
		}
		nodes, err := css(doc, r.Items)
		if err != nil {
			m.t.Fatal(err)
		}
		if nf, _ := css(doc, r.NotFound); (len(nf) > 0) == (len(nodes) > 0) {
			m.t.Errorf("%d items and %d not_found matches", len(nodes), len(nf))
		}
		for _, n := range nodes {
			item := make(map[string]string)
			for name, sel := range r.Fields {
				v, ok, err := cssValue(n, sel)
				if err != nil {
					m.t.Fatal(err)
				}
				if ok {
					item[name] = v
				}
			}
			out = append(out, item)
		}
	default:
		dec := json.NewDecoder(bytes.NewReader(got.body))
		dec.UseNumber()
		var doc any
		if err := dec.Decode(&doc); err != nil {
			m.t.Fatalf("answer is not JSON: %v", err)
		}
		list, _ := pointer(doc, r.Items)
		items, ok := list.([]any)
		if !ok {
			m.t.Fatalf("items %q is not a list in %s", r.Items, got.body)
		}
		for _, it := range items {
			item := make(map[string]string)
			for name, ptr := range r.Fields {
				if v, ok := pointer(it, ptr); ok {
					item[name] = fmt.Sprint(v)
				}
			}
			out = append(out, item)
		}
		ref := "/paginacion/siguiente"
		if p := m.src.Pagination; p != nil && p.Next != "" {
			ref = p.Next
		}
		if v, ok := pointer(doc, ref); ok {
			next = fmt.Sprint(v)
		}
	}
	return out, next
}

// parseHTMLAnswer decodes an HTML answer from its charset (Content-Type's,
// else the page's meta) and parses it.
func parseHTMLAnswer(t *testing.T, got answer) *html.Node {
	t.Helper()
	r, err := charset.NewReader(bytes.NewReader(got.body), got.header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(r)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// checkMapped checks one mapped item against its record, normalising as
// the aggregator does.
func checkMapped(t *testing.T, src spec8Source, item map[string]string, want portalsim.Record) {
	t.Helper()
	if item["id"] != want.ID {
		t.Errorf("%s: id = %q, want %q", src.ID, item["id"], want.ID)
	}
	if item["description"] != want.Description || item["place"] != want.Place {
		t.Errorf("%s %s: description %q place %q, want %q %q", src.ID, want.ID, item["description"], item["place"], want.Description, want.Place)
	}
	if got, ok := moneyOf(item["amount"]); !ok || got.Cmp(mustRat(want.Amount)) != 0 {
		t.Errorf("%s %s: amount %q, want %s", src.ID, want.ID, item["amount"], want.Amount)
	}
	if want.Currency != "" && item["currency"] != want.Currency {
		t.Errorf("%s %s: currency %q, want %q", src.ID, want.ID, item["currency"], want.Currency)
	}
	wantTime, _ := time.ParseInLocation("2006-01-02T15:04:05", want.Date, time.FixedZone("", -3*3600))
	if got, ok := timeOf(item["date"], wantTime.Location()); !ok || !got.Equal(wantTime) {
		t.Errorf("%s %s: date %q, want %s", src.ID, want.ID, item["date"], wantTime.Format(time.RFC3339))
	}
	status := "unknown"
	for k, v := range src.Response.StatusMap {
		if strings.EqualFold(k, item["status"]) {
			status = v
		}
	}
	wantStatus := want.Status
	if !slices.Contains([]string{"unpaid", "paid", "in_process"}, wantStatus) {
		wantStatus = "unknown"
	}
	if status != wantStatus || item["status"] == "" {
		t.Errorf("%s %s: status %q maps to %s, want %s", src.ID, want.ID, item["status"], status, wantStatus)
	}
}

func mustRat(s string) *big.Rat {
	r, ok := new(big.Rat).SetString(s)
	if !ok {
		panic(s)
	}
	return r
}

// moneyOf reads "185000.00", "$ 185.000,00" or "ARS 185.000,00".
func moneyOf(s string) (*big.Rat, bool) {
	s = strings.TrimSpace(strings.TrimLeft(s, "$ABCDEFGHIJKLMNOPQRSTUVWXYZ "))
	if strings.Contains(s, ",") {
		s = strings.ReplaceAll(strings.ReplaceAll(s, ".", ""), ",", ".")
	}
	return new(big.Rat).SetString(s)
}

func timeOf(s string, loc *time.Location) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, true
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04:05.000", "2006-01-02 15:04:05", "02/01/2006 15:04", "02/01/2006 15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, loc); err == nil {
			return t, true
		}
	}
	return time.Time{}, false
}

// TestLosslessShapesMapAlike serves the same records in every lossless
// shape and reads each through its mapping: every field of every record
// comes out the same (seconds, a foreign currency, three decimals, an
// unmapped status included), whatever the dialect.
func TestLosslessShapesMapAlike(t *testing.T) {
	t.Parallel()
	recs := []portalsim.Record{
		{Domain: portalsim.DemoPlate, CUIT: portalsim.DemoCUIT, DNI: portalsim.DemoDNI, ID: "L-1", Date: "2026-03-14T09:12:05",
			Description: "Exceso de velocidad en Córdoba", Place: "Av. Vélez Sarsfield 1200, Córdoba", Amount: "98765.435", Currency: "USD", Status: portalsim.StatusUnpaid},
		{Domain: portalsim.DemoPlate, CUIT: portalsim.DemoCUIT, DNI: portalsim.DemoDNI, ID: "L-2", Date: "2025-12-31T23:59:00",
			Description: "Estacionamiento prohibido", Place: "Calle 1", Amount: "1500", Currency: "ARS", Status: "prescripta"},
		{Domain: portalsim.DemoPlate, CUIT: portalsim.DemoCUIT, DNI: portalsim.DemoDNI, ID: "L-3", Date: "2026-01-01T00:00:00",
			Description: "Giro indebido", Place: "Ruta 3 km 1", Amount: "0.5", Currency: "ARS", Status: portalsim.StatusInProcess},
		{Domain: portalsim.DemoPlate, CUIT: portalsim.DemoCUIT, DNI: portalsim.DemoDNI, ID: "L-4", Date: "2026-02-02T02:02:00",
			Description: "Semáforo en rojo", Place: "Bv. Oroño 1", Amount: "10.00", Currency: "ARS", Status: portalsim.StatusPaid},
	}
	var js []portalsim.Jurisdiction
	for _, s := range portalsim.LosslessShapes() {
		js = append(js, portalsim.NewJurisdiction(s, "lossless-"+string(s), "Sin pérdidas", recs))
	}
	s, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c := parseSpec8(t, portalsim.AggregatorYAML(js, s.URLs()))
	for i, src := range c.Sources {
		t.Run(string(js[i].Shape), func(t *testing.T) {
			t.Parallel()
			m := newMapper(t, src)
			for _, q := range []struct{ op, value string }{{"by_domain", portalsim.DemoPlate}, {"by_id", digitsOf(portalsim.DemoCUIT)}} {
				items, _ := m.lookup(q.op, map[string]string{"domain": q.value, "id": q.value, "id_kind": "cuit"})
				if len(items) != len(recs) {
					t.Fatalf("%s: %d items, want %d", q.op, len(items), len(recs))
				}
				for k, item := range items {
					if item["currency"] == "" {
						t.Errorf("%s %s: no currency", q.op, recs[k].ID)
					}
					checkMapped(t, src, item, recs[k])
				}
			}
		})
	}
}
