package portalsim

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// realSource is a source's entry in SPEC 12's keys, as the shapes of SPEC
// 12 need it: SPEC 6 and 8's keys (operations with query, headers and
// body; format, charset, namespaces, not_found, unavailable, status_map;
// auth.oauth2) and SPEC 12's (decimal, null_values, unwrap, item lists
// with format and set, match, header, field objects, errors rules,
// oauth2.client_auth). Empty members are left out.
type realSource struct {
	ID           string            `yaml:"id"`
	Jurisdiction string            `yaml:"jurisdiction"`
	BaseURL      string            `yaml:"base_url"`
	TimeZone     string            `yaml:"time_zone,omitempty"`
	Currency     string            `yaml:"currency,omitempty"`
	Headers      map[string]string `yaml:"headers,omitempty"`
	Operations   realOperations    `yaml:"operations"`
	Response     realResponse      `yaml:"response"`
	Auth         *realAuth         `yaml:"auth,omitempty"`
}

type realOperations struct {
	ByDomain realOperation `yaml:"by_domain"`
	ByID     realOperation `yaml:"by_id"`
	Voucher  realOperation `yaml:"voucher"`
}

type realOperation struct {
	Method  string            `yaml:"method"`
	Path    string            `yaml:"path"`
	Query   map[string]string `yaml:"query,omitempty"`
	Headers map[string]string `yaml:"headers,omitempty"`
	Body    *realBody         `yaml:"body,omitempty"`
	Accepts []string          `yaml:"accepts,omitempty"`
}

type realBody struct {
	Text        string `yaml:"text"`
	ContentType string `yaml:"content_type"`
}

type realResponse struct {
	Format      string            `yaml:"format"`
	Charset     string            `yaml:"charset,omitempty"`
	Namespaces  map[string]string `yaml:"namespaces,omitempty"`
	Decimal     string            `yaml:"decimal,omitempty"`
	NullValues  []string          `yaml:"null_values,omitempty"`
	Unwrap      []realUnwrap      `yaml:"unwrap,omitempty"`
	Items       any               `yaml:"items"` // a selector, or []realItems
	Match       *realMatch        `yaml:"match,omitempty"`
	Header      string            `yaml:"header,omitempty"`
	Fields      realFields        `yaml:"fields"`
	NotFound    string            `yaml:"not_found,omitempty"`
	Unavailable string            `yaml:"unavailable,omitempty"`
	Errors      []realRule        `yaml:"errors,omitempty"`
	StatusMap   map[string]string `yaml:"status_map"`
}

type realUnwrap struct {
	Select string `yaml:"select"`
	Format string `yaml:"format"`
}

// realItems is one entry of a list of item selectors.
type realItems struct {
	Select string            `yaml:"select"`
	Format string            `yaml:"format,omitempty"`
	Set    map[string]string `yaml:"set,omitempty"`
}

type realMatch struct {
	Select string `yaml:"select"`
	Equals string `yaml:"equals"`
}

// realFields are the fields in the order people read them; each is a
// selector string or a realField.
type realFields struct {
	ID          any `yaml:"id"`
	Date        any `yaml:"date,omitempty"`
	Description any `yaml:"description,omitempty"`
	Place       any `yaml:"place,omitempty"`
	Amount      any `yaml:"amount,omitempty"`
	Currency    any `yaml:"currency,omitempty"`
	Status      any `yaml:"status,omitempty"`
	Units       any `yaml:"units,omitempty"`
}

// realField is a field object: exactly one of Select (a selector or a
// list of them) and Column (a header text or a list of alternatives).
type realField struct {
	Select  any      `yaml:"select,omitempty"`
	Column  any      `yaml:"column,omitempty"`
	Join    string   `yaml:"join,omitempty"`
	Layout  []string `yaml:"layout,omitempty"`
	Decimal string   `yaml:"decimal,omitempty"`
	Code    string   `yaml:"code,omitempty"`
}

// realRule is one errors rule; When is a selector or a realCond.
type realRule struct {
	Status     []int  `yaml:"status,omitempty"`
	When       any    `yaml:"when"`
	Outcome    string `yaml:"outcome"`
	Detail     string `yaml:"detail,omitempty"`
	RetryAfter string `yaml:"retry_after,omitempty"`
}

// realCond is a when that compares: Equals is a JSON scalar as it is (a
// string, true), Contains text.
type realCond struct {
	Select   string `yaml:"select"`
	Equals   any    `yaml:"equals,omitempty"`
	Contains string `yaml:"contains,omitempty"`
}

