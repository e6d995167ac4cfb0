package command

import (
	"testing"

	"go.uber.org/goleak"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// TestMain fails the package if a goroutine its tests started is still running when they end. A process
// applies its logging configuration once; the cases that get that far all pass the same logging flags, which
// component-base then accepts again. Applying it starts klog's flush daemon, which lives as long as the process
// by design, as it does in the binaries.
func TestMain(m *testing.M) {
	logsapi.ReapplyHandling = logsapi.ReapplyHandlingIgnoreUnchanged
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("k8s.io/klog/v2.(*flushDaemon).run.func1"),
		goleak.IgnoreTopFunction("os/signal.signal_recv"), goleak.IgnoreTopFunction("os/signal.loop"))
}
