package portalsim_test

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/multas/aggregator/portalsim"
)

// spec12Keys are the keys SPEC.md names (sections 6, 8 and 12) in each
// place of a source's entry that AggregatorYAML writes; the maps whose keys
// are the portal's (headers, query, namespaces, status_map, form) are not
// listed. A place marked "" is a mapping that AggregatorYAML may not write.
var spec12Keys = map[string][]string{
	"source": {"id", "type", "jurisdiction", "base_url", "breaker_key", "headers", "operations", "response",
		"pagination", "auth", "tls", "timeout", "time_zone", "currency", "max_response_bytes", "retry", "breaker", "rate_limit"},
	"operations": {"by_domain", "by_id", "voucher"},
	"operation":  {"method", "path", "query", "headers", "body", "accepts"},
	"body":       {"form", "json", "text", "content_type"},
	"response": {"format", "charset", "namespaces", "decimal", "null_values", "unwrap", "items", "match", "header",
		"fields", "not_found", "unavailable", "errors", "status_map"},
	"unwrap": {"select", "format"},
	"items":  {"select", "format", "set"},
	"set":    {"id", "date", "description", "place", "amount", "currency", "status_raw", "units"},
	"match":  {"select", "column", "equals"},
	"fields": {"id", "date", "description", "place", "amount", "currency", "status", "units"},
	"field":  {"select", "column", "join", "layout", "decimal", "code"},
	"errors": {"status", "when", "outcome", "detail", "retry_after"},
	"when":   {"select", "equals", "contains", "matches"},
	"auth":   {"oauth2", "session"},
	"oauth2": {"token_url", "client_id", "client_secret", "scopes", "client_auth"},
}

// spec12Values are the values SPEC.md allows for some keys.
var spec12Values = map[string][]string{
	"format":      {"json", "xml", "html"},
	"decimal":     {",", "."},
	"outcome":     {"rejected", "unavailable", "not_found", "error", "rate_limited"},
	"client_auth": {"basic", "body"},
	"method":      {"GET", "POST"},
}

// realJurisdictions is one portal of each shape of SPEC 12 serving
// RealRecords.
func realJurisdictions() []portalsim.Jurisdiction {
	var js []portalsim.Jurisdiction
	for _, s := range portalsim.RealShapes() {
		js = append(js, portalsim.NewJurisdiction(s, "p-"+string(s), "Portal "+string(s), portalsim.RealRecords()))
	}
	return js
}

// keyChecker walks a source's YAML, reporting keys SPEC 12 does not name.
type keyChecker struct {
	t      *testing.T
	source string
}

func (c keyChecker) mapping(n *yaml.Node, place, path string) {
	c.t.Helper()
	if n.Kind != yaml.MappingNode {
		c.t.Errorf("%s: %s is not a mapping", c.source, path)
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i].Value, n.Content[i+1]
		at := path + "." + k
		if !slices.Contains(spec12Keys[place], k) {
			c.t.Errorf("%s: %s is not a key SPEC 12 names in %s", c.source, at, place)
			continue
		}
		if allowed, ok := spec12Values[k]; ok && v.Kind == yaml.ScalarNode && !slices.Contains(allowed, v.Value) {
			c.t.Errorf("%s: %s = %q, want one of %q", c.source, at, v.Value, allowed)
		}
		c.child(place, k, v, at)
	}
}

