package tracing

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine is still running
// once they are done: servers, clients and background loops started by a
// test must all be stopped by it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
