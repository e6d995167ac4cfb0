// Package controller is Stowage's snapshot-controller: it binds VolumeSnapshots to VolumeSnapshotContents
// (creating the content of a dynamic snapshot, checking the two-way reference of a pre-provisioned one), keeps
// the snapshot.storage.kubernetes.io finalizers on snapshots, contents and source claims, copies the content's
// status to the snapshot, and turns a snapshot's deletion into its content's. csi-snapshotter, beside each
// driver, does the CSI calls.
//
// Every write to a snapshot or content is one merge patch preconditioned on the object's resourceVersion (or a
// create, or a delete with a UID precondition), never a full-object Update; a claim's finalizer is an Update
// carrying the version it was read at, since upstream's role grants no patch on claims. A stale cache costs
// one 409 and one re-read, never upstream's "the object has been modified" retry storms.
package controller

import (
	"context"
	"fmt"
	"sync"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions/volumesnapshot/v1"
	snaplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/shared/workqueue"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/opmetrics"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// Queue names, upstream's.
const (
	SnapshotQueueName = "snapshot-controller-snapshot"
	ContentQueueName  = "snapshot-controller-content"
)

// bySourceClaim indexes VolumeSnapshots by the "namespace/name" of the claim they snapshot, so a claim's change
// (bound at last, or a finalizer to release) reaches exactly its snapshots.
const bySourceClaim = "sourceClaim"

// byClass indexes dynamic VolumeSnapshots by the class they name ("" for none), so a class that appears (or
// becomes a default) reaches the snapshots that wait for it instead of their retry backoff.
const byClass = "class"

// Config wires a Controller.
type Config struct {
	Snap      snapclient.Interface
	Kube      kubernetes.Interface
	Snapshots snapinformers.VolumeSnapshotInformer
	Contents  snapinformers.VolumeSnapshotContentInformer
	Classes   snapinformers.VolumeSnapshotClassInformer
	Claims    coreinformers.PersistentVolumeClaimInformer
	// Nodes feeds --enable-distributed-snapshotting; nil when it is off.
	Nodes         coreinformers.NodeInformer
	SnapshotQueue workqueue.Queue[string]
	ContentQueue  workqueue.Queue[string]
	Events        record.EventRecorder
	Metrics       *opmetrics.Manager
	Workers       int
	// PreventVolumeModeConversion records the source volume's mode in new contents (spec.sourceVolumeMode), so
	// the provisioner can refuse a restore that changes it.
	PreventVolumeModeConversion bool
	// DistributedSnapshotting labels a new content with the node of a node-local volume, for the csi-snapshotter
	// on that node.
	DistributedSnapshotting bool
	// Groups turns on group snapshot binding (CSIVolumeGroupSnapshot); nil leaves group objects alone.
	Groups *GroupConfig
}

// Controller runs the two queues.
type Controller struct {
	cfg       Config
	snapshots snaplisters.VolumeSnapshotLister
	contents  snaplisters.VolumeSnapshotContentLister
	classes   snaplisters.VolumeSnapshotClassLister
	claims    corelisters.PersistentVolumeClaimLister
	nodes     corelisters.NodeLister
	// byClaim is the snapshot informer's indexer, with the bySourceClaim, byClass and byGroup indexes.
	byClaim cache.Indexer
	synced  []cache.InformerSynced
	// snapshotsWritten and contentsWritten hold this controller's writes the informers have not shown yet.
	snapshotsWritten *ownwrites.Latest[*snapv1.VolumeSnapshot]
	contentsWritten  *ownwrites.Latest[*snapv1.VolumeSnapshotContent]
	// contentsDeleted holds the contents this controller deleted (by UID) that its informer still shows: a
	// sync of their snapshot before the informer catches up must not delete them again, which once the
	// content is gone is a refused write (404). Only its record of deletions is used.
	contentsDeleted *ownwrites.Latest[*snapv1.VolumeSnapshotContent]
	// groups is nil when group snapshots are off.
	groups *groups
}

// New registers the event handlers on the informers; call it before the informers start.
func New(cfg Config) (*Controller, error) {
	c := &Controller{
		cfg:       cfg,
		snapshots: cfg.Snapshots.Lister(),
		contents:  cfg.Contents.Lister(),
		classes:   cfg.Classes.Lister(),
		claims:    cfg.Claims.Lister(),
		byClaim:   cfg.Snapshots.Informer().GetIndexer(),

		snapshotsWritten: ownwrites.NewLatest[*snapv1.VolumeSnapshot](),
		contentsWritten:  ownwrites.NewLatest[*snapv1.VolumeSnapshotContent](),
		contentsDeleted:  ownwrites.NewLatest[*snapv1.VolumeSnapshotContent](),
	}
	if err := cfg.Snapshots.Informer().AddIndexers(cache.Indexers{bySourceClaim: sourceClaimKeys, byClass: classKeys, byGroup: groupKeys}); err != nil {
		return nil, fmt.Errorf("indexing VolumeSnapshots by source claim, class and group: %w", err)
	}
	regs := []struct {
		what     string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{"VolumeSnapshot", cfg.Snapshots.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.snapshotChanged, UpdateFunc: func(_, obj any) { c.snapshotChanged(obj) }, DeleteFunc: c.snapshotDeleted}},
		{"VolumeSnapshotContent", cfg.Contents.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.contentChanged, UpdateFunc: func(_, obj any) { c.contentChanged(obj) }, DeleteFunc: c.contentDeleted}},
		{"PersistentVolumeClaim", cfg.Claims.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.claimChanged, UpdateFunc: func(_, obj any) { c.claimChanged(obj) }, DeleteFunc: c.claimChanged}},
		{"VolumeSnapshotClass", cfg.Classes.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.classChanged, UpdateFunc: func(_, obj any) { c.classChanged(obj) }}},
	}
	for _, r := range regs {
		reg, err := r.informer.AddEventHandler(r.handler)
		if err != nil {
			return nil, fmt.Errorf("adding %s event handler: %w", r.what, err)
		}
		c.synced = append(c.synced, reg.HasSynced)
	}
	if cfg.Groups != nil {
		synced, err := c.newGroups(*cfg.Groups)
		if err != nil {
			return nil, err
		}
		c.synced = append(c.synced, synced...)
	}
	if cfg.Nodes != nil {
		c.nodes = cfg.Nodes.Lister()
		c.synced = append(c.synced, cfg.Nodes.Informer().HasSynced)
	}
	return c, nil
}

