package kubeclient

import (
	"context"
	"reflect"
	"runtime/debug"
	"testing"
	"time"
)

// gcPercent reads the GC target (SetGCPercent returns the one it replaces).
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
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
	if got := gcPercent(); got != syncGCPercent {
		t.Fatalf("GC target during the initial LIST = %d, want %d", got, syncGCPercent)
	}
	close(a.release)
	if got := gcPercent(); got != syncGCPercent {
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
	deadline := time.Now().Add(10 * time.Second)
	for gcPercent() != want {
		if time.Now().After(deadline) {
			t.Fatalf("GC target still %d 10 s after %s, want %d", gcPercent(), after, want)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLeanSyncLeavesAGOGCTheUserSetAlone(t *testing.T) {
	t.Setenv("GOGC", "50")
	debug.SetGCPercent(50)
	t.Cleanup(func() { debug.SetGCPercent(defaultGCPercent) })
	LeanSync(context.Background(), heldFactory{make(chan struct{})})
	if got := gcPercent(); got != 50 {
		t.Errorf("GC target with GOGC=50 = %d, want 50", got)
	}
}
