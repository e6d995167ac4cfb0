package kubeclient

import (
	"context"
	"os"
	"reflect"
	"runtime/debug"

	"k8s.io/klog/v2"
)

// syncGCPercent is the Go GC's target while the initial LIST runs: the heap may grow 25% over what is live
// between collections, instead of the default (GOGC unset) 100%.
const syncGCPercent, defaultGCPercent = 25, 100

// cacheSyncer is an informer factory: client-go's, or a generated one for custom resources.
type cacheSyncer interface {
	WaitForCacheSync(stop <-chan struct{}) map[reflect.Type]bool
}

// LeanSync keeps the initial LIST of started factories from leaving the sidecar's memory at twice its caches.
// While the informers decode every object, the heap holds the caches plus the garbage of decoding them, and
// with the default GC target it grows to twice what is live before each collection; the Go runtime keeps the
// pages it grew to for the life of the process, as they are under its next target. So, until the factories have
// synced (or ctx ends), the GC runs at a tighter target, and then the default comes back and the memory freed
// meanwhile is returned to the OS at once. It costs a few more collections during the LIST, once per start or
// leadership. A GOGC the user set is left alone. Call it after the factories' Start.
func LeanSync(ctx context.Context, factories ...cacheSyncer) {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(syncGCPercent)
	go func() {
		for _, f := range factories {
			f.WaitForCacheSync(ctx.Done())
		}
		debug.SetGCPercent(defaultGCPercent)
		debug.FreeOSMemory()
		klog.FromContext(ctx).V(4).Info("Initial LIST done: GC target restored, freed memory returned to the OS")
	}()
}
