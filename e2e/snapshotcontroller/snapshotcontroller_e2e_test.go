//go:build e2e

package snapshotcontroller

import (
	"context"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// TestE2ESnapshotter runs Stowage's snapshot-controller and csi-snapshotter, each with its upstream manifest's
// args under its upstream RBAC, against kube-apiserver, kube-controller-manager and the mock driver.
func TestE2ESnapshotter(t *testing.T) {
	r := startRig(t, false)
	bins := stowageBinaries(t)
	drv := startDriver(t)
	r.startController(t, "snapshot-controller", bins.controller)
	r.startSnapshotter(t, "csi-snapshotter", bins.snapshotter, drv.Endpoint())
	ctx := context.Background()
	fx := func(t *testing.T) fixture { return fixture{t: t, ctx: ctx, r: r, drv: drv} }

	t.Run("dynamic snapshot, policy Delete", func(t *testing.T) { dynamicDelete(fx(t), "del") })
	t.Run("dynamic snapshot, policy Retain", func(t *testing.T) { dynamicRetain(fx(t), "retain") })
	t.Run("pre-provisioned content", func(t *testing.T) { preProvisioned(fx(t), "pre") })
	t.Run("deleted while CreateSnapshot is slow", func(t *testing.T) { deletedWhileCreating(fx(t), "slow") })

	checkControllerWrites(t, r)
}

// checkControllerWrites fails on any snapshot-controller write the API server refused: a 403 is a request
// outside upstream's role, a 409 on a VolumeSnapshot a write from a stale cache (the controller is its only
// writer here). Contents (csi-snapshotter) and claims (kube-controller-manager's binder) have other writers, so
// a 409 there can be a real race, which is re-read and retried; those are counted, not failed.
func checkControllerWrites(t *testing.T, r rig) {
	t.Helper()
	writes := e2erig.Filter(r.Audit.MustWrites(t), e2erig.ByUser(controllerUser))
	raced := 0
	for _, w := range writes {
		shared := strings.HasPrefix(w.Resource, "volumesnapshotcontents") || strings.HasPrefix(w.Resource, "persistentvolumeclaims")
		switch {
		case w.Code == 409 && shared:
			raced++
		case w.Code >= 300:
			t.Errorf("snapshot-controller write refused: %s", w)
		}
	}
	t.Logf("snapshot-controller: %d writes, %d of them 409s on objects another component was writing too", len(writes), raced)
}

// dynamicDelete takes a snapshot of a claim, waits for it to be ready (claim released, size from the driver),
// deletes it and checks the content and the driver's snapshot are gone.
func dynamicDelete(f fixture, name string) {
	f.t.Helper()
	claim := f.claim("data-" + name)
	vs := f.snapshot("snap-"+name, claim, f.class(snapv1.VolumeSnapshotContentDelete))
	vs = f.waitReady(vs.Name)
	if vs.Status.RestoreSize == nil || vs.Status.RestoreSize.Value() != volumeSizeBytes || vs.Status.CreationTime == nil {
		f.t.Errorf("status = %+v, want restoreSize %d and a creation time", vs.Status, volumeSizeBytes)
	}
	content := f.content(*vs.Status.BoundVolumeSnapshotContentName)
	if content.Name != "snapcontent-"+string(vs.UID) || content.Spec.VolumeSnapshotRef.UID != vs.UID || !slices.Contains(content.Finalizers, contentFinalizer) {
		f.t.Errorf("content %s: ref %+v, finalizers %v", content.Name, content.Spec.VolumeSnapshotRef, content.Finalizers)
	}
	handle := *content.Status.SnapshotHandle
	if !slices.Contains(f.driverSnapshots(), handle) {
		f.t.Fatalf("driver holds %v, not the content's snapshot %s", f.driverSnapshots(), handle)
	}
	f.waitClaimReleased(claim)
	f.deleteSnapshot(vs.Name)
	f.waitContentGone(content.Name)
	if slices.Contains(f.driverSnapshots(), handle) {
		f.t.Errorf("snapshot %s still in the driver after its VolumeSnapshot (policy Delete) was deleted", handle)
	}
}

// dynamicRetain deletes a ready snapshot whose class retains: the content and the driver's snapshot stay;
// deleting the content then keeps the driver's snapshot too.
func dynamicRetain(f fixture, name string) {
	f.t.Helper()
	claim := f.claim("data-" + name)
	vs := f.waitReady(f.snapshot("snap-"+name, claim, f.class(snapv1.VolumeSnapshotContentRetain)).Name)
	contentName := *vs.Status.BoundVolumeSnapshotContentName
	handle := *f.content(contentName).Status.SnapshotHandle
	f.deleteSnapshot(vs.Name)
	if c := f.content(contentName); c.DeletionTimestamp != nil {
		f.t.Errorf("retained content %s is being deleted", contentName)
	}
	if err := f.r.Snap.SnapshotV1().VolumeSnapshotContents().Delete(f.ctx, contentName, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
	f.waitContentGone(contentName)
	if !slices.Contains(f.driverSnapshots(), handle) {
		f.t.Errorf("retained snapshot %s was deleted from the driver", handle)
	}
}

// preProvisioned binds a VolumeSnapshot to a content made for a snapshot the driver already holds, then
// deletes it with policy Delete.
func preProvisioned(f fixture, name string) {
	f.t.Helper()
	snap := f.drv.AddSnapshot(name+"-existing", volumeSizeBytes)
	content := &snapv1.VolumeSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-content"},
		Spec: snapv1.VolumeSnapshotContentSpec{
			Driver: f.drv.Name(), DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
			Source:            snapv1.VolumeSnapshotContentSource{SnapshotHandle: &snap.ID},
			VolumeSnapshotRef: corev1.ObjectReference{Namespace: testNamespace, Name: name},
		},
	}
	if _, err := f.r.Snap.SnapshotV1().VolumeSnapshotContents().Create(f.ctx, content, metav1.CreateOptions{}); err != nil {
		f.t.Fatal(err)
	}
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec:       snapv1.VolumeSnapshotSpec{Source: snapv1.VolumeSnapshotSource{VolumeSnapshotContentName: &content.Name}},
	}
	created, err := f.r.Snap.SnapshotV1().VolumeSnapshots(testNamespace).Create(f.ctx, vs, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	f.waitReady(vs.Name)
	if uid := f.content(content.Name).Spec.VolumeSnapshotRef.UID; uid != created.UID {
		f.t.Errorf("content ref UID = %q, want the snapshot's %q", uid, created.UID)
	}
	f.deleteSnapshot(vs.Name)
	f.waitContentGone(content.Name)
	if slices.Contains(f.driverSnapshots(), snap.ID) {
		f.t.Errorf("pre-provisioned snapshot %s still in the driver after deletion with policy Delete", snap.ID)
	}
}

// deletedWhileCreating deletes a VolumeSnapshot while the driver sits in its CreateSnapshot; once the call
// returns, nothing of it is left: no VolumeSnapshot, no content, no snapshot of the claim's volume.
func deletedWhileCreating(f fixture, name string) {
	f.t.Helper()
	claim := f.claim("data-" + name)
	pvc, err := f.r.Client.CoreV1().PersistentVolumeClaims(testNamespace).Get(f.ctx, claim, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	pv, err := f.r.Client.CoreV1().PersistentVolumes().Get(f.ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		f.t.Fatal(err)
	}
	volumeID := pv.Spec.CSI.VolumeHandle
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	f.drv.SetBeforeCall(func(ctx context.Context, method string, _ any) error {
		if method != csimock.CreateSnapshot || calls.Add(1) != 1 {
			return nil
		}
		close(started)
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	defer f.drv.SetBeforeCall(nil)
	vs := f.snapshot("snap-"+name, claim, f.class(snapv1.VolumeSnapshotContentDelete))
	select {
	case <-started:
	case <-f.ctx.Done():
		f.t.Fatal(f.ctx.Err())
	}
	if err := f.r.Snap.SnapshotV1().VolumeSnapshots(testNamespace).Delete(f.ctx, vs.Name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatal(err)
	}
	close(release)
	f.waitContentGone("snapcontent-" + string(vs.UID))
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "no snapshot of "+volumeID+" in the driver", func(context.Context) (bool, error) {
		for _, s := range f.drv.Snapshots() {
			if s.SourceVolumeID == volumeID {
				return false, nil
			}
		}
		return true, nil
	})
	f.waitClaimReleased(claim)
}
