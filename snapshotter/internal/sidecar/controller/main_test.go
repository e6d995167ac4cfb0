package controller

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain turns client-go's WatchListClient off: the snapshot client's generated informers (v8.7.0) predate
// the opt-out the fake clientset offers, so with watch-list on they wait for a bookmark the fake never sends.
// It also fails the package if a goroutine its tests started (a worker, an informer) is still running when
// they end.
func TestMain(m *testing.M) {
	if err := os.Setenv("KUBE_FEATURE_WatchListClient", "false"); err != nil {
		fmt.Fprintln(os.Stderr, "turning WatchListClient off:", err)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m)
}
