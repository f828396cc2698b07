// Package api holds the OpenAPI document of the aggregator's HTTP API, the
// contract of every endpoint of SPEC.md. The server serves it at
// GET /openapi.yaml and the tests validate their responses against it
// (see internal/apitest).
package api

import _ "embed"

// Spec is the OpenAPI 3.1 document (openapi.yaml), embedded at build time.
// It is shared by every user of the package: treat it as read-only and never
// modify its bytes (copy it first if a changed version is needed).
//
//go:embed openapi.yaml
var Spec []byte
