package labeler

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if an informer or the labelling loop outlives its test.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
