// Package e2e holds the aggregator's end-to-end tests: each builds a full
// replica with app.New, serves it on a real HTTP listener, and points it at
// fake jurisdiction portals that are real HTTP servers recording every
// request they receive. Only the outside world is faked; every answer the
// aggregator gives is checked against api/openapi.yaml.
//
// The package has no code of its own: run it with `go test -race ./e2e/`.
package e2e
