//go:build e2e

package snapshotcontroller

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// memberLabel is upstream's label on the member VolumeSnapshots of a VolumeGroupSnapshot.
const memberLabel = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotName"

// TestE2ESnapshotterGroups runs both Stowage binaries (CSIVolumeGroupSnapshot on, upstream RBAC) against the
// mock driver's GroupController: a VolumeGroupSnapshot selecting two claims gets its content, one group snapshot
// in the driver, two ready member VolumeSnapshots; deleting it removes the members, the content and the
// driver's group.
func TestE2ESnapshotterGroups(t *testing.T) {
	r := startRig(t, true)
	ctx := context.Background()
	bins := stowageBinaries(t)
	drv, err := csimock.Start(ctx, csimock.Options{Name: "group.csi.example.com", GroupSnapshots: true,
		ControllerCaps: []csi.ControllerServiceCapability_RPC_Type{
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	r.startController(t, "snapshot-controller", bins.controller)
	r.startSnapshotter(t, "csi-snapshotter", bins.snapshotter, drv.Endpoint(), "--feature-gates=CSIVolumeGroupSnapshot=true")
	f := fixture{t: t, ctx: ctx, r: r, drv: drv}

	for _, name := range []string{"db-a", "db-b"} {
		f.claim(name)
		pvc, err := r.Client.CoreV1().PersistentVolumeClaims(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pvc.Labels = map[string]string{"app": "db"}
		if _, err := r.Client.CoreV1().PersistentVolumeClaims(testNamespace).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	groups := r.Snap.GroupsnapshotV1()
	class := &groupv1.VolumeGroupSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: "group-default", Annotations: map[string]string{"groupsnapshot.storage.kubernetes.io/is-default-class": "true"}},
		Driver:     drv.Name(), DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
	}
	if _, err := groups.VolumeGroupSnapshotClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gs := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: testNamespace},
		Spec: groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}}},
	}
	if gs, err = groups.VolumeGroupSnapshots(testNamespace).Create(ctx, gs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e2erig.Eventually(t, ctx, waitTimeout, "volumegroupsnapshot db ready", func(ctx context.Context) (bool, error) {
		got, err := groups.VolumeGroupSnapshots(testNamespace).Get(ctx, gs.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		gs = got
		st := got.Status
		return st != nil && st.ReadyToUse != nil && *st.ReadyToUse && st.BoundVolumeGroupSnapshotContentName != nil, nil
	})
	if want := "groupsnapcontent-" + string(gs.UID); *gs.Status.BoundVolumeGroupSnapshotContentName != want ||
		gs.Spec.VolumeGroupSnapshotClassName == nil || *gs.Spec.VolumeGroupSnapshotClassName != class.Name {
		t.Errorf("group snapshot bound to %s with class %v, want %s and the default class", *gs.Status.BoundVolumeGroupSnapshotContentName,
			gs.Spec.VolumeGroupSnapshotClassName, want)
	}
	held := drv.GroupSnapshots()
	if len(held) != 1 || len(held[0].SnapshotIDs) != 2 {
		t.Fatalf("driver groups = %+v, want one of two snapshots", held)
	}
	selector := labels.SelectorFromSet(labels.Set{memberLabel: gs.Name}).String()
	e2erig.Eventually(t, ctx, waitTimeout, "two ready member VolumeSnapshots", func(ctx context.Context) (bool, error) {
		list, err := r.Snap.SnapshotV1().VolumeSnapshots(testNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil || len(list.Items) != 2 {
			return false, err
		}
		for _, vs := range list.Items {
			st := vs.Status
			if st == nil || st.ReadyToUse == nil || !*st.ReadyToUse || st.VolumeGroupSnapshotName == nil || *st.VolumeGroupSnapshotName != gs.Name {
				return false, nil
			}
			content := f.content(*st.BoundVolumeSnapshotContentName)
			if content.Status == nil || content.Status.SnapshotHandle == nil || !slices.Contains(held[0].SnapshotIDs, *content.Status.SnapshotHandle) {
				return false, fmt.Errorf("member %s's content %s has handle %v, not one of the group's %v", vs.Name, content.Name,
					content.Status, held[0].SnapshotIDs)
			}
		}
		return true, nil
	})

	if err := groups.VolumeGroupSnapshots(testNamespace).Delete(ctx, gs.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e2erig.Eventually(t, ctx, waitTimeout, "group snapshot, its content and members gone", func(ctx context.Context) (bool, error) {
		if _, err := groups.VolumeGroupSnapshots(testNamespace).Get(ctx, gs.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		if _, err := groups.VolumeGroupSnapshotContents().Get(ctx, *gs.Status.BoundVolumeGroupSnapshotContentName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, nil
		}
		list, err := r.Snap.SnapshotV1().VolumeSnapshots(testNamespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		return err == nil && len(list.Items) == 0, err
	})
	e2erig.Eventually(t, ctx, waitTimeout, "member contents gone", func(ctx context.Context) (bool, error) {
		list, err := r.Snap.SnapshotV1().VolumeSnapshotContents().List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 0, err
	})
	if len(drv.GroupSnapshots()) != 0 || len(drv.Snapshots()) != 0 {
		t.Errorf("after delete: driver groups %+v, snapshots %+v; want none", drv.GroupSnapshots(), drv.Snapshots())
	}
	checkControllerWrites(t, r)
}
