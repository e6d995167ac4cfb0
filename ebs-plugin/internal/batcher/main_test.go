package batcher

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a flush goroutine outlives the test that started it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
