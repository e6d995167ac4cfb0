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
	"k8s.io/apimachinery/pkg/types"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// groupHandleAnnotation is upstream's annotation on a member VolumeSnapshotContent, naming its group's handle;
// csi-snapshotter reads it to leave the member to the group call.
const groupHandleAnnotation = "groupsnapshot.storage.k8s.io/volumeGroupSnapshotHandle"

// TestE2ESnapshotterGroups runs both Stowage binaries (CSIVolumeGroupSnapshot on, upstream RBAC) against the
// mock driver's GroupController through groupLifecycle, then checks the controller's writes.
func TestE2ESnapshotterGroups(t *testing.T) {
	r := startRig(t, true)
	bins := stowageBinaries(t)
	drv := startGroupDriver(t, "group.csi.example.com")
	r.startController(t, "snapshot-controller", bins.controller)
	r.startSnapshotter(t, "csi-snapshotter", bins.snapshotter, drv.Endpoint(), "--feature-gates=CSIVolumeGroupSnapshot=true")
	groupLifecycle(fixture{t: t, ctx: context.Background(), r: r, drv: drv}, "db")
	checkControllerWrites(t, r)
}

// startGroupDriver starts a mock driver named name that takes snapshots and group snapshots, stopped when the
// test ends.
func startGroupDriver(t testing.TB, name string) *csimock.Driver {
	t.Helper()
	drv, err := csimock.Start(context.Background(), csimock.Options{Name: name, GroupSnapshots: true,
		ControllerCaps: []csi.ControllerServiceCapability_RPC_Type{
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
			csi.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drv.Stop)
	return drv
}

// groupLifecycle takes a VolumeGroupSnapshot named name of two claims labelled app=name, with a default group
// class of f's driver: the group gets its content and one group snapshot in the driver, and two member
// VolumeSnapshots (owned by the group, as upstream marks members) become ready with the driver's restore size,
// bound to contents that carry the group's handle under upstream's annotation. Deleting the group removes the
// members, their contents, the group content and the driver's group and snapshots; no member was ever
// snapshotted on its own (CreateSnapshot), which is what the annotation is for.
func groupLifecycle(f fixture, name string) {
	t, ctx, r, drv := f.t, f.ctx, f.r, f.drv
	t.Helper()
	for _, c := range []string{name + "-a", name + "-b"} {
		f.claim(c)
		pvc, err := r.Client.CoreV1().PersistentVolumeClaims(testNamespace).Get(ctx, c, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		pvc.Labels = map[string]string{"app": name}
		if _, err := r.Client.CoreV1().PersistentVolumeClaims(testNamespace).Update(ctx, pvc, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	groups := r.Snap.GroupsnapshotV1()
	class := &groupv1.VolumeGroupSnapshotClass{
		ObjectMeta: metav1.ObjectMeta{Name: "group-" + name, Annotations: map[string]string{"groupsnapshot.storage.kubernetes.io/is-default-class": "true"}},
		Driver:     drv.Name(), DeletionPolicy: snapv1.VolumeSnapshotContentDelete,
	}
	if _, err := groups.VolumeGroupSnapshotClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	gs := &groupv1.VolumeGroupSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec: groupv1.VolumeGroupSnapshotSpec{Source: groupv1.VolumeGroupSnapshotSource{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}}},
	}
	gs, err := groups.VolumeGroupSnapshots(testNamespace).Create(ctx, gs, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e2erig.Eventually(t, ctx, waitTimeout, "volumegroupsnapshot "+name+" ready", func(ctx context.Context) (bool, error) {
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
	var memberContents []string
	e2erig.Eventually(t, ctx, waitTimeout, "two ready member VolumeSnapshots", func(ctx context.Context) (bool, error) {
		members, err := groupMembers(ctx, r, gs.UID)
		if err != nil || len(members) != 2 {
			return false, err
		}
		memberContents = memberContents[:0]
		for _, vs := range members {
			st := vs.Status
			if st == nil || st.ReadyToUse == nil || !*st.ReadyToUse || st.RestoreSize == nil || st.VolumeGroupSnapshotName == nil {
				return false, nil
			}
			if *st.VolumeGroupSnapshotName != gs.Name || st.RestoreSize.Value() != volumeSizeBytes {
				return false, fmt.Errorf("member %s: group %s, restore size %s; want %s, %d bytes", vs.Name, *st.VolumeGroupSnapshotName,
					st.RestoreSize, gs.Name, volumeSizeBytes)
			}
			content := f.content(*st.BoundVolumeSnapshotContentName)
			cst := content.Status
			if cst == nil || cst.SnapshotHandle == nil || !slices.Contains(held[0].SnapshotIDs, *cst.SnapshotHandle) ||
				cst.VolumeGroupSnapshotHandle == nil || *cst.VolumeGroupSnapshotHandle != held[0].ID {
				return false, fmt.Errorf("member %s's content %s has status %+v, want one of the snapshots %v of group %s", vs.Name, content.Name,
					cst, held[0].SnapshotIDs, held[0].ID)
			}
			if got := content.Annotations[groupHandleAnnotation]; got != held[0].ID {
				return false, fmt.Errorf("member content %s: annotation %s = %q, want the group's handle %s", content.Name, groupHandleAnnotation, got, held[0].ID)
			}
			memberContents = append(memberContents, content.Name)
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
		members, err := groupMembers(ctx, r, gs.UID)
		return err == nil && len(members) == 0, err
	})
	for _, name := range memberContents {
		e2erig.Eventually(t, ctx, waitTimeout, "member content "+name+" gone", func(ctx context.Context) (bool, error) {
			_, err := r.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	}
	if len(drv.GroupSnapshots()) != 0 || len(drv.Snapshots()) != 0 {
		t.Errorf("after delete: driver groups %+v, snapshots %+v; want none", drv.GroupSnapshots(), drv.Snapshots())
	}
	if n := drv.Calls(csimock.CreateSnapshot); n != 0 {
		t.Errorf("CreateSnapshot called %d times; every member snapshot is the group call's", n)
	}
}

// groupMembers lists the VolumeSnapshots the group with UID owns: upstream's mark of a member.
func groupMembers(ctx context.Context, r rig, group types.UID) ([]snapv1.VolumeSnapshot, error) {
	list, err := r.Snap.SnapshotV1().VolumeSnapshots(testNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []snapv1.VolumeSnapshot
	for _, vs := range list.Items {
		if slices.ContainsFunc(vs.OwnerReferences, func(o metav1.OwnerReference) bool { return o.Kind == "VolumeGroupSnapshot" && o.UID == group }) {
			out = append(out, vs)
		}
	}
	return out, nil
}
