// Package controller wires the VolumeSnapshotContent informer to csi-snapshotter's work queue and hands each
// queued content of its driver to the handler. It holds no snapshot logic.
package controller

import (
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapinformers "github.com/kubernetes-csi/external-snapshotter/client/v8/informers/externalversions/volumesnapshot/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/stowage-csi/stowage/shared/workqueue"
)

// Handler does the work for one content.
type Handler = Syncer[*snapv1.VolumeSnapshotContent]

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
	feed[*snapv1.VolumeSnapshotContent]
}

// New registers the event handlers on the informers.
func New(cfg Config) (*Controller, error) {
	c := &Controller{feed[*snapv1.VolumeSnapshotContent]{
		kind: "volumesnapshotcontent", queue: cfg.Queue, workers: cfg.Workers, handler: cfg.Handler,
		get: cfg.Contents.Lister().Get, shouldEnqueue: shouldEnqueue,
		ours: func(obj any) (*snapv1.VolumeSnapshotContent, bool) {
			content, ok := obj.(*snapv1.VolumeSnapshotContent)
			return content, ok && content.Spec.Driver == cfg.Driver
		},
	}}
	if err := c.register(cfg.Contents.Informer(), cfg.Classes.Informer().HasSynced); err != nil {
		return nil, err
	}
	return c, nil
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
