package controller

import (
	"context"
	"fmt"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	groupinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions/volumegroupsnapshot/v1"
	grouplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// GroupHandler does the work for one VolumeGroupSnapshotContent, like Handler.
type GroupHandler interface {
	Sync(ctx context.Context, content *groupv1.VolumeGroupSnapshotContent) (time.Duration, error)
	Forget(uid types.UID)
}

// GroupConfig wires a GroupController.
type GroupConfig struct {
	Driver   string
	Handler  GroupHandler
	Contents groupinformers.VolumeGroupSnapshotContentInformer
	Classes  groupinformers.VolumeGroupSnapshotClassInformer
	// Queue is upstream's csi-snapshotter-groupsnapshotcontent.
	Queue   workqueue.Queue[string]
	Workers int
}

// GroupController feeds the group handler, as Controller feeds the content handler.
type GroupController struct {
	cfg    GroupConfig
	lister grouplisters.VolumeGroupSnapshotContentLister
	synced []cache.InformerSynced
	// pending are the group contents whose last sync failed or is running: DriverBack retries them.
	pending *csiconn.Pending[string]
}

// NewGroup registers the event handlers on the informers.
func NewGroup(cfg GroupConfig) (*GroupController, error) {
	c := &GroupController{cfg: cfg, lister: cfg.Contents.Lister(), pending: csiconn.NewPending[string]()}
	reg, err := cfg.Contents.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if gc, ok := c.ours(obj); ok {
				c.cfg.Queue.Add(gc.Name)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*groupv1.VolumeGroupSnapshotContent)
			gc, ok2 := c.ours(newObj)
			if ok1 && ok2 && shouldEnqueueGroup(old, gc) {
				c.cfg.Queue.Add(gc.Name)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if gc, ok := c.ours(obj); ok {
				c.cfg.Handler.Forget(gc.UID)
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("adding VolumeGroupSnapshotContent event handler: %w", err)
	}
	c.synced = []cache.InformerSynced{reg.HasSynced, cfg.Classes.Informer().HasSynced}
	return c, nil
}

// Run waits for the caches, then runs the workers until ctx ends and they have finished.
func (c *GroupController) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("waiting for group snapshot informer caches: %w", ctx.Err())
	}
	klog.FromContext(ctx).Info("Group snapshot caches synced, starting workers", "workers", c.cfg.Workers)
	process := workqueue.SyncCached(c.cfg.Queue, "volumegroupsnapshotcontent", c.lister.Get, c.cfg.Handler.Sync)
	workqueue.Run(ctx, c.cfg.Workers, c.cfg.Queue, c.pending.Track(process))
	return nil
}

// DriverBack retries at once the VolumeGroupSnapshotContents whose last sync failed or is running, as
// Controller.DriverBack does for contents.
func (c *GroupController) DriverBack(ctx context.Context) {
	n := c.pending.Requeue(c.cfg.Queue.Add)
	klog.FromContext(ctx).Info("CSI driver is back, retrying pending VolumeGroupSnapshotContents", "count", n)
}

func (c *GroupController) ours(obj any) (*groupv1.VolumeGroupSnapshotContent, bool) {
	gc, ok := obj.(*groupv1.VolumeGroupSnapshotContent)
	return gc, ok && gc.Spec.Driver == c.cfg.Driver
}

// shouldEnqueueGroup ignores updates that only changed status.error (our own failure writes), as
// shouldEnqueue does for contents.
func shouldEnqueueGroup(old, gc *groupv1.VolumeGroupSnapshotContent) bool {
	return workqueue.ChangedBeyond(old, gc, func(x *groupv1.VolumeGroupSnapshotContent) {
		if x.Status == nil {
			return
		}
		x.Status.Error = nil
		if x.Status.ReadyToUse != nil && !*x.Status.ReadyToUse {
			x.Status.ReadyToUse = nil
		}
		if equality.Semantic.DeepEqual(*x.Status, groupv1.VolumeGroupSnapshotContentStatus{}) {
			x.Status = nil
		}
	})
}
