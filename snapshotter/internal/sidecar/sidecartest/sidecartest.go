// Package sidecartest holds csi-snapshotter's test helpers: object builders, a fake CSI snapshotter and a
// compact view of a fake clientset's requests.
package sidecartest

import (
	"context"
	"sync"

	sharedtest "github.com/stowage-csi/stowage/shared/testutil"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// Driver is the CSI driver name the tests use.
const Driver = "csi.example.com"

// Content builds a dynamic VolumeSnapshotContent of Driver for volume handle vol, bound to VolumeSnapshot
// ns/snap with UID snapUID, of class "class", policy Delete, with the bound-protection finalizer.
func Content(name, vol string, opts ...func(*snapv1.VolumeSnapshotContent)) *snapv1.VolumeSnapshotContent {
	class := "class"
	c := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
			Finalizers: []string{snapapi.ContentBoundFinalizer}},
		Spec: snapv1.VolumeSnapshotContentSpec{
			Driver:                  Driver,
			DeletionPolicy:          snapv1.VolumeSnapshotContentDelete,
			VolumeSnapshotClassName: &class,
			Source:                  snapv1.VolumeSnapshotContentSource{VolumeHandle: &vol},
			VolumeSnapshotRef: corev1.ObjectReference{Kind: "VolumeSnapshot", Namespace: "ns", Name: "snap",
				UID: "1b6e3e2a-7c1d-4f5e-9a0b-123456789abc"},
		},
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Class builds the VolumeSnapshotClass "class" of Driver with params.
func Class(params map[string]string) *snapv1.VolumeSnapshotClass {
	return &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "class"}, Driver: Driver,
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete, Parameters: params}
}

// Actions lists a fake clientset's requests as "verb resource[/subresource] name".
func Actions(client sharedtest.Recorder) []string { return sharedtest.Actions(client) }

// FakeCSI records the calls and answers with what is set on it.
type FakeCSI struct {
	mu sync.Mutex
	// Snapshot answers CreateSnapshot and ListSnapshots; CreateErr, DeleteErr and ListErr fail them.
	Snapshot  *csi.Snapshot
	CreateErr error
	DeleteErr error
	ListErr   error
	Creates   []*csi.CreateSnapshotRequest
	Deletes   []*csi.DeleteSnapshotRequest
	Lists     []*csi.ListSnapshotsRequest
}

// CreateSnapshot records req.
func (f *FakeCSI) CreateSnapshot(_ context.Context, req *csi.CreateSnapshotRequest) (*csi.Snapshot, error) {
	return sharedtest.Answer(&f.mu, &f.Creates, req, &f.Snapshot, &f.CreateErr)
}

// DeleteSnapshot records req.
func (f *FakeCSI) DeleteSnapshot(_ context.Context, req *csi.DeleteSnapshotRequest) error {
	return sharedtest.Record(&f.mu, &f.Deletes, req, &f.DeleteErr)
}

// GetSnapshot records req.
func (f *FakeCSI) GetSnapshot(_ context.Context, req *csi.ListSnapshotsRequest) (*csi.Snapshot, error) {
	return sharedtest.Answer(&f.mu, &f.Lists, req, &f.Snapshot, &f.ListErr)
}
