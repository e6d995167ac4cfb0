package app

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if the CSI or metrics server, or anything else Run starts, outlives Run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
