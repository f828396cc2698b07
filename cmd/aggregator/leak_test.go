package main

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine is still running
// once they are done: servers, clients and background loops started by a
// test must all be stopped by it. It also removes the binary the tests
// built.
func TestMain(m *testing.M) {
	code := m.Run()
	removeBinary()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
