package client_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/client"
	"github.com/multas/aggregator/internal/apitest"
	"github.com/multas/aggregator/portalsim"
	"github.com/multas/aggregator/problem"
)

// TestTypesMatchOpenAPI walks the schemas of api/openapi.yaml alongside the
// Go types the client speaks them with: every property must be a JSON
// field of the type and every field a property, recursively; a required
// property must never be omitted; the JSON kinds must agree. It fails when
// either side changes without the other.
func TestTypesMatchOpenAPI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		schema string
		typ    reflect.Type
	}{
		{"Result", reflect.TypeFor[aggregator.Result]()}, // QueryEcho, Summary, Infraction, SourceEntry, Problem, InvalidParam
		{"NoSourceAvailableProblem", reflect.TypeFor[client.Unavailable]()},
		{"Problem", reflect.TypeFor[problem.Problem]()},
		{"AsyncQueryRequest", reflect.TypeFor[client.AsyncRequest]()},
		{"AsyncQuery", reflect.TypeFor[client.AsyncQuery]()},
		{"WebhookEvent", reflect.TypeFor[client.WebhookEvent]()},
		{"SourceEvent", reflect.TypeFor[aggregator.SourceEvent]()},
		{"SummaryEvent", reflect.TypeFor[aggregator.SummaryEvent]()},
		{"WatchRequest", reflect.TypeFor[client.WatchRequest]()},
		{"Watch", reflect.TypeFor[client.Watch]()}, // WatchSubject, WatchSource
		{"WatchList", reflect.TypeFor[client.WatchList]()},
		{"WatchEvent", reflect.TypeFor[client.WatchEvent]()}, // WatchEventData, WatchChanges, InfractionChange
	}
	for _, tt := range tests {
		t.Run(tt.schema, func(t *testing.T) {
			t.Parallel()
			compare(t, tt.schema, schema(t, tt.schema), tt.typ)
		})
	}
}

// TestEnumsMatchOpenAPI checks that the Go constants of each enumeration
// are exactly the values the contract lists.
func TestEnumsMatchOpenAPI(t *testing.T) {
	t.Parallel()
	var slugs []string
	for _, k := range problem.Catalogue {
		slugs = append(slugs, string(k.Slug))
	}
	tests := []struct {
		name   string
		schema func(t testing.TB) *openapi3.Schema
		values []string
	}{
		{"problem slugs", func(t testing.TB) *openapi3.Schema { return schema(t, "ProblemSlug") }, slugs},
		{"infraction status", prop("Infraction", "status"), strs(aggregator.Unpaid, aggregator.Paid, aggregator.InProcess, aggregator.Unknown)},
		{"source entry status", prop("SourceEntry", "status"), strs(aggregator.EntrySucceeded, aggregator.EntryFailed, aggregator.EntrySkipped)},
		{"operation", func(t testing.TB) *openapi3.Schema { return schema(t, "Operation") }, strs(aggregator.Operations...)},
		{"async query status", prop("AsyncQuery", "status"), strs(client.QueryPending, client.QueryCompleted, client.QueryExpired)},
		{"webhook event type", prop("WebhookEvent", "type"), strs(client.EventQueryCompleted, client.EventQueryExpired)},
		{"watch event type", prop("WatchEvent", "type"), strs(client.EventInfractionsChanged)},
	}
	for _, tt := range tests {
		var enum []string
		for _, v := range tt.schema(t).Enum {
			s, _ := v.(string)
			enum = append(enum, s)
		}
		slices.Sort(enum)
		got := slices.Sorted(slices.Values(tt.values))
		if !slices.Equal(enum, got) {
			t.Errorf("%s: Go has %q, api/openapi.yaml has %q", tt.name, got, enum)
		}
	}
}

