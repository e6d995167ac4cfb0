// Package controller wires the VolumeAttachment and PersistentVolume informers to two work queues and
// hands each queued object to a Handler. It holds no attach logic: the handler (CSI or trivial, chosen
// once at start-up) does.
package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// Handler does the work for one object. SyncVA may ask to be called again after a delay without that
// counting as a failure.
type Handler interface {
	SyncVA(ctx context.Context, va *storagev1.VolumeAttachment) (time.Duration, error)
	SyncPV(ctx context.Context, pv *v1.PersistentVolume) error
	Reconcile(ctx context.Context) ([]string, error)
	Forget(name string, uid types.UID)
}

// Config wires a Controller.
type Config struct {
	Driver     string
	Finalizer  string // finalizer a PersistentVolume may carry from upstream's attacher
	Handler    Handler
	VAInformer storageinformers.VolumeAttachmentInformer
	PVInformer coreinformers.PersistentVolumeInformer
	// VAQueue and PVQueue are the work queues (upstream's names: csi-attacher-va, csi-attacher-pv).
	VAQueue workqueue.Queue[string]
	PVQueue workqueue.Queue[string]
	Workers int
	// ReconcileSync is the period of Handler.Reconcile; 0 turns it off.
	ReconcileSync time.Duration
}

// Controller feeds the handler.
type Controller struct {
	cfg Config
	// pending are the VolumeAttachments whose last sync failed or is running: DriverBack retries them.
	pending  *csiconn.Pending[string]
	vaLister storagelisters.VolumeAttachmentLister
	pvLister corelisters.PersistentVolumeLister
	synced   []cache.InformerSynced
	// joining, if set, runs once ctx has ended and Run starts waiting for its goroutines: tests hold work in
	// flight until then, to see that Run waits for it.
	joining func()
}

// New registers the event handlers on the informers.
func New(cfg Config) (*Controller, error) {
	c := &Controller{
		cfg:      cfg,
		pending:  csiconn.NewPending[string](),
		vaLister: cfg.VAInformer.Lister(),
		pvLister: cfg.PVInformer.Lister(),
	}
	if err := cfg.PVInformer.Informer().SetTransform(trimVolume(cfg.Driver)); err != nil {
		return nil, fmt.Errorf("setting the PersistentVolume transform: %w", err)
	}
	if err := cfg.VAInformer.Informer().SetTransform(trimAttachment); err != nil {
		return nil, fmt.Errorf("setting the VolumeAttachment transform: %w", err)
	}
	vaReg, err := cfg.VAInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.vaAdded,
		UpdateFunc: c.vaUpdated,
		DeleteFunc: c.vaDeleted,
	})
	if err != nil {
		return nil, fmt.Errorf("adding VolumeAttachment event handler: %w", err)
	}
	pvReg, err := cfg.PVInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.pvChanged,
		UpdateFunc: func(_, obj any) { c.pvChanged(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("adding PersistentVolume event handler: %w", err)
	}
	c.synced = []cache.InformerSynced{vaReg.HasSynced, pvReg.HasSynced}
	return c, nil
}

// Run waits for the caches, then runs the workers and the reconcile loop until ctx ends, and returns once all
// of them have finished what they were doing: its return is what lets the elector release the lease, so nothing
// of this leader may still run after it.
func (c *Controller) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("waiting for informer caches: %w", ctx.Err())
	}
	logger.Info("Caches synced, starting workers", "workers", c.cfg.Workers)
	syncVA := c.pending.Track(workqueue.SyncCached(c.cfg.VAQueue, "volumeattachment", c.vaLister.Get, c.cfg.Handler.SyncVA))
	var wg sync.WaitGroup
	wg.Go(func() { workqueue.Run(ctx, c.cfg.Workers, c.cfg.VAQueue, syncVA) })
	wg.Go(func() { workqueue.Run(ctx, c.cfg.Workers, c.cfg.PVQueue, c.syncPV) })
	if c.cfg.ReconcileSync > 0 {
		wg.Go(func() { wait.UntilWithContext(ctx, c.reconcile, c.cfg.ReconcileSync) })
	}
	<-ctx.Done()
	if c.joining != nil {
		c.joining()
	}
	wg.Wait()
	return nil
}

// DriverBack retries at once, instead of at the end of their backoff, the VolumeAttachments whose last sync
// failed (most likely because the driver was away) or is running; csiconn.FollowRestarts calls it when the
// driver is back after a restart.
func (c *Controller) DriverBack(ctx context.Context) {
	n := c.pending.Requeue(c.cfg.VAQueue.Add)
	klog.FromContext(ctx).Info("CSI driver is back, retrying pending VolumeAttachments", "count", n)
}

func (c *Controller) syncPV(ctx context.Context, name string) error {
	pv, err := c.pvLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("persistentvolume %s: %w", name, err)
	}
	return c.cfg.Handler.SyncPV(ctx, pv)
}

func (c *Controller) reconcile(ctx context.Context) {
	names, err := c.cfg.Handler.Reconcile(ctx)
	if err != nil {
		klog.FromContext(ctx).Error(err, "ListVolumes reconcile failed")
		return
	}
	for _, name := range names {
		c.cfg.VAQueue.Add(name)
	}
}

func (c *Controller) vaAdded(obj any) {
	if va, ok := obj.(*storagev1.VolumeAttachment); ok && va.Spec.Attacher == c.cfg.Driver && !settled(va) {
		c.cfg.VAQueue.Add(va.Name)
	}
}

func (c *Controller) vaUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*storagev1.VolumeAttachment)
	va, ok2 := newObj.(*storagev1.VolumeAttachment)
	if !ok1 || !ok2 || va.Spec.Attacher != c.cfg.Driver || settled(va) {
		return
	}
	if shouldEnqueue(old, va) {
		c.cfg.VAQueue.Add(va.Name)
	}
}

func (c *Controller) vaDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	va, ok := obj.(*storagev1.VolumeAttachment)
	if !ok || va.Spec.Attacher != c.cfg.Driver {
		return
	}
	c.cfg.Handler.Forget(va.Name, va.UID)
	// The deleted VolumeAttachment may have been the last one holding an upstream PV finalizer.
	if pv := va.Spec.Source.PersistentVolumeName; pv != nil {
		c.cfg.PVQueue.Add(*pv)
	}
}

func (c *Controller) pvChanged(obj any) {
	pv, ok := obj.(*v1.PersistentVolume)
	if ok && pv.DeletionTimestamp != nil && slices.Contains(pv.Finalizers, c.cfg.Finalizer) {
		c.cfg.PVQueue.Add(pv.Name)
	}
}

// shouldEnqueue ignores updates that only changed status.attachError or status.detachError: those are
// our own error writes, and queueing them would retry at once instead of after the backoff. A resync
// (same resourceVersion) is always queued.
func shouldEnqueue(old, va *storagev1.VolumeAttachment) bool {
	return workqueue.ChangedBeyond(old, va, func(x *storagev1.VolumeAttachment) {
		x.Status.AttachError = nil
		x.Status.DetachError = nil
	})
}
