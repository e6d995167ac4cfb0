// Package testutil holds the attacher's test helpers: object builders, listers over fixed objects, a
// fake CSI publisher and a compact view of a fake clientset's actions.
package testutil

import (
	"context"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	sharedtest "github.com/stowage-csi/stowage/shared/testutil"
)

// Driver is the CSI driver name the tests use.
const Driver = "csi.example.com"

// VA builds a VolumeAttachment of Driver for PersistentVolume pv on node.
func VA(name, pv, node string, opts ...func(*storagev1.VolumeAttachment)) *storagev1.VolumeAttachment {
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1"},
		Spec: storagev1.VolumeAttachmentSpec{
			Attacher: Driver,
			NodeName: node,
			Source:   storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv},
		},
	}
	for _, o := range opts {
		o(va)
	}
	return va
}

// PV builds a CSI PersistentVolume of Driver with the given volume handle, RWO, filesystem mode.
func PV(name, handle string, opts ...func(*v1.PersistentVolume)) *v1.PersistentVolume {
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:            []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
			PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: Driver, VolumeHandle: handle}},
		},
	}
	for _, o := range opts {
		o(pv)
	}
	return pv
}

// CSINode builds the CSINode of node with Driver registered under nodeID.
func CSINode(node, nodeID string) *storagev1.CSINode {
	return &storagev1.CSINode{
		ObjectMeta: metav1.ObjectMeta{Name: node},
		Spec:       storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{Name: Driver, NodeID: nodeID}}},
	}
}

// Listers returns listers over exactly objs (PersistentVolumes, CSINodes and VolumeAttachments).
func Listers(objs ...any) (corelisters.PersistentVolumeLister, storagelisters.CSINodeLister, storagelisters.VolumeAttachmentLister) {
	pvs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	vas := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.PersistentVolume:
			_ = pvs.Add(o)
		case *storagev1.CSINode:
			_ = nodes.Add(o)
		case *storagev1.VolumeAttachment:
			_ = vas.Add(o)
		}
	}
	return corelisters.NewPersistentVolumeLister(pvs), storagelisters.NewCSINodeLister(nodes), storagelisters.NewVolumeAttachmentLister(vas)
}

// Actions lists a fake clientset's requests as "verb resource[/subresource] name".
func Actions(client *fake.Clientset) []string { return sharedtest.Actions(client) }

// FakeCSI is a Publisher that records its calls and answers with the errors and contexts set on it.
type FakeCSI struct {
	mu             sync.Mutex
	PublishContext map[string]string
	PublishErr     error
	UnpublishErr   error
	ListErr        error
	Published      map[string][]string
	Publishes      []*csi.ControllerPublishVolumeRequest
	Unpublishes    []*csi.ControllerUnpublishVolumeRequest
	Lists          int
}

// Publish records req.
func (f *FakeCSI) Publish(_ context.Context, req *csi.ControllerPublishVolumeRequest) (map[string]string, error) {
	return sharedtest.Answer(&f.mu, &f.Publishes, req, &f.PublishContext, &f.PublishErr)
}

// Unpublish records req.
func (f *FakeCSI) Unpublish(_ context.Context, req *csi.ControllerUnpublishVolumeRequest) error {
	return sharedtest.Record(&f.mu, &f.Unpublishes, req, &f.UnpublishErr)
}

// ListPublished returns Published.
func (f *FakeCSI) ListPublished(context.Context) (map[string][]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Lists++
	return f.Published, f.ListErr
}

// PublishCount is the number of ControllerPublish calls so far.
func (f *FakeCSI) PublishCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.Publishes)
}
