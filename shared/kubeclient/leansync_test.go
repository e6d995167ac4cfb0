package kubeclient

import (
	"context"
	"fmt"
	"reflect"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stowage-csi/stowage/shared/testutil"
)

// gcPercent reads the GC target. Through runtime/metrics, not SetGCPercent (which returns the target it
// replaces): a read that writes would race LeanSync's own goroutine, and could put back a target it just
// changed.
func gcPercent(t *testing.T) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		t.Fatalf("runtime/metrics has no %s", s[0].Name)
	}
	return int(s[0].Value.Uint64())
}

// heldFactory is a factory whose caches sync when release is closed.
type heldFactory struct{ release chan struct{} }

func (f heldFactory) WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool {
	select {
	case <-f.release:
	case <-stop:
	}
	return nil
}

func TestLeanSyncTightensTheGCUntilTheCachesSynced(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Cleanup(func() { debug.SetGCPercent(defaultGCPercent) })
	a, b := heldFactory{make(chan struct{})}, heldFactory{make(chan struct{})}
	LeanSync(context.Background(), a, b)
	if got := gcPercent(t); got != syncGCPercent {
		t.Fatalf("GC target during the initial LIST = %d, want %d", got, syncGCPercent)
	}
	close(a.release)
	if got := gcPercent(t); got != syncGCPercent {
		t.Fatalf("GC target with one factory still syncing = %d, want %d", got, syncGCPercent)
	}
	close(b.release)
	waitGCPercent(t, defaultGCPercent, "both factories synced")
}

func TestLeanSyncRestoresTheGCWhenTheContextEnds(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Cleanup(func() { debug.SetGCPercent(defaultGCPercent) })
	ctx, cancel := context.WithCancel(context.Background())
	LeanSync(ctx, heldFactory{make(chan struct{})})
	cancel()
	waitGCPercent(t, defaultGCPercent, "the context ended")
}

// waitGCPercent waits up to 10 s for the GC target to become want after what happened.
func waitGCPercent(t *testing.T, want int, after string) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, fmt.Sprintf("GC target %d after %s", want, after), func() (bool, error) {
		got := gcPercent(t)
		return got == want, fmt.Errorf("GC target is %d", got)
	})
}

func TestLeanSyncLeavesAGOGCTheUserSetAlone(t *testing.T) {
	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	t.Cleanup(func() { debug.SetGCPercent(defaultGCPercent) })
	LeanSync(context.Background(), heldFactory{make(chan struct{})})
	if got := gcPercent(t); got != 50 {
		t.Errorf("GC target with GOGC=50 = %d, want 50", got)
	}
}
