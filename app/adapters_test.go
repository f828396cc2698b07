package app_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
)

func TestUnknownSourceType(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse([]byte(`
sources:
  - id: archivo
    type: registry
    jurisdiction: Archivo Provincial
    operations: {by_domain: {}}
`), "t.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	err = app.CheckSources(cfg, nil)
	var errs config.Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Key != "sources[0].type" || !strings.Contains(errs[0].Msg, `unknown type "registry" (known: http)`) {
		t.Errorf("CheckSources = %v, want sources[0].type unknown", err)
	}
	if _, err := app.New(cfg, app.Options{}); err == nil || !strings.Contains(err.Error(), "unknown type") {
		t.Errorf("app.New = %v, want an unknown type error", err)
	}
	if err := app.CheckSources(cfg, map[string]app.Adapter{"registry": nil}); err != nil {
		t.Errorf("CheckSources with the type registered = %v", err)
	}
}