type realAuth struct {
	OAuth2 realOAuth2 `yaml:"oauth2"`
}

type realOAuth2 struct {
	TokenURL     string   `yaml:"token_url"`
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret"`
	Scopes       []string `yaml:"scopes,omitempty"`
	ClientAuth   string   `yaml:"client_auth,omitempty"`
}

// The errors rules the HTML shapes share: a captcha challenge is a
// refusal, a "too many queries" page a rate limit.
func captchaRule() realRule { return realRule{When: "div.g-recaptcha", Outcome: "rejected"} }

func busyRule(text string, after string) realRule {
	return realRule{When: realCond{Select: "h1", Contains: text}, Outcome: "rate_limited", RetryAfter: after}
}

// getOperations are the three operations of a GET portal from its
// dialect's templates: path, and query parameters.
func getOperations(d *dialect) realOperations {
	accepts := []string(nil)
	if d.cuitOnly {
		accepts = []string{"cuit"}
	}
	ops := realOperations{ByDomain: getOperation(d.byDomain), ByID: getOperation(d.byID), Voucher: getOperation(d.voucher)}
	ops.ByID.Accepts = accepts
	return ops
}

func getOperation(template string) realOperation {
	path, rawQuery, _ := strings.Cut(template, "?")
	op := realOperation{Method: "GET", Path: path}
	for _, pair := range strings.Split(rawQuery, "&") {
		if k, v, ok := strings.Cut(pair, "="); ok {
			if op.Query == nil {
				op.Query = make(map[string]string)
			}
			op.Query[k] = v
		}
	}
	return op
}

// statusMap is the status_map of d, in the portal's own spelling.
func statusMap(d *dialect) map[string]string {
	m := make(map[string]string, len(d.statusText))
	for status, text := range d.statusText {
		m[text] = status
	}
	return m
}

// newRealSource is the start of every SPEC 12 entry: who, where (the
// portal's time zone and currency), and its operations when they are GETs.
func newRealSource(d *dialect, j Jurisdiction, base string) realSource {
	return realSource{ID: j.ID, Jurisdiction: j.Name, BaseURL: base,
		TimeZone: d.locale.TimeZone, Currency: d.locale.Currency, Operations: getOperations(d)}
}

// unitsField is the units field of d's locale at sel.
func unitsField(d *dialect, sel string) realField {
	return realField{Select: sel, Code: d.locale.Units}
}

// realYAML writes src as one entry of the `sources:` list: block style,
// with the mappings and lists that fit on a line written in flow style.
func realYAML(src realSource) string {
	var n yaml.Node
	if err := n.Encode(src); err != nil {
		// realSource holds strings, lists and maps only.
		panic("portalsim: " + err.Error())
	}
	flowSmall(&n)
	var b strings.Builder
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		panic("portalsim: " + err.Error())
	}
	enc.Close()
	var out strings.Builder
	for i, line := range strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n") {
		if i == 0 {
			out.WriteString("  - " + line + "\n")
		} else {
			out.WriteString("    " + line + "\n")
		}
	}
	return out.String()
}

// flowLine is the longest flow collection flowSmall writes on one line.
const flowLine = 100

// flowSmall gives the flow style to every mapping and list of n whose
// members are scalars or flow collections and that fits in flowLine
// characters; it reports that length, or -1 when n stays in block style.
func flowSmall(n *yaml.Node) int {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			flowSmall(c)
		}
		return -1
	case yaml.ScalarNode:
		switch {
		case n.Tag != "!!str":
		case strings.Contains(n.Value, "'") && !strings.ContainsAny(n.Value, "\"\\"):
			n.Style = yaml.DoubleQuotedStyle // "dd/MM/yyyy 'AS' HH:mm", not 'dd/MM/yyyy ''AS'' HH:mm'
		case n.Value == "." || n.Value == "," || n.Value == "-":
			n.Style = yaml.DoubleQuotedStyle // decimal: ".", null_values: ["-"]
		}
		return len(n.Value) + 3 // quotes, separator
	case yaml.MappingNode, yaml.SequenceNode:
		total, block := 2, false
		for _, c := range n.Content {
			l := flowSmall(c)
			if l < 0 {
				block = true
			}
			total += l + 1
		}
		if block || total > flowLine {
			return -1
		}
		n.Style = yaml.FlowStyle
		return total
	}
	return -1
}