// child checks the value of key k of a mapping at place.
func (c keyChecker) child(place, k string, v *yaml.Node, at string) {
	c.t.Helper()
	each := func(sub string) {
		if v.Kind == yaml.SequenceNode {
			for i, e := range v.Content {
				if e.Kind == yaml.MappingNode {
					c.mapping(e, sub, fmt.Sprintf("%s[%d]", at, i))
				}
			}
		}
	}
	switch place + "." + k {
	case "source.operations":
		c.mapping(v, "operations", at)
	case "operations.by_domain", "operations.by_id", "operations.voucher":
		c.mapping(v, "operation", at)
	case "operation.body":
		c.mapping(v, "body", at)
	case "source.response":
		c.mapping(v, "response", at)
	case "source.auth":
		c.mapping(v, "auth", at)
	case "auth.oauth2":
		c.mapping(v, "oauth2", at)
	case "response.unwrap":
		each("unwrap")
	case "response.items":
		each("items")
	case "items.set":
		c.mapping(v, "set", at)
	case "response.match":
		c.mapping(v, "match", at)
		c.oneOf(v, at)
	case "response.fields":
		c.mapping(v, "fields", at)
		for i := 0; i+1 < len(v.Content); i += 2 {
			f := v.Content[i+1]
			if f.Kind != yaml.MappingNode {
				continue
			}
			fat := at + "." + v.Content[i].Value
			c.mapping(f, "field", fat)
			c.oneOf(f, fat)
			if code := mapValue(f, "code"); (code != "") != (v.Content[i].Value == "units") {
				c.t.Errorf("%s: %s: code %q goes with units, and units with a code", c.source, fat, code)
			}
		}
	case "response.errors":
		each("errors")
	case "errors.when":
		if v.Kind == yaml.MappingNode {
			c.mapping(v, "when", at)
		}
	}
}

// oneOf checks that a field object has exactly one of select and column.
func (c keyChecker) oneOf(n *yaml.Node, at string) {
	c.t.Helper()
	if (mapValue(n, "select") != "") == (mapValue(n, "column") != "") {
		c.t.Errorf("%s: %s has not exactly one of select and column", c.source, at)
	}
}

// mapValue is the value of key k of mapping n, written as YAML.
func mapValue(n *yaml.Node, k string) string {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == k {
			b, _ := yaml.Marshal(n.Content[i+1])
			return strings.TrimSpace(string(b))
		}
	}
	return ""
}

func TestRealYAMLUsesSPEC12Keys(t *testing.T) {
	t.Parallel()
	js := realJurisdictions()
	urls := map[string]string{}
	for i, j := range js {
		urls[j.ID] = fmt.Sprintf("http://127.0.0.1:%d", 9200+i)
	}
	doc := portalsim.AggregatorYAML(js, urls)
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &root); err != nil {
		t.Fatalf("not YAML: %v\n%s", err, doc)
	}
	sources := root.Content[0].Content[1]
	if root.Content[0].Content[0].Value != "sources" || len(sources.Content) != len(js) {
		t.Fatalf("want sources: with %d entries:\n%s", len(js), doc)
	}
	c := parseS12(t, doc)
	for i, n := range sources.Content {
		j, src := js[i], c.Sources[i]
		keyChecker{t, j.ID}.mapping(n, "source", j.ID)
		l := j.Shape.Locale()
		if src.ID != j.ID || src.BaseURL != urls[j.ID] || src.TimeZone != l.TimeZone || src.Currency != l.Currency || l.TimeZone == "" {
			t.Errorf("%s: id %s, base_url %s, time_zone %q, currency %q; want the shape's locale %+v", j.ID, src.ID, src.BaseURL, src.TimeZone, src.Currency, l)
		}
		if _, err := time.LoadLocation(src.TimeZone); err != nil {
			t.Errorf("%s: time_zone %q: %v", j.ID, src.TimeZone, err)
		}
		r := src.Response
		// SPEC 12: an html source says how its no-results page looks.
		if r.Format == "html" || slices.ContainsFunc(r.Unwrap, func(u struct {
			Select string `yaml:"select"`
			Format string `yaml:"format"`
		}) bool {
			return u.Format == "html"
		}) {
			if r.NotFound == "" && !slices.ContainsFunc(r.Errors, func(e s12Rule) bool { return e.Outcome == "not_found" }) {
				t.Errorf("%s: an html source without a no-results marker", j.ID)
			}
		}
		if u := r.Fields["units"]; (u.Code != "") != (l.Units != "") || u.Code != l.Units {
			t.Errorf("%s: units code %q, want the locale's %q", j.ID, u.Code, l.Units)
		}
		if _, ok := r.Fields["amount"]; ok == l.UnitsOnly {
			t.Errorf("%s: amount mapped %v, units only %v", j.ID, ok, l.UnitsOnly)
		}
		for text, status := range r.StatusMap {
			if !slices.Contains([]string{"unpaid", "paid", "in_process"}, status) {
				t.Errorf("%s: status_map %q: %q", j.ID, text, status)
			}
		}
	}
	// The shapes of SPEC 6 and 8 keep their own keys (decimal aside: their
	// amounts written as text with a lone "." need it since SPEC 12).
	old := portalsim.AggregatorYAML(append(portalsim.Demo(), portalsim.DialectDemo()...), map[string]string{"caba": "http://x", "neuquen": "http://y"})
	for _, k := range []string{"errors:", "unwrap:", "time_zone:"} {
		if strings.Contains(old, k) {
			t.Errorf("a SPEC 6 or 8 source gained %s:\n%s", k, old)
		}
	}
}

