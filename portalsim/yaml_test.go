package portalsim_test

import (
	"bytes"
	"encoding/json"
	"math/big"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/multas/aggregator/portalsim"
)

// sourcesConfig is the part of the aggregator config (SPEC 6) that
// AggregatorYAML writes; decoding it with KnownFields rejects any other key.
type sourcesConfig struct {
	Sources []struct {
		ID           string `yaml:"id"`
		Jurisdiction string `yaml:"jurisdiction"`
		BaseURL      string `yaml:"base_url"`
		Operations   map[string]struct {
			Method  string   `yaml:"method"`
			Path    string   `yaml:"path"`
			Accepts []string `yaml:"accepts"`
		} `yaml:"operations"`
		Response struct {
			Decimal   string            `yaml:"decimal"`
			Items     string            `yaml:"items"`
			Fields    map[string]string `yaml:"fields"`
			StatusMap map[string]string `yaml:"status_map"`
		} `yaml:"response"`
	} `yaml:"sources"`
}

func parseSources(t *testing.T, doc string) sourcesConfig {
	t.Helper()
	var c sourcesConfig
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil {
		t.Fatalf("AggregatorYAML is not the expected YAML: %v\n%s", err, doc)
	}
	return c
}

// healthyDemo is the demo set with every portal healthy.
func healthyDemo() []portalsim.Jurisdiction {
	js := portalsim.Demo()
	for i := range js {
		js[i].Fault = portalsim.Fault{}
	}
	return js
}

func TestAggregatorYAMLIsValid(t *testing.T) {
	t.Parallel()
	js := portalsim.Demo()
	urls := make(map[string]string)
	for i, j := range js {
		urls[j.ID] = "http://127.0.0.1:" + strconv.Itoa(9101+i)
	}
	c := parseSources(t, portalsim.AggregatorYAML(js, urls))
	if len(c.Sources) != len(js) {
		t.Fatalf("%d sources, want %d", len(c.Sources), len(js))
	}
	placeholder := regexp.MustCompile(`\{[a-z_]+\}`)
	allowed := map[string][]string{
		"by_domain": {"{domain}"},
		"by_id":     {"{id}", "{id_kind}"},
		"voucher":   {"{infraction_id}"},
	}
	statuses := []string{"unpaid", "paid", "in_process", "unknown"}
	for i, s := range c.Sources {
		j := js[i]
		if s.ID != j.ID || s.Jurisdiction != j.Name || s.BaseURL != urls[j.ID] {
			t.Errorf("source %d = %s %q %s, want %s %q %s", i, s.ID, s.Jurisdiction, s.BaseURL, j.ID, j.Name, urls[j.ID])
		}
		if len(s.Operations) != 3 {
			t.Errorf("%s: operations %v, want by_domain, by_id and voucher", s.ID, s.Operations)
		}
		for op, o := range s.Operations {
			want, ok := allowed[op]
			if !ok {
				t.Errorf("%s: unknown operation %s", s.ID, op)
				continue
			}
			if o.Method != http.MethodGet {
				t.Errorf("%s %s: method %q, want GET", s.ID, op, o.Method)
			}
			if !strings.HasPrefix(o.Path, "/") || !strings.Contains(o.Path, want[0]) {
				t.Errorf("%s %s: path %q lacks %s", s.ID, op, o.Path, want[0])
			}
			for _, ph := range placeholder.FindAllString(o.Path, -1) {
				if !slices.Contains(want, ph) {
					t.Errorf("%s %s: path %q has %s, not a placeholder of %s", s.ID, op, o.Path, ph, op)
				}
			}
			for _, a := range o.Accepts {
				if op != "by_id" || (a != "cuit" && a != "dni") {
					t.Errorf("%s %s: accepts %q", s.ID, op, a)
				}
			}
		}
		if s.Response.Items != "" && !strings.HasPrefix(s.Response.Items, "/") {
			t.Errorf("%s: items %q is not a JSON pointer", s.ID, s.Response.Items)
		}
		if s.Response.Fields["id"] == "" {
			t.Errorf("%s: fields lack id", s.ID)
		}
		for name, ptr := range s.Response.Fields {
			if !strings.HasPrefix(ptr, "/") {
				t.Errorf("%s: field %s pointer %q is not a JSON pointer", s.ID, name, ptr)
			}
		}
		for text, st := range s.Response.StatusMap {
			if !slices.Contains(statuses, st) {
				t.Errorf("%s: status_map %q: %q is not a status", s.ID, text, st)
			}
		}
	}
	if got := portalsim.AggregatorYAML(js, nil); got != "sources: []\n" {
		t.Errorf("AggregatorYAML without base URLs = %q, want an empty list", got)
	}
	if got := parseSources(t, portalsim.AggregatorYAML(js, map[string]string{"pba": "http://x"})); len(got.Sources) != 1 {
		t.Errorf("AggregatorYAML with one base URL has %d sources, want 1", len(got.Sources))
	}
}