func prop(schemaName, property string) func(testing.TB) *openapi3.Schema {
	return func(t testing.TB) *openapi3.Schema {
		p := properties(schema(t, schemaName))[property]
		if p == nil {
			t.Fatalf("%s has no property %s", schemaName, property)
		}
		return p
	}
}

func strs[S ~string](vs ...S) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = string(v)
	}
	return out
}

// compare checks that schema s and Go type typ have the same JSON shape.
func compare(t *testing.T, path string, s *openapi3.Schema, typ reflect.Type) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	s = nonNull(s)
	if !kindMatches(s, typ) {
		t.Errorf("%s: Go %s does not encode as the schema's %v", path, typ, types(s))
		return
	}
	switch {
	case typ.Kind() == reflect.Slice:
		if s.Items != nil && s.Items.Value != nil {
			compare(t, path+"[]", s.Items.Value, typ.Elem())
		}
		return
	case typ.Kind() != reflect.Struct || typ == reflect.TypeFor[time.Time]():
		return
	}
	props := properties(s)
	fields := jsonFields(typ)
	required := requiredOf(s)
	for name := range props {
		if _, ok := fields[name]; !ok {
			t.Errorf("%s.%s: in api/openapi.yaml, but no field of %s has that JSON name", path, name, typ)
		}
	}
	for name, f := range fields {
		p, ok := props[name]
		if !ok {
			t.Errorf("%s.%s: field %s.%s is not in api/openapi.yaml", path, name, typ, f.Name)
			continue
		}
		if required[name] && omits(f) {
			t.Errorf("%s.%s: required, but field %s.%s may be omitted (%s)", path, name, typ, f.Name, f.Tag.Get("json"))
		}
		if f.Type == reflect.TypeFor[time.Duration]() {
			// Only a type that writes it as a Go duration string may have it.
			if !reflect.PointerTo(typ).Implements(reflect.TypeFor[json.Marshaler]()) || !p.Type.Is("string") {
				t.Errorf("%s.%s: a time.Duration field, written as nanoseconds", path, name)
			}
			continue
		}
		compare(t, path+"."+name, p, f.Type)
	}
}

// nonNull is the schema of a nullable member written oneOf: [{$ref: T},
// {type: 'null'}] (a pointer in Go): T; any other schema is itself.
func nonNull(s *openapi3.Schema) *openapi3.Schema {
	if len(s.OneOf) != 2 {
		return s
	}
	var kept *openapi3.Schema
	for _, ref := range s.OneOf {
		v := ref.Value
		if v == nil {
			return s
		}
		if v.Type != nil && v.Type.Is("null") {
			continue
		}
		if kept != nil {
			return s
		}
		kept = v
	}
	if kept == nil {
		return s
	}
	return kept
}

// properties are the properties of s and of its allOf parts.
func properties(s *openapi3.Schema) map[string]*openapi3.Schema {
	out := map[string]*openapi3.Schema{}
	for name, ref := range s.Properties {
		if ref.Value != nil {
			out[name] = ref.Value
		}
	}
	for _, part := range s.AllOf {
		if part.Value != nil {
			for name, p := range properties(part.Value) {
				if _, ok := out[name]; !ok {
					out[name] = p
				}
			}
		}
	}
	return out
}

func requiredOf(s *openapi3.Schema) map[string]bool {
	out := map[string]bool{}
	for _, name := range s.Required {
		out[name] = true
	}
	for _, part := range s.AllOf {
		if part.Value != nil {
			for name := range requiredOf(part.Value) {
				out[name] = true
			}
		}
	}
	return out
}

// jsonFields are the fields encoding/json writes for typ, by JSON name,
// embedded structs flattened (shallower fields win, as in encoding/json).
func jsonFields(typ reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	var embedded []reflect.Type
	for f := range typ.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f
	}
	for _, et := range embedded {
		for name, f := range jsonFields(et) {
			if _, ok := out[name]; !ok {
				out[name] = f
			}
		}
	}
	return out
}

