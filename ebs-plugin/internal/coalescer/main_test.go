package coalescer

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if an execution goroutine outlives the test that started it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
