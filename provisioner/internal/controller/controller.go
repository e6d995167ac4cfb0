// Package controller feeds the provisioner from informers: a claim queue (PVC -> CreateVolume, or clean-up of a
// claim deleted mid-way), a volume queue (released PV -> DeleteVolume) and a clone-source queue (drops the
// cloning-protection finalizer). Each queue has its own name, so their metrics never collide as upstream's do.
package controller

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/provisioner/internal/provision"
	"github.com/stowage-csi/stowage/shared/csiconn"
	"github.com/stowage-csi/stowage/shared/workqueue"
)

// Syncer is what the controller drives; *provision.Provisioner implements it.
type Syncer interface {
	IsOurs(*v1.PersistentVolumeClaim) bool
	// ClaimSettled tells whether SyncClaim has nothing to do for this copy of a claim of ours; the handlers leave
	// such claims out of the claim queue (deleted claims are always queued, so ForgetClaim runs).
	ClaimSettled(*v1.PersistentVolumeClaim) bool
	IsOursPV(*v1.PersistentVolume) bool
	// VolumeSettled tells whether SyncVolume has nothing to do for this copy of a PV of ours: the handlers leave
	// such PVs out of the volume queue, so the initial LIST of a cluster's bound PVs costs no queue entry, deep
	// copy or sync each.
	VolumeSettled(*v1.PersistentVolume) bool
	SyncClaim(context.Context, *v1.PersistentVolumeClaim) error
	// SyncGoneClaim finishes what a claim the cache no longer has left behind (a volume being made for it).
	SyncGoneClaim(ctx context.Context, namespace, name string) error
	SyncVolume(context.Context, *v1.PersistentVolume) error
	SyncCloneSource(ctx context.Context, namespace, name string) error
	// ForgetClaim and Forget drop what the Syncer remembers about a claim or PV; the controller calls them from
	// the worker owning the key, once the lister no longer has the object.
	ForgetClaim(namespace, name string)
	Forget(name string)
}

// Informers are the shared informers the controller registers handlers on.
type Informers struct {
	Claims      cache.SharedIndexInformer
	Volumes     cache.SharedIndexInformer
	Classes     cache.SharedIndexInformer
	Attachments cache.SharedIndexInformer
}

// Config sizes the workers and the slow retry.
type Config struct {
	Workers      int
	CloneWorkers int
	// SlowRetry is the wait after errors that retrying soon will not fix (--retry-interval-max).
	SlowRetry time.Duration
}

// Controller connects informers, queues and the Syncer.
type Controller struct {
	cfg        Config
	s          Syncer
	claims     corelisters.PersistentVolumeClaimLister
	volumes    corelisters.PersistentVolumeLister
	claimIndex cache.Indexer
	claimQ     workqueue.Queue[string]
	volumeQ    workqueue.Queue[string]
	cloneQ     workqueue.Queue[string]
	// pendingClaims and pendingVolumes are the claims and volumes whose last sync failed or is running (the
	// ones with CSI calls: CreateVolume, DeleteVolume); DriverBack retries them.
	pendingClaims, pendingVolumes *csiconn.Pending[string]
}

// Queues are the controller's three work queues, made by the caller (shared/workqueue.New) so their metrics
// land in the process registry: "claims", "volumes", "clone-sources".
type Queues struct {
	Claims, Volumes, CloneSources workqueue.Queue[string]
}

// New registers the event handlers. Run starts the workers.
func New(cfg Config, s Syncer, inf Informers, q Queues) (*Controller, error) {
	c := &Controller{
		cfg: cfg, s: s,
		claims:  corelisters.NewPersistentVolumeClaimLister(inf.Claims.GetIndexer()),
		volumes: corelisters.NewPersistentVolumeLister(inf.Volumes.GetIndexer()),
		claimQ:  q.Claims, volumeQ: q.Volumes, cloneQ: q.CloneSources,
		pendingClaims: csiconn.NewPending[string](), pendingVolumes: csiconn.NewPending[string](),
	}
	// Clones wait for their source to be bound; this index finds them when it is, instead of their backoff.
	if err := inf.Claims.AddIndexers(cache.Indexers{cloneSourceIndex: cloneSourceKeys}); err != nil {
		return nil, fmt.Errorf("add clone source index: %w", err)
	}
	c.claimIndex = inf.Claims.GetIndexer()
	handlers := []struct {
		inf cache.SharedIndexInformer
		h   cache.ResourceEventHandlerFuncs
	}{
		{inf.Claims, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(o any) { c.claimChanged(o) },
			UpdateFunc: func(_, o any) { c.claimChanged(o) },
			DeleteFunc: c.claimDeleted,
		}},
		{inf.Volumes, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.volumeChanged,
			UpdateFunc: func(_, o any) { c.volumeChanged(o) },
			DeleteFunc: c.volumeDeleted,
		}},
		{inf.Classes, cache.ResourceEventHandlerFuncs{
			AddFunc:    c.classChanged,
			UpdateFunc: func(_, o any) { c.classChanged(o) },
		}},
	}
	if inf.Attachments != nil {
		handlers = append(handlers, struct {
			inf cache.SharedIndexInformer
			h   cache.ResourceEventHandlerFuncs
		}{inf.Attachments, cache.ResourceEventHandlerFuncs{DeleteFunc: c.attachmentDeleted}})
	}
	for _, h := range handlers {
		if _, err := h.inf.AddEventHandler(h.h); err != nil {
			return nil, fmt.Errorf("add event handler: %w", err)
		}
	}
	return c, nil
}