// wantInfractions is what the aggregator must answer from a portal of shape
// s for recs: each Record's values normalised, with the shape's locale.
func wantInfractions(t *testing.T, s portalsim.Shape, recs []portalsim.Record) []s12Infraction {
	t.Helper()
	l := s.Locale()
	loc, err := time.LoadLocation(l.TimeZone)
	if err != nil {
		t.Fatal(err)
	}
	var out []s12Infraction
	for _, r := range recs {
		date, _ := time.ParseInLocation("2006-01-02T15:04:05", r.Date, loc)
		inf := s12Infraction{ID: r.ID, Date: date.Format(time.RFC3339), Description: r.Description, Place: r.Place, Status: r.Status}
		if r.Amount != "" && !l.UnitsOnly {
			inf.Amount, inf.Currency = twoDecimals(t, r.Amount), l.Currency
		}
		if r.Units != "" && l.Units != "" {
			inf.Units = twoDecimals(t, r.Units) + " " + l.Units
		}
		out = append(out, inf)
	}
	return out
}

func twoDecimals(t *testing.T, d string) string {
	t.Helper()
	v, ok := new(big.Rat).SetString(d)
	if !ok {
		t.Fatalf("%q is not a decimal", d)
	}
	return v.FloatString(2)
}

// normalised drops what a shape may word its own way (status_raw) and
// sorts by id.
func normalised(infs []s12Infraction) []s12Infraction {
	out := slices.Clone(infs)
	for i := range out {
		out[i].StatusRaw = ""
	}
	slices.SortFunc(out, func(a, b s12Infraction) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// TestRealShapesMapAlike serves RealRecords in every shape of SPEC 12 and
// reads each portal through the mapping AggregatorYAML wrote for it: the
// same infractions come out of each, with its locale's zone, currency and
// units, by plate (the other plate's actas dropped by match), by CUIT and
// by DNI; a clean plate has none.
func TestRealShapesMapAlike(t *testing.T) {
	t.Parallel()
	js := realJurisdictions()
	sim, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	c := parseS12(t, portalsim.AggregatorYAML(js, sim.URLs()))
	var plate []portalsim.Record
	for _, r := range portalsim.RealRecords() {
		if r.Domain == portalsim.DemoPlate {
			plate = append(plate, r)
		}
	}
	for i, src := range c.Sources {
		s := js[i].Shape
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			m := newS12Mapper(t, src)
			tests := []struct {
				op, subject string
				want        []portalsim.Record
			}{
				{"by_domain", portalsim.DemoPlate, plate},
				{"by_domain", portalsim.DemoPlateClean, nil},
				{"by_id", digitsOf(portalsim.DemoCUIT), portalsim.RealRecords()},
				{"by_id", portalsim.DemoDNI, portalsim.RealRecords()},
				{"by_id", digitsOf(portalsim.DemoCUITClean), nil},
			}
			for _, tt := range tests {
				if accepts := src.Operations["by_id"].Accepts; tt.op == "by_id" && len(accepts) > 0 && !slices.Contains(accepts, idKind(tt.subject)) {
					continue
				}
				got := m.lookup(tt.op, tt.subject)
				if got.kind != "ok" {
					t.Errorf("%s %s: %s (%s), want ok", tt.op, tt.subject, got.kind, got.detail)
					continue
				}
				want := wantInfractions(t, s, tt.want)
				if g, w := normalised(got.infractions), normalised(want); !slices.Equal(g, w) {
					t.Errorf("%s %s maps to\n%+v\nwant\n%+v", tt.op, tt.subject, g, w)
				}
				for _, inf := range got.infractions {
					if inf.StatusRaw == "" {
						t.Errorf("%s %s: %s has no status_raw", tt.op, tt.subject, inf.ID)
					}
				}
			}
		})
	}
}

