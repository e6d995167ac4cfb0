// Package controller wires the VolumeSnapshotContent informer to csi-snapshotter's work queue and hands each
// queued content of its driver to the handler. It holds no snapshot logic.
package controller

import (
	"context"
	"fmt"
	"time"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions/volumesnapshot/v1"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// Handler does the work for one content; a positive duration asks to be called again after it without that
// counting as a failure.
type Handler interface {
	Sync(ctx context.Context, content *snapv1.VolumeSnapshotContent) (time.Duration, error)
	Forget(uid types.UID)
}

// Config wires a Controller.
type Config struct {
	Driver  string
	Handler Handler
	// Contents feeds the queue; Classes only has to be synced before the workers start (the handler reads
	// classes from its lister).
	Contents snapinformers.VolumeSnapshotContentInformer
	Classes  snapinformers.VolumeSnapshotClassInformer
	// Queue is upstream's csi-snapshotter-content.
	Queue   workqueue.Queue[string]
	Workers int
}

// Controller feeds the handler.
type Controller struct {
	cfg    Config
	lister snaplisters.VolumeSnapshotContentLister
	synced []cache.InformerSynced
	// pending are the contents whose last sync failed or is running: DriverBack retries them.
	pending *csiconn.Pending[string]
}

// New registers the event handlers on the informers.
func New(cfg Config) (*Controller, error) {
	c := &Controller{cfg: cfg, lister: cfg.Contents.Lister(), pending: csiconn.NewPending[string]()}
	reg, err := cfg.Contents.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.added,
		UpdateFunc: c.updated,
		DeleteFunc: c.deleted,
	})
	if err != nil {
		return nil, fmt.Errorf("adding VolumeSnapshotContent event handler: %w", err)
	}
	c.synced = []cache.InformerSynced{reg.HasSynced, cfg.Classes.Informer().HasSynced}
	return c, nil
}

// Run waits for the caches, then runs the workers until ctx ends, and returns once they have finished what
// they were doing, which is what lets the elector release the lease.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("waiting for informer caches: %w", ctx.Err())
	}
	klog.FromContext(ctx).Info("Caches synced, starting workers", "workers", c.cfg.Workers)
	process := workqueue.SyncCached(c.cfg.Queue, "volumesnapshotcontent", c.lister.Get, c.cfg.Handler.Sync)
	workqueue.Run(ctx, c.cfg.Workers, c.cfg.Queue, c.pending.Track(process))
	return nil
}

// DriverBack retries at once, instead of at the end of their backoff, the VolumeSnapshotContents whose last
// sync failed (most likely because the driver was away) or is running; csiconn.FollowRestarts calls it when
// the driver is back after a restart. A snapshot that is only not ready yet is not among them: its sync
// succeeded and polls at its own pace.
func (c *Controller) DriverBack(ctx context.Context) {
	n := c.pending.Requeue(c.cfg.Queue.Add)
	klog.FromContext(ctx).Info("CSI driver is back, retrying pending VolumeSnapshotContents", "count", n)
}

func (c *Controller) ours(obj any) (*snapv1.VolumeSnapshotContent, bool) {
	content, ok := obj.(*snapv1.VolumeSnapshotContent)
	return content, ok && content.Spec.Driver == c.cfg.Driver
}

func (c *Controller) added(obj any) {
	if content, ok := c.ours(obj); ok {
		c.cfg.Queue.Add(content.Name)
	}
}

func (c *Controller) updated(oldObj, newObj any) {
	old, ok1 := oldObj.(*snapv1.VolumeSnapshotContent)
	content, ok2 := c.ours(newObj)
	if ok1 && ok2 && shouldEnqueue(old, content) {
		c.cfg.Queue.Add(content.Name)
	}
}

func (c *Controller) deleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if content, ok := c.ours(obj); ok {
		c.cfg.Handler.Forget(content.UID)
	}
}

// shouldEnqueue ignores updates that only changed status.error: those are the handler's own failure writes,
// and queueing them would retry at once instead of after the backoff. A resync (same resourceVersion) is
// always queued.
func shouldEnqueue(old, content *snapv1.VolumeSnapshotContent) bool {
	return workqueue.ChangedBeyond(old, content, func(x *snapv1.VolumeSnapshotContent) {
		if x.Status == nil {
			return
		}
		x.Status.Error = nil
		// readyToUse=false comes with every error write; a real change of readiness is not lost, since only an
		// update that also touches nothing else is ignored.
		if x.Status.ReadyToUse != nil && !*x.Status.ReadyToUse {
			x.Status.ReadyToUse = nil
		}
		if equality.Semantic.DeepEqual(*x.Status, snapv1.VolumeSnapshotContentStatus{}) {
			x.Status = nil
		}
	})
}
