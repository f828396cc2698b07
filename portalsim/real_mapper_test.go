package portalsim_test

// A reader of the SPEC 12 mappings AggregatorYAML writes, so that the
// tests read each real-portal shape through its own mapping as the
// aggregator's engine will (which lands in package sources, and which this
// does not replace): errors rules, unwrap, item lists with format and set,
// match, field objects (select lists with join, column under a header,
// TR35 layouts, decimal, units), null_values and charset. It reads the
// subsets AggregatorYAML writes (selectors_test.go's XPath and CSS, JSON
// pointers, JSONPath of member and [*] steps) and is a test device, not a
// parser to trust with anything else.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the portals' zones, wherever the tests run
	"unicode"

	"go.yaml.in/yaml/v3"
	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/unicode/norm"
)

// s12Config is the `sources:` AggregatorYAML writes, read for mapping (the
// key names are checked by TestRealYAMLUsesSPEC12Keys).
type s12Config struct {
	Sources []s12Source `yaml:"sources"`
}

type s12Source struct {
	ID         string                  `yaml:"id"`
	BaseURL    string                  `yaml:"base_url"`
	TimeZone   string                  `yaml:"time_zone"`
	Currency   string                  `yaml:"currency"`
	Headers    map[string]string       `yaml:"headers"`
	Operations map[string]s12Operation `yaml:"operations"`
	Response   s12Response             `yaml:"response"`
	Auth       *struct {
		OAuth2 *struct {
			TokenURL     string   `yaml:"token_url"`
			ClientID     string   `yaml:"client_id"`
			ClientSecret string   `yaml:"client_secret"`
			Scopes       []string `yaml:"scopes"`
			ClientAuth   string   `yaml:"client_auth"`
		} `yaml:"oauth2"`
	} `yaml:"auth"`
}

type s12Operation struct {
	Method  string            `yaml:"method"`
	Path    string            `yaml:"path"`
	Query   map[string]string `yaml:"query"`
	Headers map[string]string `yaml:"headers"`
	Body    *struct {
		Text        string `yaml:"text"`
		ContentType string `yaml:"content_type"`
	} `yaml:"body"`
	Accepts []string `yaml:"accepts"`
}

type s12Response struct {
	Format     string            `yaml:"format"`
	Charset    string            `yaml:"charset"`
	Namespaces map[string]string `yaml:"namespaces"`
	Decimal    string            `yaml:"decimal"`
	NullValues []string          `yaml:"null_values"`
	Unwrap     []struct {
		Select string `yaml:"select"`
		Format string `yaml:"format"`
	} `yaml:"unwrap"`
	Items       s12Items            `yaml:"items"`
	Match       *s12Field           `yaml:"match"`
	Header      string              `yaml:"header"`
	Fields      map[string]s12Field `yaml:"fields"`
	NotFound    string              `yaml:"not_found"`
	Unavailable string              `yaml:"unavailable"`
	Errors      []s12Rule           `yaml:"errors"`
	StatusMap   map[string]string   `yaml:"status_map"`
}

// strList is a string or a list of them.
type strList []string

func (l *strList) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = strList{n.Value}
		return nil
	}
	var s []string
	err := n.Decode(&s)
	*l = s
	return err
}

// s12Items is one item selector or a list of entries.
type s12Items []s12Entry

type s12Entry struct {
	Select string            `yaml:"select"`
	Format string            `yaml:"format"`
	Set    map[string]string `yaml:"set"`
}

func (l *s12Items) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*l = s12Items{{Select: n.Value}}
		return nil
	}
	var es []s12Entry
	err := n.Decode(&es)
	*l = es
	return err
}

// s12Field is a field (or match): a selector, or an object.
type s12Field struct {
	Select  strList  `yaml:"select"`
	Column  strList  `yaml:"column"`
	Join    *string  `yaml:"join"`
	Layout  []string `yaml:"layout"`
	Decimal string   `yaml:"decimal"`
	Code    string   `yaml:"code"`
	Equals  string   `yaml:"equals"` // match only
}

