package queuetest

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine its tests started is still running when they end: a worker,
// informer or server that outlives its test would do the same to the process that runs it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
