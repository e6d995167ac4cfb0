package controller

import (
	"context"
	"fmt"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	groupinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions/volumegroupsnapshot/v1"
	grouplisters "github.com/kubernetes-csi/external-snapshotter/client/v8/listers/volumegroupsnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/shared/workqueue"
	"github.com/stowage-csi/stowage/snapshotter/internal/controller/opmetrics"
)

// Group queue names, upstream's.
const (
	GroupSnapshotQueueName = "snapshot-controller-group-snapshot"
	GroupContentQueueName  = "snapshot-controller-group-content"
)

// GroupConfig wires group snapshot binding (the CSIVolumeGroupSnapshot gate); Config.Groups is nil when the gate
// is off or the group CRDs are not served.
type GroupConfig struct {
	Snapshots     groupinformers.VolumeGroupSnapshotInformer
	Contents      groupinformers.VolumeGroupSnapshotContentInformer
	Classes       groupinformers.VolumeGroupSnapshotClassInformer
	SnapshotQueue workqueue.Queue[string]
	ContentQueue  workqueue.Queue[string]
}

// groups is the group half of the controller: VolumeGroupSnapshot <-> VolumeGroupSnapshotContent binding and
// the member VolumeSnapshots and contents made from a ready group.
type groups struct {
	cfg       GroupConfig
	snapshots grouplisters.VolumeGroupSnapshotLister
	contents  grouplisters.VolumeGroupSnapshotContentLister
	classes   grouplisters.VolumeGroupSnapshotClassLister
	// contentsWritten holds this controller's group content writes its informer has not shown yet.
	contentsWritten *ownwrites.Latest[*groupv1.VolumeGroupSnapshotContent]
}

// newGroups registers the group event handlers and returns what Run must wait for.
func (c *Controller) newGroups(cfg GroupConfig) ([]cache.InformerSynced, error) {
	c.groups = &groups{
		cfg: cfg, snapshots: cfg.Snapshots.Lister(), contents: cfg.Contents.Lister(), classes: cfg.Classes.Lister(),
		contentsWritten: ownwrites.NewLatest[*groupv1.VolumeGroupSnapshotContent](),
	}
	regs := []struct {
		what     string
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandler
	}{
		{"VolumeGroupSnapshot", cfg.Snapshots.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.groupSnapshotChanged, UpdateFunc: func(_, obj any) { c.groupSnapshotChanged(obj) }, DeleteFunc: c.groupSnapshotDeleted}},
		{"VolumeGroupSnapshotContent", cfg.Contents.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc: c.groupContentChanged, UpdateFunc: func(_, obj any) { c.groupContentChanged(obj) }, DeleteFunc: c.groupContentDeleted}},
	}
	synced := []cache.InformerSynced{cfg.Classes.Informer().HasSynced}
	for _, r := range regs {
		reg, err := r.informer.AddEventHandler(r.handler)
		if err != nil {
			return nil, fmt.Errorf("adding %s event handler: %w", r.what, err)
		}
		synced = append(synced, reg.HasSynced)
	}
	return synced, nil
}

func (c *Controller) syncGroupSnapshotKey(ctx context.Context, key string) error {
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil // not a key this controller queued
	}
	gs, err := c.groups.snapshots.VolumeGroupSnapshots(ns).Get(name)
	if err != nil {
		return ignoreNotFound(err)
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("volumegroupsnapshot", key))
	return c.syncGroupSnapshot(ctx, gs)
}

func (c *Controller) syncGroupContentKey(ctx context.Context, name string) error {
	return syncNamed(ctx, "volumegroupsnapshotcontent", name, c.groupContent, c.syncGroupContent)
}

func (c *Controller) groupSnapshotChanged(obj any) {
	if gs, ok := obj.(*groupv1.VolumeGroupSnapshot); ok {
		c.groups.cfg.SnapshotQueue.Add(gs.Namespace + "/" + gs.Name)
	}
}

