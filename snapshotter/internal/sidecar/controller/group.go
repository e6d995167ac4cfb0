package controller

import (
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	groupinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions/volumegroupsnapshot/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/stowage-csi/stowage/shared/workqueue"
)

// GroupHandler does the work for one VolumeGroupSnapshotContent.
type GroupHandler = Syncer[*groupv1.VolumeGroupSnapshotContent]

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
	feed[*groupv1.VolumeGroupSnapshotContent]
}

// NewGroup registers the event handlers on the informers.
func NewGroup(cfg GroupConfig) (*GroupController, error) {
	c := &GroupController{feed[*groupv1.VolumeGroupSnapshotContent]{
		kind: "volumegroupsnapshotcontent", queue: cfg.Queue, workers: cfg.Workers, handler: cfg.Handler,
		get: cfg.Contents.Lister().Get, shouldEnqueue: shouldEnqueueGroup,
		ours: func(obj any) (*groupv1.VolumeGroupSnapshotContent, bool) {
			gc, ok := obj.(*groupv1.VolumeGroupSnapshotContent)
			return gc, ok && gc.Spec.Driver == cfg.Driver
		},
	}}
	if err := c.register(cfg.Contents.Informer(), cfg.Classes.Informer().HasSynced); err != nil {
		return nil, err
	}
	return c, nil
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