func omits(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	for _, o := range strings.Split(opts, ",") {
		if o == "omitempty" || o == "omitzero" {
			return true
		}
	}
	return false
}

func types(s *openapi3.Schema) []string {
	if s.Type == nil {
		return nil
	}
	return s.Type.Slice()
}

// kindMatches reports whether typ encodes as one of the schema's types; a
// schema without a type (allOf, oneOf of objects) is an object.
func kindMatches(s *openapi3.Schema, typ reflect.Type) bool {
	is := func(name string) bool {
		if s.Type == nil || len(s.Type.Slice()) == 0 {
			return name == "object"
		}
		return s.Type.Is(name) || slices.Contains(s.Type.Slice(), name)
	}
	if typ == reflect.TypeFor[time.Time]() {
		return is("string")
	}
	switch typ.Kind() {
	case reflect.String:
		return is("string")
	case reflect.Bool:
		return is("boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return is("integer") || is("number")
	case reflect.Float32, reflect.Float64:
		return is("number")
	case reflect.Slice, reflect.Array:
		return is("array")
	case reflect.Struct, reflect.Map:
		return is("object")
	}
	return false
}

// recorder keeps the raw body of every answer its client receives.
type recorder struct {
	mu      sync.Mutex
	answers []recorded
}

type recorded struct {
	req    *http.Request
	status int
	header http.Header
	body   []byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.answers = append(r.answers, recorded{req, resp.StatusCode, resp.Header.Clone(), body})
	r.mu.Unlock()
	return resp, nil
}

func (r *recorder) last() recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.answers[len(r.answers)-1]
}

// TestObservedMatchOpenAPI decodes real answers of an aggregator over the
// simulator with the client, encodes what the client decoded, and checks
// that it is both valid against api/openapi.yaml and the very document the
// server sent: nothing the server says is lost or changed by the client's
// types.
func TestObservedMatchOpenAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, baseYAML)
	if err := e.forceOpen("cordoba", "by_domain"); err != nil {
		t.Fatal(err)
	}
	v := apitest.New(t)

	tests := []struct {
		name  string
		query func(*client.Client) (*aggregator.Result, error)
	}{
		{"complete", func(c *client.Client) (*aggregator.Result, error) {
			return c.ByDomain(t.Context(), portalsim.DemoPlate, client.WithSources("caba", "santafe"))
		}},
		{"partial by domain", func(c *client.Client) (*aggregator.Result, error) {
			return c.ByDomain(t.Context(), portalsim.DemoPlate)
		}},
		{"partial by id", func(c *client.Client) (*aggregator.Result, error) {
			return c.ByID(t.Context(), portalsim.DemoCUIT)
		}},
		{"no source available", func(c *client.Client) (*aggregator.Result, error) {
			return c.ByDomain(t.Context(), portalsim.DemoPlate, client.WithSources("cordoba", "rosario"))
		}},
		{"invalid", func(c *client.Client) (*aggregator.Result, error) {
			return c.ByDomain(t.Context(), "not a plate", client.WithSources("atlantis"))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &recorder{}
			c := newClient(t, e.URL, client.WithHTTPClient(&http.Client{Transport: rec}))
			res, err := tt.query(c)
			var decoded any = res
			if err != nil {
				var u *client.Unavailable
				var p *problem.Problem
				switch {
				case errors.As(err, &u):
					decoded = u
				case errors.As(err, &p):
					decoded = p
				default:
					t.Fatalf("query: %v", err)
				}
			}
			again, err := json.Marshal(decoded)
			if err != nil {
				t.Fatal(err)
			}
			got := rec.last()
			v.Check(t, got.req, got.status, got.header, again)
			var sent, kept any
			if err := json.Unmarshal(got.body, &sent); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(again, &kept); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(sent, kept) {
				t.Errorf("the client's types changed the answer:\nsent: %s\nkept: %s", got.body, again)
			}
		})
	}
}
