package api_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
)

// TestRequiredPropertiesAreDefined checks that every name in a required
// list is a property of its schema: of the schema itself, of its allOf
// parts, or, for the parts of a composition and the subschemas of
// if/then/else and not, of the schema they belong to. It stands for
// redocly's no-required-schema-properties-undefined, which redocly.yaml
// turns off because it does not know the last case.
func TestRequiredPropertiesAreDefined(t *testing.T) {
	t.Parallel()
	for _, u := range undefinedRequired(loadSpec(t)) {
		t.Error(u)
	}
}

func TestUndefinedRequiredFindsATypo(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData([]byte(`openapi: 3.1.0
info: {title: t, version: "1"}
paths: {}
components:
  schemas:
    Base:
      type: object
      required: [a]
      properties: {a: {type: string}}
    Good:
      allOf:
        - $ref: '#/components/schemas/Base'
        - type: object
          required: [a, b]
          properties: {b: {type: string}}
      if: {required: [b]}
      then: {not: {required: [a]}}
    Bad:
      type: object
      required: [nmae]
      properties:
        name: {type: string}
        inner:
          type: object
          properties: {x: {type: string}}
          if: {required: [y]}
`))
	if err != nil {
		t.Fatal(err)
	}
	got := undefinedRequired(doc)
	want := []string{
		`#/components/schemas/Bad/properties/inner/if: required "y" is not a property`,
		`#/components/schemas/Bad: required "nmae" is not a property`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("undefinedRequired found %q, want %q", got, want)
	}
}

// undefinedRequired lists, sorted, every required name of doc's schemas
// that is not a property where it applies.
func undefinedRequired(doc *openapi3.T) []string {
	var out []string
	seen := map[*openapi3.Schema]bool{}
	var visit func(where string, ref *openapi3.SchemaRef, outer map[string]bool)
	visit = func(where string, ref *openapi3.SchemaRef, outer map[string]bool) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		if ref.Ref != "" && outer != nil {
			// A component is checked on its own, as itself.
			return
		}
		s := ref.Value
		seen[s] = true
		defined := definedProperties(s)
		for name := range outer {
			defined[name] = true
		}
		for _, name := range s.Required {
			if !defined[name] {
				out = append(out, fmt.Sprintf("%s: required %q is not a property", where, name))
			}
		}
		for name, p := range s.Properties {
			visit(where+"/properties/"+name, p, nil)
		}
		visit(where+"/items", s.Items, nil)
		visit(where+"/additionalProperties", s.AdditionalProperties.Schema, nil)
		for kw, parts := range map[string]openapi3.SchemaRefs{"allOf": s.AllOf, "anyOf": s.AnyOf, "oneOf": s.OneOf} {
			for i, p := range parts {
				visit(fmt.Sprintf("%s/%s/%d", where, kw, i), p, defined)
			}
		}
		for kw, p := range map[string]*openapi3.SchemaRef{"not": s.Not, "if": s.If, "then": s.Then, "else": s.Else} {
			visit(where+"/"+kw, p, defined)
		}
	}
	for name, ref := range doc.Components.Schemas {
		visit("#/components/schemas/"+name, &openapi3.SchemaRef{Value: ref.Value}, nil)
	}
	content := func(where string, c openapi3.Content) {
		for mt, m := range c {
			if m != nil {
				visit(where+"/content/"+mt+"/schema", m.Schema, nil)
			}
		}
	}
	for name, r := range doc.Components.Responses {
		if r.Value != nil {
			content("#/components/responses/"+name, r.Value.Content)
		}
	}
	items := map[string]*openapi3.PathItem{}
	for path, item := range doc.Paths.Map() {
		items["#/paths/"+path] = item
	}
	for name, item := range doc.Webhooks {
		items["#/webhooks/"+name] = item
	}
	for where, item := range items {
		for method, op := range item.Operations() {
			at := where + "/" + strings.ToLower(method)
			if op.RequestBody != nil && op.RequestBody.Value != nil {
				content(at+"/requestBody", op.RequestBody.Value.Content)
			}
			for code, r := range op.Responses.Map() {
				if r.Value != nil {
					content(at+"/responses/"+code, r.Value.Content)
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// definedProperties are the properties of s and, recursively, of its allOf
// parts.
func definedProperties(s *openapi3.Schema) map[string]bool {
	out := map[string]bool{}
	for name := range s.Properties {
		out[name] = true
	}
	for _, part := range s.AllOf {
		if part.Value != nil {
			for name := range definedProperties(part.Value) {
				out[name] = true
			}
		}
	}
	return out
}
