// Package controller wires the claim, volume and VolumeAttributesClass informers to two work queues, one for
// expansion and one for modification, and hands each queued claim to the matching handler. The two run side
// by side, so a size change and a class change made together reach the driver together (the EBS driver
// merges them into one EC2 ModifyVolume). It holds no resize logic.
package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	coreinformers "k8s.io/client-go/informers/core/v1"
	storageinformers "k8s.io/client-go/informers/storage/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// Handler converges one claim. Sync may ask to be called again after a delay without that counting as a
// failure.
type Handler interface {
	Sync(ctx context.Context, pvc *v1.PersistentVolumeClaim) (time.Duration, error)
	Forget(key string, pvc *v1.PersistentVolumeClaim)
}

// Config wires a Controller.
type Config struct {
	Driver      string
	PVCInformer coreinformers.PersistentVolumeClaimInformer
	PVInformer  coreinformers.PersistentVolumeInformer
	// Expand and ExpandQueue are nil for a driver that only modifies volumes: claims are then not expanded.
	Expand      Handler
	ExpandQueue workqueue.Queue[string]
	// Modify, ModifyQueue and VACInformer are nil when claims are not modified (no MODIFY_VOLUME capability or
	// the VolumeAttributesClass gate off).
	Modify      Handler
	ModifyQueue workqueue.Queue[string]
	VACInformer storageinformers.VolumeAttributesClassInformer
	// Synced are further caches to wait for (the Pod informer of --handle-volume-inuse-error).
	Synced  []cache.InformerSynced
	Workers int
}

const classIndex = "volumeAttributesClassName"

// Controller feeds the handlers.
type Controller struct {
	cfg       Config
	pvcLister corelisters.PersistentVolumeClaimLister
	pvcIndex  cache.Indexer
	synced    []cache.InformerSynced
	// pendingExpand and pendingModify are the claims whose last expand or modify sync failed or is running:
	// DriverBack retries them.
	pendingExpand, pendingModify *csiconn.Pending[string]
}

// New registers the event handlers on the informers, which must not have started yet.
func New(cfg Config) (*Controller, error) {
	c := &Controller{cfg: cfg, pvcLister: cfg.PVCInformer.Lister(), synced: cfg.Synced,
		pendingExpand: csiconn.NewPending[string](), pendingModify: csiconn.NewPending[string]()}
	pvcInf := cfg.PVCInformer.Informer()
	if cfg.Modify != nil {
		if err := pvcInf.AddIndexers(cache.Indexers{classIndex: indexByClass}); err != nil {
			return nil, fmt.Errorf("adding the PersistentVolumeClaim class index: %w", err)
		}
	}
	c.pvcIndex = pvcInf.GetIndexer()
	reg, err := pvcInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.pvcAdded,
		UpdateFunc: c.pvcUpdated,
		DeleteFunc: c.pvcDeleted,
	})
	if err != nil {
		return nil, fmt.Errorf("adding the PersistentVolumeClaim event handler: %w", err)
	}
	c.synced = append(c.synced, reg.HasSynced)
	reg, err = cfg.PVInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.pvChanged,
		UpdateFunc: func(_, obj any) { c.pvChanged(obj) },
	})
	if err != nil {
		return nil, fmt.Errorf("adding the PersistentVolume event handler: %w", err)
	}
	c.synced = append(c.synced, reg.HasSynced)
	if cfg.Modify != nil {
		reg, err = cfg.VACInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.classChanged,
			UpdateFunc: func(_, obj any) { c.classChanged(obj) },
		})
		if err != nil {
			return nil, fmt.Errorf("adding the VolumeAttributesClass event handler: %w", err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	return c, nil
}

// Run waits for the caches, then runs the workers until ctx ends, and returns once they have finished what
// they were doing, which is what lets the elector release the lease.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("waiting for informer caches: %w", ctx.Err())
	}
	klog.FromContext(ctx).Info("Caches synced, starting workers", "workers", c.cfg.Workers, "expand", c.cfg.Expand != nil, "modify", c.cfg.Modify != nil)
	var wg sync.WaitGroup
	if c.cfg.Expand != nil {
		wg.Go(func() {
			workqueue.Run(ctx, c.cfg.Workers, c.cfg.ExpandQueue, c.pendingExpand.Track(func(ctx context.Context, key string) error {
				return c.sync(ctx, key, c.cfg.Expand, c.cfg.ExpandQueue)
			}))
		})
	}
	if c.cfg.Modify != nil {
		wg.Go(func() {
			workqueue.Run(ctx, c.cfg.Workers, c.cfg.ModifyQueue, c.pendingModify.Track(func(ctx context.Context, key string) error {
				return c.sync(ctx, key, c.cfg.Modify, c.cfg.ModifyQueue)
			}))
		})
	}
	wg.Wait()
	return nil
}

