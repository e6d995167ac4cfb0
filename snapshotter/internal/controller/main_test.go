package controller

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain turns client-go's WatchListClient off: the snapshot client's generated informers (v8.7.0) predate
// the opt-out the fake clientset offers, so with watch-list on they wait for a bookmark the fake never sends.
// It also fails the package if a goroutine its tests started is still running when they end.
func TestMain(m *testing.M) {
	if err := os.Setenv("KUBE_FEATURE_WatchListClient", "false"); err != nil {
		panic(err)
	}
	goleak.VerifyTestMain(m)
}
