//go:build e2e

package cluster_test

import (
	"context"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
)

// TestE2ESnapshotCRDs installs the VolumeSnapshot CRDs twice (the second call updates what the first
// created) and then serves VolumeSnapshotClasses and VolumeSnapshot status writes through the typed client.
func TestE2ESnapshotCRDs(t *testing.T) {
	c := clustertest.Start(t)
	ctx := context.Background()
	for i := range 2 {
		if err := c.InstallSnapshotCRDs(ctx); err != nil {
			t.Fatalf("install %d: %v", i+1, err)
		}
	}
	snaps, err := snapclient.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	class := &snapv1.VolumeSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: "class"}, Driver: "mock.csi.stowage.io", DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
	}
	if _, err := snaps.SnapshotV1().VolumeSnapshotClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	content := "content-1"
	vs, err := snaps.SnapshotV1().VolumeSnapshots("default").Create(ctx, &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "snap"},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &content}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := true
	vs.Status = &snapv1.VolumeSnapshotStatus{BoundVolumeSnapshotContentName: &content, ReadyToUse: &ready}
	if _, err := snaps.SnapshotV1().VolumeSnapshots("default").UpdateStatus(ctx, vs, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := snaps.SnapshotV1().VolumeSnapshots("default").Get(ctx, "snap", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status == nil || got.Status.ReadyToUse == nil || !*got.Status.ReadyToUse || *got.Status.BoundVolumeSnapshotContentName != content {
		t.Errorf("VolumeSnapshot status after the status write: %+v", got.Status)
	}
}
