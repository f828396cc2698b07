package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"

	"github.com/multas/aggregator"
	"github.com/multas/aggregator/app"
	"github.com/multas/aggregator/config"
	"github.com/multas/aggregator/fanout"
	"github.com/multas/aggregator/sources"
)

// registry is a jurisdiction reached through Go code rather than an HTTP
// portal (a file, a database, a vendor's SDK): here, a fixed list.
type registry struct {
	id, jurisdiction string
	records          map[string][]aggregator.Infraction
}

func (r registry) ID() string           { return r.id }
func (r registry) Jurisdiction() string { return r.jurisdiction }

func (r registry) Supports(op aggregator.Operation, _ aggregator.IDKind) bool {
	return op == aggregator.ByDomain
}

func (r registry) Lookup(_ context.Context, q aggregator.Query) (sources.Answer, error) {
	return sources.Answer{Infractions: r.records[q.Domain]}, nil
}

func (r registry) Voucher(context.Context, string) (*sources.Voucher, error) {
	return nil, sources.ErrUnsupported
}

// A Go adapter registered under its own `type` plugs into the fan-out: the
// source gets its breaker, rate limit, retries and metrics like any other.
func Example_adapter() {
	cfg, err := config.Parse([]byte(`
sources:
  - id: archivo
    type: registry
    jurisdiction: Archivo Provincial
    operations: {by_domain: {}}
`), "example.yaml", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	newRegistry := func(sc config.Source, _ app.AdapterEnv) (fanout.Source, error) {
		return registry{id: sc.ID, jurisdiction: sc.Jurisdiction, records: map[string][]aggregator.Infraction{
			"AB123CD": {{Source: sc.ID, Jurisdiction: sc.Jurisdiction, ID: "R-1", Amount: "1500.00", Currency: "ARS", Status: aggregator.Unpaid}},
		}}, nil
	}
	a, err := app.New(cfg, app.Options{Adapters: map[string]app.Adapter{"registry": newRegistry}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer a.Close()

	rec := httptest.NewRecorder()
	a.Server.ServeHTTP(rec, httptest.NewRequest("GET", "/v1/infractions?domain=ab-123-cd", nil))
	var res struct {
		Complete    bool
		Infractions []struct{ Source, ID, Amount, Status string }
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &res)
	fmt.Println(rec.Code, res.Complete, res.Infractions)
	// Output: 200 true [{archivo R-1 1500.00 unpaid}]
}