// TestRealShapeFaults puts each SPEC 12 portal in each fault mode and reads
// its answer through its mapping: maintenance pages are unavailable,
// captcha challenges (a 200 page, a 200 {"error": true}, a 500 with code
// 999) are refusals, too-many-queries pages are rate limits, broken
// bodies are unreadable, while a plain 500 stays an outage.
func TestRealShapeFaults(t *testing.T) {
	t.Parallel()
	type want struct {
		kind, detail, retryAfter string
	}
	detail := map[portalsim.Shape]map[portalsim.Mode]want{
		portalsim.ShapeDataJSON:  {portalsim.Busy: {"rate_limited", "", "60s"}},
		portalsim.ShapeColumns:   {portalsim.Busy: {"rate_limited", "", "60s"}},
		portalsim.ShapeDetran:    {portalsim.Busy: {"rate_limited", "", "120s"}},
		portalsim.ShapeNested:    {portalsim.Captcha: {"rejected", "missing captcha", ""}},
		portalsim.ShapeErrorFlag: {portalsim.Captcha: {"rejected", "Debe completar el captcha", ""}},
		portalsim.ShapeEnvelope:  {portalsim.Maintenance: {"unavailable", "Sistema en mantenimiento. Intente nuevamente más tarde.", ""}},
	}
	faults := []struct {
		name  string
		fault portalsim.Fault
		want  want
	}{
		{"healthy", portalsim.Fault{}, want{kind: "ok"}},
		{"maintenance", portalsim.Fault{Mode: portalsim.Maintenance}, want{kind: "unavailable"}},
		{"captcha", portalsim.Fault{Mode: portalsim.Captcha}, want{kind: "rejected"}},
		{"busy", portalsim.Fault{Mode: portalsim.Busy}, want{kind: "rate_limited"}},
		{"error", portalsim.Fault{Mode: portalsim.Error}, want{kind: "error"}},
		{"flaky", portalsim.Fault{Mode: portalsim.Flaky, FailRate: 1}, want{kind: "unavailable"}},
		{"throttle", portalsim.Fault{Mode: portalsim.Throttle, RetryAfter: time.Second}, want{kind: "rate_limited"}},
		{"forced 500", portalsim.Fault{Status: 500}, want{kind: "unavailable"}},
	}
	for _, s := range portalsim.RealShapes() {
		t.Run(string(s), func(t *testing.T) {
			t.Parallel()
			p, base, _ := startPortal(t, portalsim.NewJurisdiction(s, "p", "Portal", portalsim.RealRecords()))
			src := parseS12(t, portalsim.AggregatorYAML([]portalsim.Jurisdiction{p.Jurisdiction()}, map[string]string{"p": base})).Sources[0]
			m := newS12Mapper(t, src) // the token first, while healthy
			for _, f := range faults {
				if err := p.SetFault(f.fault); err != nil {
					t.Fatal(err)
				}
				w := f.want
				if d, ok := detail[s][f.fault.Mode]; ok {
					w = d
				}
				got := m.lookup("by_domain", portalsim.DemoPlate)
				if got.kind != w.kind || w.detail != "" && got.detail != w.detail || got.retryAfter != w.retryAfter {
					t.Errorf("%s: %s (detail %q, retry_after %q), want %s (%q, %q)", f.name, got.kind, got.detail, got.retryAfter, w.kind, w.detail, w.retryAfter)
				}
				if got.kind == "ok" && len(got.infractions) == 0 {
					t.Errorf("%s: no infractions", f.name)
				}
			}
		})
	}
}