// Run waits for the caches, then runs the workers until ctx ends, and returns once they have finished what they
// were doing, so nothing of this leader still writes after it.
func (c *Controller) Run(ctx context.Context) error {
	if !cache.WaitForCacheSync(ctx.Done(), c.synced...) {
		return fmt.Errorf("waiting for informer caches: %w", ctx.Err())
	}
	klog.FromContext(ctx).Info("Caches synced, starting workers", "workers", c.cfg.Workers)
	var wg sync.WaitGroup
	wg.Go(func() { workqueue.Run(ctx, c.cfg.Workers, c.cfg.SnapshotQueue, c.syncSnapshotKey) })
	wg.Go(func() { workqueue.Run(ctx, c.cfg.Workers, c.cfg.ContentQueue, c.syncContentKey) })
	if c.groups != nil {
		wg.Go(func() { workqueue.Run(ctx, c.cfg.Workers, c.groups.cfg.SnapshotQueue, c.syncGroupSnapshotKey) })
		wg.Go(func() { workqueue.Run(ctx, c.cfg.Workers, c.groups.cfg.ContentQueue, c.syncGroupContentKey) })
	}
	<-ctx.Done()
	wg.Wait()
	return nil
}

func (c *Controller) syncSnapshotKey(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key this controller queued; retrying cannot help
	}
	vs, err := c.snapshots.VolumeSnapshots(ns).Get(name)
	if err != nil {
		if apierrors.IsNotFound(err) {
			c.snapshotsWritten.Forget(key)
		}
		return ignoreNotFound(err)
	}
	if c.snapshotsWritten.IsGone(key, vs) {
		return nil
	}
	vs = c.snapshotsWritten.Of(key, vs)
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("volumesnapshot", key))
	return c.syncSnapshot(ctx, vs)
}

func (c *Controller) syncContentKey(ctx context.Context, name string) error {
	return syncNamed(ctx, "volumesnapshotcontent", name, c.content, c.syncContent)
}

// syncNamed syncs the object named name, read with get, under a logger that names it as kind; an object that
// is gone needs nothing more.
func syncNamed[T any](ctx context.Context, kind, name string, get func(name string) (T, error), sync func(context.Context, T) error) error {
	obj, err := get(name)
	if err != nil {
		return ignoreNotFound(err)
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues(kind, name))
	return sync(ctx, obj)
}