// Run runs the workers until ctx ends; items in progress finish first (shared/workqueue drains them).
func (c *Controller) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { workqueue.Run(ctx, c.cfg.Workers, c.claimQ, c.pendingClaims.Track(c.syncClaim)) })
	wg.Go(func() { workqueue.Run(ctx, c.cfg.Workers, c.volumeQ, c.pendingVolumes.Track(c.syncVolume)) })
	wg.Go(func() { workqueue.Run(ctx, c.cfg.CloneWorkers, c.cloneQ, c.syncCloneSource) })
	wg.Wait()
}

// EnqueueClaims queues the claims namespace/name of keys: those of the journal a previous process left,
// which are finished or undone like any other claim.
func (c *Controller) EnqueueClaims(keys []string) {
	for _, k := range keys {
		c.claimQ.Add(k)
	}
}

// DriverBack retries at once, instead of at the end of their backoff, the claims and volumes whose last sync
// failed (most likely because the driver was away) or is running; csiconn.FollowRestarts calls it when the
// driver is back after a restart.
func (c *Controller) DriverBack(ctx context.Context) {
	claims := c.pendingClaims.Requeue(c.claimQ.Add)
	volumes := c.pendingVolumes.Requeue(c.volumeQ.Add)
	klog.FromContext(ctx).Info("CSI driver is back, retrying pending claims and volumes", "claims", claims, "volumes", volumes)
}

func (c *Controller) syncClaim(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	claim, err := c.claims.PersistentVolumeClaims(ns).Get(name)
	if apierrors.IsNotFound(err) {
		// A volume being made for the claim when it went is undone here, by the worker owning the key: no other
		// worker is making it any more.
		if err := c.s.SyncGoneClaim(ctx, ns, name); err != nil {
			return c.slowly(ctx, c.claimQ, key, err)
		}
		// Forgotten here, not in the delete handler: this worker owns the key, so no other worker holds a copy of
		// the claim, and the cache never serves one again.
		c.s.ForgetClaim(ns, name)
		return nil
	}
	if err != nil {
		return err
	}
	return c.slowly(ctx, c.claimQ, key, c.s.SyncClaim(ctx, claim.DeepCopy()))
}

func (c *Controller) syncVolume(ctx context.Context, name string) error {
	pv, err := c.volumes.Get(name)
	if apierrors.IsNotFound(err) {
		// See syncClaim: only the worker owning the key may forget, once the cache has no copy left to hand out.
		c.s.Forget(name)
		return nil
	}
	if err != nil {
		return err
	}
	return c.slowly(ctx, c.volumeQ, name, c.s.SyncVolume(ctx, pv.DeepCopy()))
}

func (c *Controller) syncCloneSource(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	return c.s.SyncCloneSource(ctx, ns, name)
}

