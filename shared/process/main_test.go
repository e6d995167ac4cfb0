package process

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a goroutine its tests started is still running when they end, such as the
// signal listener. klog's flush daemon is the one exception: applying the logging flags starts it for the life of
// the process, as it should in a binary.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"))
}