// groupSnapshotDeleted hands the bound group content to its queue, and the members (whose deletion waited for
// the group to go) to theirs.
func (c *Controller) groupSnapshotDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	gs, ok := obj.(*groupv1.VolumeGroupSnapshot)
	if !ok {
		return
	}
	c.cfg.Metrics.Record(opmetrics.DeleteGroupSnapshot, gs.UID, opmetrics.StatusSuccess, c.groupDriverOf(gs, nil))
	if gs.Status != nil && gs.Status.BoundVolumeGroupSnapshotContentName != nil {
		c.groups.cfg.ContentQueue.Add(*gs.Status.BoundVolumeGroupSnapshotContentName)
	}
	members, _ := c.groupMembers(gs)
	for _, vs := range members {
		c.snapshotChanged(vs)
	}
}

// groupContentChanged queues the group content and the group snapshot it names, whose status mirrors it.
func (c *Controller) groupContentChanged(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	gc, ok := obj.(*groupv1.VolumeGroupSnapshotContent)
	if !ok {
		return
	}
	c.groups.cfg.ContentQueue.Add(gc.Name)
	if ref := gc.Spec.VolumeGroupSnapshotRef; ref.Name != "" && ref.Namespace != "" {
		c.groups.cfg.SnapshotQueue.Add(ref.Namespace + "/" + ref.Name)
	}
}

func (c *Controller) groupContentDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if gc, ok := obj.(*groupv1.VolumeGroupSnapshotContent); ok {
		c.groups.contentsWritten.Forget(gc.Name)
		c.groupContentChanged(gc)
	}
}

// groupContent is the group content name from the cache, or this controller's newer write of it.
func (c *Controller) groupContent(name string) (*groupv1.VolumeGroupSnapshotContent, error) {
	gc, err := c.groups.contents.Get(name)
	if apierrors.IsNotFound(err) {
		if created, ok := c.groups.contentsWritten.Get(name); ok {
			return created, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return c.groups.contentsWritten.Of(name, gc), nil
}

func (c *Controller) groupSnapshotPatch(ns string) patch.Func[*groupv1.VolumeGroupSnapshot] {
	return c.cfg.Snap.GroupsnapshotV1().VolumeGroupSnapshots(ns).Patch
}

func (c *Controller) groupContentPatch() patch.Func[*groupv1.VolumeGroupSnapshotContent] {
	return func(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, sub ...string) (*groupv1.VolumeGroupSnapshotContent, error) {
		gc, err := c.cfg.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Patch(ctx, name, pt, data, opts, sub...)
		if err == nil {
			c.groups.contentsWritten.Wrote(name, gc)
		}
		return gc, err
	}
}

func (c *Controller) getGroupSnapshot(gs *groupv1.VolumeGroupSnapshot) func(context.Context) (*groupv1.VolumeGroupSnapshot, error) {
	return func(ctx context.Context) (*groupv1.VolumeGroupSnapshot, error) {
		return c.cfg.Snap.GroupsnapshotV1().VolumeGroupSnapshots(gs.Namespace).Get(ctx, gs.Name, metav1.GetOptions{})
	}
}

func (c *Controller) getGroupContent(gc *groupv1.VolumeGroupSnapshotContent) func(context.Context) (*groupv1.VolumeGroupSnapshotContent, error) {
	return func(ctx context.Context) (*groupv1.VolumeGroupSnapshotContent, error) {
		return c.cfg.Snap.GroupsnapshotV1().VolumeGroupSnapshotContents().Get(ctx, gc.Name, metav1.GetOptions{})
	}
}

// dynamicGroupContentName is the name upstream gives a dynamic group snapshot's content.
func dynamicGroupContentName(gs *groupv1.VolumeGroupSnapshot) string {
	return "groupsnapcontent-" + string(gs.UID)
}

func isGroupBound(gs *groupv1.VolumeGroupSnapshot) bool {
	return gs.Status != nil && gs.Status.BoundVolumeGroupSnapshotContentName != nil && *gs.Status.BoundVolumeGroupSnapshotContentName != ""
}

func isGroupReady(gs *groupv1.VolumeGroupSnapshot) bool {
	return gs.Status != nil && gs.Status.ReadyToUse != nil && *gs.Status.ReadyToUse
}

// groupRefersTo reports whether gc's volumeGroupSnapshotRef names gs exactly, UID included.
func groupRefersTo(gc *groupv1.VolumeGroupSnapshotContent, gs *groupv1.VolumeGroupSnapshot) bool {
	ref := gc.Spec.VolumeGroupSnapshotRef
	return ref.Name == gs.Name && ref.Namespace == gs.Namespace && ref.UID == gs.UID
}
