package ec2sim

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine outlives them: every emulator a test starts must have
// stopped its endpoints, IMDS servers and ticker by the end.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