func (c *Controller) snapshotChanged(obj any) {
	if vs, ok := obj.(*snapv1.VolumeSnapshot); ok {
		c.cfg.SnapshotQueue.Add(vs.Namespace + "/" + vs.Name)
	}
}

// snapshotDeleted ends the snapshot's deletion operation and hands its content to the content queue, whose sync
// may have waited for the snapshot to go.
func (c *Controller) snapshotDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	vs, ok := obj.(*snapv1.VolumeSnapshot)
	if !ok {
		return
	}
	c.snapshotsWritten.Forget(vs.Namespace + "/" + vs.Name)
	c.cfg.Metrics.Record(opmetrics.DeleteSnapshot, vs.UID, opmetrics.StatusSuccess, c.driverOf(vs))
	if vs.Status != nil && vs.Status.BoundVolumeSnapshotContentName != nil {
		c.cfg.ContentQueue.Add(*vs.Status.BoundVolumeSnapshotContentName)
	}
}

// contentChanged queues the content and the snapshot it names: the snapshot's status mirrors the content's, and
// a snapshot waiting for its content to go keeps its bound finalizer until then.
func (c *Controller) contentChanged(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	content, ok := obj.(*snapv1.VolumeSnapshotContent)
	if !ok {
		return
	}
	c.cfg.ContentQueue.Add(content.Name)
	if ref := content.Spec.VolumeSnapshotRef; ref.Name != "" && ref.Namespace != "" {
		c.cfg.SnapshotQueue.Add(ref.Namespace + "/" + ref.Name)
	}
}

func (c *Controller) contentDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if content, ok := obj.(*snapv1.VolumeSnapshotContent); ok {
		c.contentsWritten.Forget(content.Name)
		c.contentsDeleted.Forget(content.Name)
		c.contentChanged(content)
	}
}

// claimChanged queues the snapshots taken of the claim (waiting for it to bind, or holding its finalizer) and
// the snapshot it is restored from (whose deletion waits while the claim is Pending).
func (c *Controller) claimChanged(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pvc, ok := obj.(*v1.PersistentVolumeClaim)
	if !ok {
		return
	}
	snaps, _ := c.byClaim.ByIndex(bySourceClaim, pvc.Namespace+"/"+pvc.Name)
	for _, o := range snaps {
		c.snapshotChanged(o)
	}
	if ds := pvc.Spec.DataSource; isSnapshotSource(ds) {
		c.cfg.SnapshotQueue.Add(pvc.Namespace + "/" + ds.Name)
	}
}

// classChanged queues the dynamic snapshots naming the class and, for a default class, those naming none.
func (c *Controller) classChanged(obj any) {
	class, ok := obj.(*snapv1.VolumeSnapshotClass)
	if !ok {
		return
	}
	keys := []string{class.Name}
	if class.Annotations[snapapi.AnnDefaultClass] == "true" {
		keys = append(keys, "")
	}
	for _, k := range keys {
		snaps, _ := c.byClaim.ByIndex(byClass, k)
		for _, o := range snaps {
			c.snapshotChanged(o)
		}
	}
}

// classKeys is the byClass index function: only snapshots not bound yet can be waiting for a class.
func classKeys(obj any) ([]string, error) {
	vs, ok := obj.(*snapv1.VolumeSnapshot)
	if !ok || vs.Spec.Source.PersistentVolumeClaimName == nil || isBound(vs) {
		return nil, nil
	}
	if vs.Spec.VolumeSnapshotClassName == nil {
		return []string{""}, nil
	}
	return []string{*vs.Spec.VolumeSnapshotClassName}, nil
}

// sourceClaimKeys is the bySourceClaim index function.
func sourceClaimKeys(obj any) ([]string, error) {
	vs, ok := obj.(*snapv1.VolumeSnapshot)
	if !ok || vs.Spec.Source.PersistentVolumeClaimName == nil {
		return nil, nil
	}
	return []string{vs.Namespace + "/" + *vs.Spec.Source.PersistentVolumeClaimName}, nil
}

// isSnapshotSource reports whether a claim's dataSource names a VolumeSnapshot.
func isSnapshotSource(ds *v1.TypedLocalObjectReference) bool {
	return ds != nil && ds.Kind == "VolumeSnapshot" && ds.APIGroup != nil && *ds.APIGroup == snapv1.GroupName
}