func (f *s12Field) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*f = s12Field{Select: strList{n.Value}}
		return nil
	}
	type plain s12Field
	return n.Decode((*plain)(f))
}

type s12Rule struct {
	Status     []int   `yaml:"status"`
	When       s12When `yaml:"when"`
	Outcome    string  `yaml:"outcome"`
	Detail     string  `yaml:"detail"`
	RetryAfter string  `yaml:"retry_after"`
}

// s12When is a selector that must be present, or a comparison.
type s12When struct {
	Select    string `yaml:"select"`
	Equals    any    `yaml:"equals"`
	HasEquals bool   `yaml:"-"`
	Contains  string `yaml:"contains"`
	Matches   string `yaml:"matches"`
}

func (w *s12When) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		*w = s12When{Select: n.Value}
		return nil
	}
	type plain s12When
	if err := n.Decode((*plain)(w)); err != nil {
		return err
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		w.HasEquals = w.HasEquals || n.Content[i].Value == "equals"
	}
	return nil
}

func parseS12(t *testing.T, doc string) s12Config {
	t.Helper()
	var c s12Config
	if err := yaml.Unmarshal([]byte(doc), &c); err != nil {
		t.Fatalf("AggregatorYAML is not YAML: %v\n%s", err, doc)
	}
	return c
}

// ---------------------------------------------------------------------------
// Documents and selectors.

// s12Doc is a parsed document of one format.
type s12Doc struct {
	format string
	json   any
	html   *html.Node
	xml    *xnode
}

// s12Node is a place in a document: an item, or the document itself.
type s12Node struct {
	doc  *s12Doc
	json any
	html *html.Node
	xml  *xnode
}

func (d *s12Doc) root() s12Node { return s12Node{doc: d, json: d.json, html: d.html, xml: d.xml} }

func parseDoc(format string, text []byte) (*s12Doc, error) {
	d := &s12Doc{format: format}
	switch format {
	case "json":
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		if err := dec.Decode(&d.json); err != nil {
			return nil, err
		}
	case "xml":
		x, err := parseXML(text)
		if err != nil {
			return nil, err
		}
		d.xml = x
	case "html":
		h, err := html.Parse(bytes.NewReader(text))
		if err != nil {
			return nil, err
		}
		d.html = h
	default:
		return nil, fmt.Errorf("format %q", format)
	}
	return d, nil
}

// jsonPath evaluates the JSONPath subset "$", ".name", "[*]".
func jsonPath(v any, path string) []any {
	nodes := []any{v}
	for rest := strings.TrimPrefix(path, "$"); rest != ""; {
		var next []any
		switch {
		case strings.HasPrefix(rest, "[*]"):
			rest = rest[3:]
			for _, n := range nodes {
				if l, ok := n.([]any); ok {
					next = append(next, l...)
				}
			}
		case strings.HasPrefix(rest, "."):
			end := strings.IndexAny(rest[1:], ".[")
			if end < 0 {
				end = len(rest) - 1
			}
			name := rest[1 : end+1]
			rest = rest[end+1:]
			for _, n := range nodes {
				if m, ok := n.(map[string]any); ok {
					if c, ok := m[name]; ok {
						next = append(next, c)
					}
				}
			}
		default:
			return nil
		}
		nodes = next
	}
	return nodes
}

// selectNodes are the nodes sel selects from n: a JSON array's elements
// for a pointer to one, a JSONPath's nodes, XPath or CSS matches.
func selectNodes(n s12Node, ns map[string]string, sel string) []s12Node {
	var out []s12Node
	switch n.doc.format {
	case "json":
		var vals []any
		if strings.HasPrefix(sel, "$") {
			vals = jsonPath(n.json, sel)
		} else if v, ok := pointer(n.json, sel); ok {
			if l, isList := v.([]any); isList {
				vals = l
			} else {
				vals = []any{v}
			}
		}
		for _, v := range vals {
			out = append(out, s12Node{doc: n.doc, json: v})
		}
	case "xml":
		nodes, _, _ := xpath(n.doc.xml, n.xml, ns, sel)
		for _, x := range nodes {
			out = append(out, s12Node{doc: n.doc, xml: x})
		}
	case "html":
		nodes, _ := css(n.html, sel)
		for _, h := range nodes {
			out = append(out, s12Node{doc: n.doc, html: h})
		}
	}
	return out
}

