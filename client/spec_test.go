package client_test

import (
	"encoding/json"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/multas/aggregator/api"
)

// loadSpec parses api/openapi.yaml once per test binary.
var loadSpec = sync.OnceValues(func() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.Spec)
	if err != nil {
		return nil, err
	}
	return doc, doc.Validate(loader.Context)
})

// schema returns the component schema called name.
func schema(t testing.TB, name string) *openapi3.Schema {
	t.Helper()
	doc, err := loadSpec()
	if err != nil {
		t.Fatalf("loading api/openapi.yaml: %v", err)
	}
	ref := doc.Components.Schemas[name]
	if ref == nil || ref.Value == nil {
		t.Fatalf("api/openapi.yaml has no schema %s", name)
	}
	return ref.Value
}

// validate checks a JSON document against the component schema called
// name, as a request body (validate(…, false)) or a response body.
func validate(t testing.TB, name string, body []byte, response bool) error {
	t.Helper()
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return err
	}
	opts := []openapi3.SchemaValidationOption{openapi3.MultiErrors(), openapi3.EnableJSONSchema2020()}
	if response {
		opts = append(opts, openapi3.VisitAsResponse())
	} else {
		opts = append(opts, openapi3.VisitAsRequest())
	}
	return schema(t, name).VisitJSON(v, opts...)
}
