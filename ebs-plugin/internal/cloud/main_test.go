package cloud

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a batch flush or a test server's goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