// value is the text sel selects in n, and whether it selects anything: a
// JSON value as text (a number as written), an XPath string value, CSS
// text trimmed with its inner white space collapsed or "sel@attr".
func value(n s12Node, ns map[string]string, sel string) (string, bool) {
	switch n.doc.format {
	case "json":
		var v any
		var ok bool
		if strings.HasPrefix(sel, "$") {
			vs := jsonPath(n.json, sel)
			ok = len(vs) > 0
			if ok {
				v = vs[0]
			}
		} else {
			v, ok = pointer(n.json, sel)
		}
		if !ok || v == nil {
			return "", false
		}
		return fmt.Sprint(v), true
	case "xml":
		_, vals, _ := xpath(n.doc.xml, n.xml, ns, sel)
		if len(vals) == 0 {
			return "", false
		}
		return vals[0], true
	}
	v, ok, _ := cssValue(n.html, sel)
	return v, ok
}

// present is SPEC 12's "present": JSON other than null, false, 0, "", []
// and {}; any XPath or CSS match.
func present(n s12Node, ns map[string]string, sel string) bool {
	if n.doc.format != "json" {
		return len(selectNodes(n, ns, sel)) > 0
	}
	v, ok := pointer(n.json, sel)
	if !ok {
		return false
	}
	switch v := v.(type) {
	case nil:
		return false
	case bool:
		return v
	case json.Number:
		f, _ := v.Float64()
		return f != 0
	case string:
		return v != ""
	case []any:
		return len(v) > 0
	case map[string]any:
		return len(v) > 0
	}
	return true
}

// ---------------------------------------------------------------------------
// The lookup.

// s12Outcome is what a lookup comes to, as the aggregator reports it:
// "ok" (with its infractions; none is no infractions), "rejected",
// "unavailable", "rate_limited", "error".
type s12Outcome struct {
	kind        string
	detail      string
	retryAfter  string
	infractions []s12Infraction
}

// s12Infraction is one infraction as the aggregator writes it.
type s12Infraction struct {
	ID, Date, Description, Place, Amount, Currency, Status, StatusRaw string
	Units                                                             string // "100.00 UF"
}

// s12Mapper reads one source through its mapping.
type s12Mapper struct {
	t      *testing.T
	src    s12Source
	client *http.Client
	bearer string
}

