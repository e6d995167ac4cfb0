package httpserver

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a server goroutine outlives the test that started it: Serve must join what
// it starts.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