// slowly turns a slow error into one delayed retry at SlowRetry (and forgets the backoff), so bad parameters
// cost one attempt per interval instead of an exponential series that starts at one second.
func (c *Controller) slowly(ctx context.Context, q workqueue.Queue[string], key string, err error) error {
	if err == nil || !provision.IsSlow(err) {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Retrying later", "key", key, "after", c.cfg.SlowRetry, "err", err)
	q.AddAfter(key, c.cfg.SlowRetry)
	return nil
}

func (c *Controller) claimChanged(o any) {
	claim, ok := o.(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	if c.s.IsOurs(claim) && !c.s.ClaimSettled(claim) {
		if key, err := cache.MetaNamespaceKeyFunc(claim); err == nil {
			c.claimQ.Add(key)
		}
	}
	c.enqueueCloneSources(claim)
	if claim.Status.Phase == v1.ClaimBound {
		c.enqueueWaitingClones(claim)
	}
}

const cloneSourceIndex = "cloneSource"

// cloneSourceKeys indexes a claim by the "namespace/name" of the PVC it clones.
func cloneSourceKeys(o any) ([]string, error) {
	claim, ok := o.(*v1.PersistentVolumeClaim)
	if !ok {
		return nil, nil
	}
	if name := cloneSourceName(claim); name != "" {
		return []string{claim.Namespace + "/" + name}, nil
	}
	return nil, nil
}

// cloneSourceName is the PVC a claim clones, or "".
func cloneSourceName(claim *v1.PersistentVolumeClaim) string {
	if ref := claim.Spec.DataSourceRef; ref != nil {
		if ref.Kind == "PersistentVolumeClaim" && (ref.APIGroup == nil || *ref.APIGroup == "") &&
			(ref.Namespace == nil || *ref.Namespace == claim.Namespace) {
			return ref.Name
		}
		return ""
	}
	if ds := claim.Spec.DataSource; ds != nil && ds.Kind == "PersistentVolumeClaim" && (ds.APIGroup == nil || *ds.APIGroup == "") {
		return ds.Name
	}
	return ""
}

// enqueueWaitingClones queues the unbound clones of a claim that just got bound.
func (c *Controller) enqueueWaitingClones(source *v1.PersistentVolumeClaim) {
	clones, err := c.claimIndex.ByIndex(cloneSourceIndex, source.Namespace+"/"+source.Name)
	if err != nil {
		return
	}
	for _, o := range clones {
		if clone, ok := o.(*v1.PersistentVolumeClaim); ok && clone.Spec.VolumeName == "" && c.s.IsOurs(clone) {
			c.claimQ.Add(clone.Namespace + "/" + clone.Name)
		}
	}
}

func (c *Controller) claimDeleted(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	claim, ok := o.(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	// The worker forgets the claim (syncClaim). Forgetting here would race with a worker that took the claim's
	// last cached copy just before the cache dropped it: that copy, with the record gone, repeats the clean-up of
	// a claim deleted during provisioning (CreateVolume again, DeleteVolume again).
	if key, err := cache.MetaNamespaceKeyFunc(claim); err == nil {
		c.claimQ.Add(key)
	}
	c.enqueueCloneSources(claim)
}

// enqueueCloneSources queues the clone source a claim names, and the claim itself if it is protected as one.
func (c *Controller) enqueueCloneSources(claim *v1.PersistentVolumeClaim) {
	for _, f := range claim.Finalizers {
		if f == provision.CloneFinalizer {
			c.cloneQ.Add(claim.Namespace + "/" + claim.Name)
		}
	}
	if name := cloneSourceName(claim); name != "" {
		c.cloneQ.Add(claim.Namespace + "/" + name)
	}
}

func (c *Controller) volumeChanged(o any) {
	pv, ok := o.(*v1.PersistentVolume)
	if ok && c.s.IsOursPV(pv) && !c.s.VolumeSettled(pv) {
		c.volumeQ.Add(pv.Name)
	}
}

func (c *Controller) volumeDeleted(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	// The worker forgets the PV (syncVolume). Forgetting here would race with a worker that took the PV's last
	// cached copy (Released, finalizer on) just before the cache dropped it: with the record gone, that copy
	// calls DeleteVolume a second time.
	if pv, ok := o.(*v1.PersistentVolume); ok {
		c.volumeQ.Add(pv.Name)
	}
}

// classChanged requeues the pending claims of a class that appeared or changed, instead of leaving them to
// their backoff.
func (c *Controller) classChanged(o any) {
	class, ok := o.(*storagev1.StorageClass)
	if !ok {
		return
	}
	claims, err := c.claims.List(labels.Everything())
	if err != nil {
		return
	}
	for _, claim := range claims {
		if claim.Spec.VolumeName == "" && provision.ClaimClass(claim) == class.Name && c.s.IsOurs(claim) {
			c.claimQ.Add(claim.Namespace + "/" + claim.Name)
		}
	}
}

// attachmentDeleted requeues the PV a VolumeAttachment held back from deletion.
func (c *Controller) attachmentDeleted(o any) {
	if t, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = t.Obj
	}
	va, ok := o.(*storagev1.VolumeAttachment)
	if ok && va.Spec.Source.PersistentVolumeName != nil {
		c.volumeQ.Add(*va.Spec.Source.PersistentVolumeName)
	}
}