func newS12Mapper(t *testing.T, src s12Source) *s12Mapper {
	t.Helper()
	m := &s12Mapper{t: t, src: src, client: newClient(t)}
	if src.Auth != nil && src.Auth.OAuth2 != nil {
		o := src.Auth.OAuth2
		form := url.Values{"grant_type": {"client_credentials"}, "scope": {strings.Join(o.Scopes, " ")}}
		if o.ClientAuth == "body" {
			form.Set("client_id", o.ClientID)
			form.Set("client_secret", o.ClientSecret)
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, o.TokenURL, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if o.ClientAuth != "body" {
			req.SetBasicAuth(url.QueryEscape(o.ClientID), url.QueryEscape(o.ClientSecret))
		}
		got, err := doReq(m.client, req)
		var tok struct {
			AccessToken string `json:"access_token"`
		}
		if err != nil || got.status != 200 || json.Unmarshal(got.body, &tok) != nil {
			t.Fatalf("token endpoint: %d %v %s", got.status, err, got.body)
		}
		m.bearer = tok.AccessToken
	}
	return m
}

// call sends operation op with the placeholders vals.
func (m *s12Mapper) call(op string, vals map[string]string) answer {
	m.t.Helper()
	o := m.src.Operations[op]
	u, err := url.Parse(m.src.BaseURL + expand(o.Path, vals, url.PathEscape))
	if err != nil {
		m.t.Fatal(err)
	}
	q := u.Query()
	for k, v := range o.Query {
		q.Set(k, expand(v, vals, func(s string) string { return s }))
	}
	u.RawQuery = q.Encode()
	var body io.Reader
	if o.Body != nil {
		body = strings.NewReader(expand(o.Body.Text, vals, xmlEscape))
	}
	req, err := http.NewRequestWithContext(m.t.Context(), o.Method, u.String(), body)
	if err != nil {
		m.t.Fatal(err)
	}
	if o.Body != nil {
		req.Header.Set("Content-Type", o.Body.ContentType)
	}
	for k, v := range m.src.Headers {
		req.Header.Set(k, v)
	}
	for k, v := range o.Headers {
		req.Header.Set(k, v)
	}
	if m.bearer != "" {
		req.Header.Set("Authorization", "Bearer "+m.bearer)
	}
	got, err := doReq(m.client, req)
	if err != nil {
		m.t.Fatalf("%s: %v", op, err)
	}
	return got
}

// lookup runs op for subject (a plate or an id) and classifies the answer.
func (m *s12Mapper) lookup(op, subject string) s12Outcome {
	m.t.Helper()
	kind := "cuit"
	if len(subject) < 11 {
		kind = "dni"
	}
	got := m.call(op, map[string]string{"domain": subject, "id": subject, "id_kind": kind})
	return m.classify(got, op, subject)
}

// decode is the answer's text in the response's charset: the configured
// one, else Content-Type's, else (HTML) the meta's, else UTF-8.
func (m *s12Mapper) decode(got answer) ([]byte, error) {
	r := m.src.Response
	if r.Charset != "" {
		enc, _ := charset.Lookup(r.Charset)
		if enc == nil {
			return nil, fmt.Errorf("charset %q", r.Charset)
		}
		return enc.NewDecoder().Bytes(got.body)
	}
	if r.Format != "html" {
		return got.body, nil
	}
	rd, err := charset.NewReader(bytes.NewReader(got.body), got.header.Get("Content-Type"))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(rd)
}

func (m *s12Mapper) classify(got answer, op, subject string) s12Outcome {
	r := m.src.Response
	text, err := m.decode(got)
	if err != nil {
		return s12Outcome{kind: "error", detail: err.Error()}
	}
	doc, parseErr := parseDoc(r.Format, text)
	// The errors rules, in order, on the answer as received.
	if parseErr == nil {
		for _, rule := range r.Errors {
			if len(rule.Status) > 0 && !containsInt(rule.Status, got.status) || !m.holds(doc.root(), rule.When) {
				continue
			}
			o := s12Outcome{kind: rule.Outcome, retryAfter: rule.RetryAfter}
			if rule.Detail != "" {
				o.detail, _ = value(doc.root(), r.Namespaces, rule.Detail)
			}
			if o.kind == "rate_limited" && o.retryAfter == "" {
				o.retryAfter = "60s"
			}
			return o
		}
	}
	switch s := got.status; {
	case s == http.StatusTooManyRequests:
		return s12Outcome{kind: "rate_limited"}
	case s == http.StatusNotFound:
		return s12Outcome{kind: "ok"}
	case s >= 500:
		return s12Outcome{kind: "unavailable"}
	case s >= 400:
		return s12Outcome{kind: "rejected"}
	}
	if parseErr != nil {
		return s12Outcome{kind: "error", detail: parseErr.Error()}
	}
	for _, u := range r.Unwrap {
		inner, ok := value(doc.root(), r.Namespaces, u.Select)
		if !ok {
			return s12Outcome{kind: "error", detail: "no document at " + u.Select}
		}
		if doc, err = parseDoc(u.Format, []byte(inner)); err != nil {
			return s12Outcome{kind: "error", detail: err.Error()}
		}
	}
	if r.Unavailable != "" && present(doc.root(), r.Namespaces, r.Unavailable) {
		return s12Outcome{kind: "unavailable"}
	}
	notFound := r.NotFound != "" && present(doc.root(), r.Namespaces, r.NotFound)
	var infs []s12Infraction
	for _, entry := range r.Items {
		sel, attr := entry.Select, ""
		if i := strings.LastIndex(sel, "@"); doc.format == "html" && i >= 0 {
			sel, attr = sel[:i], sel[i+1:]
		}
		for _, item := range selectNodes(doc.root(), r.Namespaces, sel) {
			if entry.Format != "" {
				text, ok := itemText(item, attr)
				sub, err := parseDoc(entry.Format, []byte(text))
				if !ok || err != nil {
					return s12Outcome{kind: "error", detail: fmt.Sprintf("item %q: %v", text, err)}
				}
				item = sub.root()
			}
			inf, keep, err := m.infraction(item, entry.Set, op, subject)
			if err != nil {
				return s12Outcome{kind: "error", detail: err.Error()}
			}
			if keep {
				infs = append(infs, inf)
			}
		}
	}
	if r.Format == "html" && len(infs) == 0 && !notFound {
		return s12Outcome{kind: "error", detail: "no items and no no-results marker"}
	}
	return s12Outcome{kind: "ok", infractions: infs}
}

// itemText is the text of an item that is a document of its own: its
// attribute attr (HTML), its text, its string value (XML), a JSON string.
func itemText(item s12Node, attr string) (string, bool) {
	switch {
	case item.html != nil && attr != "":
		return attrOf(item.html, attr)
	case item.html != nil:
		return textOf(item.html), true
	case item.xml != nil:
		return item.xml.text.String(), true
	}
	s, ok := item.json.(string)
	return s, ok
}

func containsInt(l []int, v int) bool {
	for _, x := range l {
		if x == v {
			return true
		}
	}
	return false
}

// holds reports whether a rule's when holds at n.
func (m *s12Mapper) holds(n s12Node, w s12When) bool {
	ns := m.src.Response.Namespaces
	if !w.HasEquals && w.Contains == "" && w.Matches == "" {
		return present(n, ns, w.Select)
	}
	text, ok := value(n, ns, w.Select)
	if !ok {
		return false
	}
	switch {
	case w.HasEquals:
		if n.doc.format == "json" {
			v, _ := pointer(n.json, w.Select)
			return jsonEquals(v, w.Equals)
		}
		return text == fmt.Sprint(w.Equals)
	case w.Contains != "":
		return strings.Contains(strings.ToLower(text), strings.ToLower(w.Contains))
	}
	return regexp.MustCompile(w.Matches).MatchString(text)
}

// jsonEquals compares a JSON scalar as it is with a YAML one: a string
// with a string, a boolean with a boolean, a number with a number.
func jsonEquals(v, want any) bool {
	switch v := v.(type) {
	case string:
		w, ok := want.(string)
		return ok && v == w
	case bool:
		w, ok := want.(bool)
		return ok && v == w
	case json.Number:
		a, ok1 := new(big.Rat).SetString(v.String())
		b, ok2 := new(big.Rat).SetString(fmt.Sprint(want))
		return ok1 && ok2 && a.Cmp(b) == 0
	}
	return false
}

// infraction maps one item; keep is false when match drops it.
func (m *s12Mapper) infraction(item s12Node, set map[string]string, op, subject string) (s12Infraction, bool, error) {
	r := m.src.Response
	field := func(name string) (string, bool, error) {
		f, ok := r.Fields[name]
		if !ok {
			return "", false, nil
		}
		v, ok, err := m.fieldValue(item, f)
		if ok && isNull(v, r.NullValues) {
			v, ok = "", false
		}
		if !ok && set[name] != "" {
			return set[name], true, nil
		}
		return v, ok, err
	}
	if r.Match != nil && op == "by_domain" && strings.Contains(r.Match.Equals, "{domain}") {
		v, _, err := m.fieldValue(item, *r.Match)
		if err != nil {
			return s12Infraction{}, false, err
		}
		if plateKey(v) != plateKey(strings.ReplaceAll(r.Match.Equals, "{domain}", subject)) {
			return s12Infraction{}, false, nil
		}
	}
	var inf s12Infraction
	var ok bool
	var err error
	if inf.ID, ok, err = field("id"); err != nil || !ok || inf.ID == "" {
		return inf, false, fmt.Errorf("an item without an id (%v)", err)
	}
	if inf.Description, _, err = field("description"); err != nil {
		return inf, false, err
	}
	if inf.Place, _, err = field("place"); err != nil {
		return inf, false, err
	}
	if v, ok, err := field("date"); err != nil {
		return inf, false, err
	} else if ok {
		if inf.Date, err = m.date(v, r.Fields["date"].Layout); err != nil {
			return inf, false, err
		}
	}
	if v, ok, err := field("amount"); err != nil {
		return inf, false, err
	} else if ok {
		dec := r.Decimal
		if f := r.Fields["amount"]; f.Decimal != "" {
			dec = f.Decimal
		}
		if inf.Amount, err = amountOf(v, dec); err != nil {
			return inf, false, fmt.Errorf("amount %q: %w", v, err)
		}
		inf.Currency = m.src.Currency
		if c, ok, _ := field("currency"); ok {
			inf.Currency = c
		}
	}
	if v, ok, err := field("units"); err != nil {
		return inf, false, err
	} else if ok {
		u, err := amountOf(v, r.Decimal)
		if err != nil {
			return inf, false, fmt.Errorf("units %q: %w", v, err)
		}
		inf.Units = u + " " + r.Fields["units"].Code
	}
	inf.StatusRaw, ok, _ = field("status")
	if !ok {
		inf.StatusRaw = set["status_raw"]
	}
	inf.Status = "unknown"
	for text, status := range r.StatusMap {
		if strings.EqualFold(text, inf.StatusRaw) {
			inf.Status = status
		}
	}
	return inf, true, nil
}

// fieldValue reads a field object: a select list joined (with one space
// unless join says otherwise, absent values left out), or a column.
func (m *s12Mapper) fieldValue(item s12Node, f s12Field) (string, bool, error) {
	r := m.src.Response
	if len(f.Column) > 0 {
		return m.column(item, f.Column)
	}
	join := " "
	if f.Join != nil {
		join = *f.Join
	}
	if len(f.Select) == 1 {
		v, ok := value(item, r.Namespaces, f.Select[0])
		return v, ok, nil
	}
	var parts []string
	for _, sel := range f.Select {
		if v, ok := value(item, r.Namespaces, sel); ok && !isNull(v, r.NullValues) {
			parts = append(parts, v)
		}
	}
	return strings.Join(parts, join), len(parts) > 0, nil
}

// column is the cell of an HTML item's row under the header cell named
// by one of names; colspan counts.
func (m *s12Mapper) column(item s12Node, names []string) (string, bool, error) {
	table := item.html
	for table != nil && table.Data != "table" {
		table = table.Parent
	}
	if table == nil {
		return "", false, fmt.Errorf("a column outside a table")
	}
	header := m.src.Response.Header
	cells, _ := css(table, header)
	pos, at := -1, 0
	for _, c := range cells {
		for _, name := range names {
			if headerKey(textOf(c)) == headerKey(name) && pos < 0 {
				pos = at
			}
		}
		at += colspan(c)
	}
	if pos < 0 {
		return "", false, fmt.Errorf("no header names the column %q", names)
	}
	at = 0
	for c := item.html.FirstChild; c != nil; c = c.NextSibling {
		if c.Type != html.ElementNode || c.Data != "td" && c.Data != "th" {
			continue
		}
		if at == pos {
			v := strings.Join(strings.Fields(textOf(c)), " ")
			return v, v != "", nil
		}
		at += colspan(c)
	}
	return "", false, nil
}

func colspan(n *html.Node) int {
	if v, ok := attrOf(n, "colspan"); ok {
		if k, err := strconv.Atoi(v); err == nil && k > 0 {
			return k
		}
	}
	return 1
}

// headerKey is a header text trimmed, without case, accents nor inner
// spacing differences.
func headerKey(s string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(strings.ToLower(s)) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func plateKey(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			return unicode.ToUpper(r)
		}
		return -1
	}, s)
}