// DriverBack retries at once, instead of at the end of their backoff, the claims whose last expand or modify
// sync failed (most likely because the driver was away) or is running; csiconn.FollowRestarts calls it when
// the driver is back after a restart. An infeasible size or class is not among them: its sync succeeded and
// asked to be looked at again after --retry-interval-max, as the driver's answer was final.
func (c *Controller) DriverBack(ctx context.Context) {
	expand, modify := 0, 0
	if c.cfg.Expand != nil {
		expand = c.pendingExpand.Requeue(c.cfg.ExpandQueue.Add)
	}
	if c.cfg.Modify != nil {
		modify = c.pendingModify.Requeue(c.cfg.ModifyQueue.Add)
	}
	klog.FromContext(ctx).Info("CSI driver is back, retrying pending claims", "expand", expand, "modify", modify)
}

// Requeue queues the claim for expansion at once, for a Pod that stopped using it (--handle-volume-inuse-error).
func (c *Controller) Requeue(namespace, name string) {
	if c.cfg.Expand != nil {
		c.cfg.ExpandQueue.Add(namespace + "/" + name)
	}
}

func (c *Controller) sync(ctx context.Context, key string, h Handler, q workqueue.Queue[string]) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key this controller queued; retrying cannot help
	}
	pvc, err := c.pvcLister.PersistentVolumeClaims(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("persistentvolumeclaim %s: %w", key, err)
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("pvc", key))
	again, err := h.Sync(ctx, pvc)
	if err != nil {
		return err
	}
	if again > 0 {
		q.AddAfter(key, again)
	}
	return nil
}

func (c *Controller) enqueue(pvc *v1.PersistentVolumeClaim, expand, modify bool) {
	key := pvc.Namespace + "/" + pvc.Name
	if expand && c.cfg.Expand != nil {
		c.cfg.ExpandQueue.Add(key)
	}
	if modify && c.cfg.Modify != nil {
		c.cfg.ModifyQueue.Add(key)
	}
}

func (c *Controller) pvcAdded(obj any) {
	if pvc, ok := obj.(*v1.PersistentVolumeClaim); ok {
		c.enqueue(pvc, true, true)
	}
}

// pvcUpdated queues a claim for what changed: the request, the capacity (the node finished, the pre-resize
// annotation can go), binding, or a resync. The resizer's own status writes change none of these except the
// capacity at the end, so they do not re-run the work.
func (c *Controller) pvcUpdated(oldObj, newObj any) {
	old, ok1 := oldObj.(*v1.PersistentVolumeClaim)
	pvc, ok2 := newObj.(*v1.PersistentVolumeClaim)
	if !ok1 || !ok2 {
		return
	}
	if old.ResourceVersion == pvc.ResourceVersion || old.Status.Phase != pvc.Status.Phase || old.Spec.VolumeName != pvc.Spec.VolumeName {
		c.enqueue(pvc, true, true)
		return
	}
	oldReq, newReq := old.Spec.Resources.Requests[v1.ResourceStorage], pvc.Spec.Resources.Requests[v1.ResourceStorage]
	oldCap, newCap := old.Status.Capacity[v1.ResourceStorage], pvc.Status.Capacity[v1.ResourceStorage]
	expand := oldReq.Cmp(newReq) != 0 || oldCap.Cmp(newCap) != 0
	modify := deref(old.Spec.VolumeAttributesClassName) != deref(pvc.Spec.VolumeAttributesClassName)
	c.enqueue(pvc, expand, modify)
}

func (c *Controller) pvcDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pvc, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	key := pvc.Namespace + "/" + pvc.Name
	if c.cfg.Expand != nil {
		c.cfg.Expand.Forget(key, pvc)
		c.cfg.ExpandQueue.Forget(key)
	}
	if c.cfg.Modify != nil {
		c.cfg.Modify.Forget(key, pvc)
		c.cfg.ModifyQueue.Forget(key)
	}
}

// pvChanged queues the claim of a volume of this driver: a claim synced before its volume reached the cache
// is picked up here.
func (c *Controller) pvChanged(obj any) {
	pv, ok := obj.(*v1.PersistentVolume)
	if !ok || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != c.cfg.Driver || pv.Spec.ClaimRef == nil {
		return
	}
	pvc, err := c.pvcLister.PersistentVolumeClaims(pv.Spec.ClaimRef.Namespace).Get(pv.Spec.ClaimRef.Name)
	if err != nil || pvc.UID != pv.Spec.ClaimRef.UID {
		return
	}
	c.enqueue(pvc, true, true)
}

// classChanged queues the claims that ask for a class that was created or changed (a Pending modification
// can start).
func (c *Controller) classChanged(obj any) {
	vac, ok := obj.(*storagev1.VolumeAttributesClass)
	if !ok {
		return
	}
	claims, err := c.pvcIndex.ByIndex(classIndex, vac.Name)
	if err != nil {
		return
	}
	for _, o := range claims {
		if pvc, ok := o.(*v1.PersistentVolumeClaim); ok {
			c.enqueue(pvc, false, true)
		}
	}
}

func indexByClass(obj any) ([]string, error) {
	pvc, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok || pvc.Spec.VolumeAttributesClassName == nil || *pvc.Spec.VolumeAttributesClassName == "" {
		return nil, nil
	}
	return []string{*pvc.Spec.VolumeAttributesClassName}, nil
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