// TestRealMappingsNeedTheirKeys takes one SPEC 12 key out of a shape's
// mapping at a time and reads the portal again: each key is what keeps the
// answer from being wrong, or unread, which is why SPEC 12 has it.
func TestRealMappingsNeedTheirKeys(t *testing.T) {
	t.Parallel()
	js := realJurisdictions()
	urls := map[string]string{}
	for _, j := range js {
		urls[j.ID] = "http://127.0.0.1:1" // each subtest serves its own portal
	}
	tests := []struct {
		name   string
		shape  portalsim.Shape
		fault  portalsim.Mode
		change func(*s12Response)
		// want: the outcome, and for "ok" how many infractions and how
		// many of them have a known status.
		kind         string
		count, known int
	}{
		{"datajson as mapped", portalsim.ShapeDataJSON, "", func(*s12Response) {}, "ok", 4, 4},
		{"datajson without decimal: $ 185.000 is ambiguous", portalsim.ShapeDataJSON, "", func(r *s12Response) { r.Decimal = "" }, "error", 0, 0},
		{"datajson without layout: 'AS' is no date form", portalsim.ShapeDataJSON, "", func(r *s12Response) {
			f := r.Fields["date"]
			f.Layout = nil
			r.Fields["date"] = f
		}, "error", 0, 0},
		{"datajson's captcha page without its rule", portalsim.ShapeDataJSON, portalsim.Captcha, func(r *s12Response) { r.Errors = nil }, "error", 0, 0},
		{"nested by a pointer into the first object", portalsim.ShapeNested, "", func(r *s12Response) {
			r.Items = s12Items{{Select: "/data/contribuyentes/0/objetos/0/obligaciones"}}
		}, "ok", 2, 2},
		{"nested's 500 without its rule", portalsim.ShapeNested, portalsim.Captcha, func(r *s12Response) { r.Errors = nil }, "unavailable", 0, 0},
		{"arrays without set", portalsim.ShapeArrays, "", func(r *s12Response) {
			for i := range r.Items {
				r.Items[i].Set = nil
			}
		}, "ok", 4, 0},
		{"columns read by the meta's charset", portalsim.ShapeColumns, "", func(r *s12Response) { r.Charset = "" }, "error", 0, 0},
		{"columns without the second issuer's spelling", portalsim.ShapeColumns, "", func(r *s12Response) {
			r.Fields["place"] = s12Field{Column: strList{"Lugar"}}
		}, "error", 0, 0},
		{"detran without null_values", portalsim.ShapeDetran, "", func(r *s12Response) { r.NullValues = nil }, "error", 0, 0},
		{"soapjson without unwrap", portalsim.ShapeSOAPJSON, "", func(r *s12Response) { r.Unwrap = nil }, "ok", 0, 0},
		{"errorflag without match", portalsim.ShapeErrorFlag, "", func(r *s12Response) { r.Match = nil }, "ok", 5, 5},
		{"errorflag's captcha without its rule", portalsim.ShapeErrorFlag, portalsim.Captcha, func(r *s12Response) { r.Errors = nil }, "ok", 0, 0},
		{"envelope without null_values: S/D is no amount", portalsim.ShapeEnvelope, "", func(r *s12Response) { r.NullValues = nil }, "error", 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := parseS12(t, portalsim.AggregatorYAML(js, urls)).Sources[slices.IndexFunc(js, func(j portalsim.Jurisdiction) bool { return j.Shape == tt.shape })]
			tt.change(&src.Response)
			p, base, _ := startPortal(t, portalsim.NewJurisdiction(tt.shape, "p", "Portal", portalsim.RealRecords()))
			src.BaseURL = base
			if err := p.SetFault(portalsim.Fault{Mode: tt.fault}); err != nil {
				t.Fatal(err)
			}
			got := newS12Mapper(t, src).lookup("by_domain", portalsim.DemoPlate)
			known := 0
			for _, inf := range got.infractions {
				if inf.Status != "unknown" {
					known++
				}
			}
			if got.kind != tt.kind || len(got.infractions) != tt.count || known != tt.known {
				t.Errorf("%s with %d infractions, %d of known status (%s); want %s with %d, %d", got.kind, len(got.infractions), known, got.detail, tt.kind, tt.count, tt.known)
			}
		})
	}
}
