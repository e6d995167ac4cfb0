package driver

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine a test started (the gRPC server, a modification window's
// execution) is still running when the tests end.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