// TestAggregatorYAMLMapsEveryPortal reads every demo portal through the
// mapping AggregatorYAML wrote for it, as the aggregator would: templates
// expanded, items and fields by JSON pointer, statuses by status_map
// ignoring case, and checks what comes out against the portal's records.
func TestAggregatorYAMLMapsEveryPortal(t *testing.T) {
	t.Parallel()
	js := healthyDemo()
	s, err := portalsim.Start(js)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c := parseSources(t, portalsim.AggregatorYAML(js, s.URLs()))
	client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	t.Cleanup(client.CloseIdleConnections)

	for i, src := range c.Sources {
		j := js[i]
		t.Run(src.ID, func(t *testing.T) {
			t.Parallel()
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
				o := src.Operations[q.op]
				kind := idKind(q.value)
				if q.op == "by_id" && len(o.Accepts) > 0 && !slices.Contains(o.Accepts, kind) {
					continue // the aggregator leaves this source out of the query
				}
				path := strings.NewReplacer("{domain}", url.PathEscape(q.value), "{id}", url.PathEscape(q.value), "{id_kind}", kind).Replace(o.Path)
				got, err := get(t.Context(), client, src.BaseURL+path)
				if err != nil {
					t.Fatalf("%s %s: %v", q.op, path, err)
				}
				var items []any
				switch got.status {
				case http.StatusNotFound: // no records
				case http.StatusOK:
					items = itemsOf(t, got.body, src.Response.Items)
				default:
					t.Fatalf("%s: status %d: %s", path, got.status, got.body)
				}
				want := recordsFor(j, q.op, q.value)
				if len(items) != len(want) {
					t.Errorf("%s: %d items, want %d", path, len(items), len(want))
					continue
				}
				for k, item := range items {
					checkItem(t, src.Response.Fields, src.Response.StatusMap, item, want[k])
					found++
				}
			}
			if found == 0 {
				t.Errorf("no record of %s was read through its mapping", src.ID)
			}
			for _, r := range j.Records {
				path := strings.ReplaceAll(src.Operations["voucher"].Path, "{infraction_id}", url.PathEscape(r.ID))
				got, err := get(t.Context(), client, src.BaseURL+path)
				if err != nil || got.status != 200 || got.header.Get("Content-Type") != "application/pdf" || !bytes.HasPrefix(got.body, []byte("%PDF-")) {
					t.Errorf("voucher %s: %d %q, %v; want a PDF", path, got.status, got.header.Get("Content-Type"), err)
				}
			}
		})
	}
}

func digitsOf(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, s)
}

func idKind(id string) string {
	if len(id) == 11 {
		return "cuit"
	}
	return "dni"
}

// recordsFor lists the records of j a lookup should find, in order.
func recordsFor(j portalsim.Jurisdiction, op, value string) []portalsim.Record {
	var rs []portalsim.Record
	for _, r := range j.Records {
		if op == "by_domain" && r.Domain == value || op == "by_id" && (digitsOf(r.CUIT) == value || r.DNI == value) {
			rs = append(rs, r)
		}
	}
	return rs
}

func itemsOf(t *testing.T, body []byte, items string) []any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("answer is not JSON: %v", err)
	}
	v, ok := pointer(doc, items)
	list, isList := v.([]any)
	if !ok || !isList {
		t.Fatalf("items pointer %q does not reach a list in %s", items, body)
	}
	return list
}

// pointer resolves an RFC 6901 JSON pointer.
func pointer(doc any, ptr string) (any, bool) {
	if ptr == "" {
		return doc, true
	}
	if !strings.HasPrefix(ptr, "/") {
		return nil, false
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := doc.(type) {
		case map[string]any:
			var ok bool
			if doc, ok = v[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) {
				return nil, false
			}
			doc = v[i]
		default:
			return nil, false
		}
	}
	return doc, true
}

func checkItem(t *testing.T, fields, statusMap map[string]string, item any, want portalsim.Record) {
	t.Helper()
	text := func(name string) (string, bool) {
		ptr, ok := fields[name]
		if !ok {
			return "", false
		}
		v, ok := pointer(item, ptr)
		if !ok {
			t.Errorf("record %s: field %s (%s) is missing", want.ID, name, ptr)
			return "", false
		}
		switch v := v.(type) {
		case string:
			return v, true
		case json.Number:
			return v.String(), true
		}
		t.Errorf("record %s: field %s is %T", want.ID, name, v)
		return "", false
	}
	if id, _ := text("id"); id != want.ID {
		t.Errorf("id = %q, want %q", id, want.ID)
	}
	if amount, ok := text("amount"); ok {
		got, ok1 := new(big.Rat).SetString(amount)
		exp, ok2 := new(big.Rat).SetString(want.Amount)
		if !ok1 || !ok2 || got.Cmp(exp) != 0 {
			t.Errorf("record %s: amount %q, want %s", want.ID, amount, want.Amount)
		}
	}
	if date, ok := text("date"); ok {
		wantTime, _ := time.ParseInLocation("2006-01-02T15:04:05", want.Date, time.FixedZone("", -3*3600))
		if !sameDate(date, wantTime) {
			t.Errorf("record %s: date %q, want %s", want.ID, date, wantTime.Format(time.RFC3339))
		}
	}
	if cur, ok := text("currency"); ok && want.Currency != "" && cur != want.Currency {
		t.Errorf("record %s: currency %q, want %q", want.ID, cur, want.Currency)
	}
	if raw, ok := text("status"); ok {
		got := "unknown"
		for k, v := range statusMap {
			if strings.EqualFold(k, raw) {
				got = v
			}
		}
		wantStatus := want.Status
		if !slices.Contains([]string{"unpaid", "paid", "in_process"}, wantStatus) {
			wantStatus = "unknown"
		}
		if got != wantStatus {
			t.Errorf("record %s: status %q maps to %s, want %s", want.ID, raw, got, wantStatus)
		}
	}
}

// sameDate reports whether a portal's date s (with an offset, zone-less in
// Argentine time, or a dd/mm/yyyy day) is want.
func sameDate(s string, want time.Time) bool {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.Equal(want)
	}
	if t, err := time.ParseInLocation("2006-01-02T15:04:05", s, want.Location()); err == nil {
		return t.Equal(want)
	}
	if t, err := time.ParseInLocation("02/01/2006", s, want.Location()); err == nil {
		y, m, d := t.Date()
		wy, wm, wd := want.Date()
		return y == wy && m == wm && d == wd
	}
	return false
}
