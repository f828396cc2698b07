// Package clienttest pins the code generator of the Go client that
// api/clients_test.go generates from api/openapi.yaml and builds (SPEC 10,
// "The contract serves generated clients"), and the modules that client
// imports. It is a module of its own so that the product's go.mod never
// depends on them: `go tool oapi-codegen`, run in this directory, is the
// pinned generator.
package clienttest

import (
	// What the generated client imports besides the standard library;
	// importing them here keeps `go mod tidy` from dropping them.
	_ "github.com/oapi-codegen/runtime"
	_ "go.yaml.in/yaml/v3"
)
