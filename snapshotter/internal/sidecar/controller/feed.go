package controller

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// Syncer does the work for one object; a positive duration asks to be called again after it without that
// counting as a failure.
type Syncer[T any] interface {
	Sync(ctx context.Context, obj T) (time.Duration, error)
	Forget(uid types.UID)
}

// feed is what Controller and GroupController share: the informer's events of this driver's objects into the
// queue, the workers that hand each queued object to the handler, and the retry when the driver is back.
type feed[T interface {
	comparable
	GetName() string
	GetUID() types.UID
}] struct {
	// kind names the objects in logs and errors, in the plural ("VolumeSnapshotContents").
	kind    string
	queue   workqueue.Queue[string]
	workers int
	handler Syncer[T]
	get     func(name string) (T, error)
	// ours picks this driver's objects out of the informer's events.
	ours func(obj any) (T, bool)
	// shouldEnqueue filters updates, so the handler's own failure writes do not requeue at once.
	shouldEnqueue func(old, cur T) bool
	synced        []cache.InformerSynced
	// pending are the objects whose last sync failed or is running: DriverBack retries them.
	pending *csiconn.Pending[string]
}

// register adds the event handlers to the objects' informer; Run waits for it and for classes to sync.
func (f *feed[T]) register(objects cache.SharedIndexInformer, classes cache.InformerSynced) error {
	f.pending = csiconn.NewPending[string]()
	reg, err := objects.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    f.added,
		UpdateFunc: f.updated,
		DeleteFunc: f.deleted,
	})
	if err != nil {
		return fmt.Errorf("adding %s event handler: %w", f.kind, err)
	}
	f.synced = []cache.InformerSynced{reg.HasSynced, classes}
	return nil
}

// Run waits for the caches, then runs the workers until ctx ends, and returns once they have finished what
// they were doing, which is what lets the elector release the lease.
func (f *feed[T]) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), f.synced...) {
		return fmt.Errorf("waiting for the %s informer caches: %w", f.kind, ctx.Err())
	}
	klog.FromContext(ctx).Info("Caches synced, starting workers", "kind", f.kind, "workers", f.workers)
	process := workqueue.SyncCached(f.queue, f.kind, f.get, f.handler.Sync)
	workqueue.Run(ctx, f.workers, f.queue, f.pending.Track(process))
	return nil
}

// DriverBack retries at once, instead of at the end of their backoff, the objects whose last sync failed (most
// likely because the driver was away) or is running; csiconn.FollowRestarts calls it when the driver is back
// after a restart. A snapshot that is only not ready yet is not among them: its sync succeeded and polls at its
// own pace.
func (f *feed[T]) DriverBack(ctx context.Context) {
	n := f.pending.Requeue(f.queue.Add)
	klog.FromContext(ctx).Info("CSI driver is back, retrying pending objects", "kind", f.kind, "count", n)
}

func (f *feed[T]) added(obj any) {
	if o, ok := f.ours(obj); ok {
		f.queue.Add(o.GetName())
	}
}

func (f *feed[T]) updated(oldObj, newObj any) {
	old, ok1 := oldObj.(T)
	cur, ok2 := f.ours(newObj)
	if ok1 && ok2 && f.shouldEnqueue(old, cur) {
		f.queue.Add(cur.GetName())
	}
}

func (f *feed[T]) deleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if o, ok := f.ours(obj); ok {
		f.handler.Forget(o.GetUID())
	}
}