func isNull(v string, nulls []string) bool {
	for _, n := range nulls {
		if v == n {
			return true
		}
	}
	return false
}

// date reads v by the TR35 layouts, or else in today's forms, as RFC 3339
// in the source's zone.
func (m *s12Mapper) date(v string, layouts []string) (string, error) {
	loc, err := time.LoadLocation(m.src.TimeZone)
	if err != nil {
		return "", err
	}
	for _, l := range layouts {
		if t, ok := tr35(v, l, loc); ok {
			return t.Format(time.RFC3339), nil
		}
	}
	if len(layouts) > 0 {
		return "", fmt.Errorf("date %q: no layout of %q reads it", v, layouts)
	}
	for _, l := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "02/01/2006 15:04:05", "02/01/2006 15:04", "02/01/2006"} {
		if t, err := time.ParseInLocation(l, v, loc); err == nil {
			return t.Format(time.RFC3339), nil
		}
	}
	return "", fmt.Errorf("date %q: not a form read without a layout", v)
}

var tr35Token = regexp.MustCompile(`'[^']*'|yyyy|MM|dd|HH|mm|ss|.`)

// tr35 reads v by the TR35 pattern layout: yyyy MM dd HH mm ss, quoted
// literals, any other character as itself.
func tr35(v, layout string, loc *time.Location) (time.Time, bool) {
	var re strings.Builder
	var order []string
	re.WriteString("^")
	for _, tok := range tr35Token.FindAllString(layout, -1) {
		switch tok {
		case "yyyy":
			re.WriteString(`(\d{4})`)
		case "MM", "dd", "HH", "mm", "ss":
			re.WriteString(`(\d{2})`)
		default:
			re.WriteString(regexp.QuoteMeta(strings.Trim(tok, "'")))
			continue
		}
		order = append(order, tok)
	}
	re.WriteString("$")
	sub := regexp.MustCompile(re.String()).FindStringSubmatch(v)
	if sub == nil {
		return time.Time{}, false
	}
	n := map[string]int{}
	for i, tok := range order {
		n[tok], _ = strconv.Atoi(sub[i+1])
	}
	return time.Date(n["yyyy"], time.Month(n["MM"]), n["dd"], n["HH"], n["mm"], n["ss"], 0, loc), true
}

var amountText = regexp.MustCompile(`^[^0-9]*?([0-9][0-9., '\x{a0}]*)$`)

// amountOf normalises an amount (or units) written as text, or a JSON
// number, to two decimals, by SPEC 12's rules: with decimal, the other
// separator groups thousands in groups of three; without it, a lone
// separator followed by exactly three digits is ambiguous.
func amountOf(v, decimal string) (string, error) {
	m := amountText.FindStringSubmatch(strings.TrimSpace(v))
	if m == nil {
		return "", fmt.Errorf("not an amount")
	}
	s := strings.NewReplacer(" ", "", "\u00a0", "", "'", "").Replace(m[1])
	if decimal == "" {
		dots, commas := strings.Count(s, "."), strings.Count(s, ",")
		switch {
		case dots+commas == 0:
			decimal = "."
		case dots+commas == 1:
			sep := "."
			if commas == 1 {
				sep = ","
			}
			if _, frac, _ := strings.Cut(s, sep); len(frac) == 3 {
				return "", fmt.Errorf("ambiguous: set decimal")
			}
			decimal = sep
		default:
			return "", fmt.Errorf("several separators: set decimal")
		}
	}
	group := "."
	if decimal == "." {
		group = ","
	}
	whole, frac, _ := strings.Cut(s, decimal)
	groups := strings.Split(whole, group)
	for i, g := range groups {
		if g == "" || i > 0 && len(g) != 3 || strings.ContainsAny(g, ".,") {
			return "", fmt.Errorf("bad grouping")
		}
	}
	if strings.ContainsAny(frac, ".,") {
		return "", fmt.Errorf("bad decimals")
	}
	num := strings.Join(groups, "")
	if frac != "" {
		num += "." + frac
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return "", fmt.Errorf("not a number")
	}
	return r.FloatString(2), nil
}
