//go:build e2e

package csisnapshotter

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	groupv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumegroupsnapshot/v1"
	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// Upstream's group snapshot names (external-snapshotter pkg/utils).
const (
	groupBoundFinalizer  = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshotcontent-bound-protection"
	annGroupBeingCreated = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-created"
	annGroupBeingDeleted = "groupsnapshot.storage.kubernetes.io/volumegroupsnapshot-being-deleted"
)

// testGroups runs csi-snapshotter with --feature-gates=CSIVolumeGroupSnapshot=true against a driver with the
// GroupController service: a VolumeGroupSnapshotContent of two volumes gets one group snapshot with both
// members in its status, and its release deletes the group and its members.
func testGroups(t *testing.T, r rig) {
	f := newFixture(t, r, 5*time.Minute)
	drv := startDriverWith(t, csimock.Options{Name: "group.csi.stowage.io", GroupSnapshots: true})
	a, b := drv.AddVolume("pv-a", 1<<30), drv.AddVolume("pv-b", 2<<30)
	groups := r.Snap.GroupsnapshotV1()
	class := &groupv1.VolumeGroupSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: "group"}, Driver: drv.Name(),
		DeletionPolicy: snapv1.VolumeSnapshotContentDelete, Parameters: map[string]string{"consistency": "crash"}}
	if _, err := groups.VolumeGroupSnapshotClasses().Create(f.ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.startSnapshotter(t, "snapshotter-group", drv.Endpoint(), "--feature-gates=CSIVolumeGroupSnapshot=true")

	className := class.Name
	gc := &groupv1.VolumeGroupSnapshotContent{
		ObjectMeta: metav1.ObjectMeta{Name: "group", Finalizers: []string{groupBoundFinalizer}},
		Spec: groupv1.VolumeGroupSnapshotContentSpec{
			Driver: drv.Name(), DeletionPolicy: snapv1.VolumeSnapshotContentDelete, VolumeGroupSnapshotClassName: &className,
			Source: groupv1.VolumeGroupSnapshotContentSource{VolumeHandles: []string{a.ID, b.ID}},
			VolumeGroupSnapshotRef: corev1.ObjectReference{Kind: "VolumeGroupSnapshot", APIVersion: "groupsnapshot.storage.k8s.io/v1",
				Namespace: "default", Name: "group", UID: uuid.NewUUID()},
		},
	}
	if _, err := groups.VolumeGroupSnapshotContents().Create(f.ctx, gc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var got *groupv1.VolumeGroupSnapshotContent
	e2erig.Eventually(t, f.ctx, waitTimeout, "volumegroupsnapshotcontent group ready with two members", func(ctx context.Context) (bool, error) {
		c, err := groups.VolumeGroupSnapshotContents().Get(ctx, gc.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = c
		_, creating := c.Annotations[annGroupBeingCreated]
		return !creating && c.Status != nil && c.Status.ReadyToUse != nil && *c.Status.ReadyToUse && len(c.Status.VolumeSnapshotInfoList) == 2, nil
	})
	held := drv.GroupSnapshots()
	if len(held) != 1 || held[0].ID != *got.Status.VolumeGroupSnapshotHandle || held[0].Name != "groupsnapshot-"+string(gc.Spec.VolumeGroupSnapshotRef.UID) {
		t.Fatalf("driver groups = %+v, want the one the status names (%s) under upstream's name", held, *got.Status.VolumeGroupSnapshotHandle)
	}
	var members []string
	for i, m := range got.Status.VolumeSnapshotInfoList {
		members = append(members, m.SnapshotHandle)
		if m.VolumeHandle != gc.Spec.Source.VolumeHandles[i] {
			t.Errorf("member %d = %+v, want a snapshot of %s", i, m, gc.Spec.Source.VolumeHandles[i])
		}
	}
	if !slices.Equal(members, held[0].SnapshotIDs) {
		t.Errorf("member handles %v, want the driver's %v", members, held[0].SnapshotIDs)
	}

	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annGroupBeingDeleted: "yes"}}})
	if _, err := groups.VolumeGroupSnapshotContents().Patch(f.ctx, gc.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := groups.VolumeGroupSnapshotContents().Delete(f.ctx, gc.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e2erig.Eventually(t, f.ctx, waitTimeout, "volumegroupsnapshotcontent group to be gone", func(ctx context.Context) (bool, error) {
		_, err := groups.VolumeGroupSnapshotContents().Get(ctx, gc.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if len(drv.GroupSnapshots()) != 0 || len(drv.Snapshots()) != 0 {
		t.Errorf("after release: driver groups %+v, snapshots %+v; want none", drv.GroupSnapshots(), drv.Snapshots())
	}
	if n := drv.Calls(csimock.DeleteVolumeGroupSnapshot); n != 1 {
		t.Errorf("DeleteVolumeGroupSnapshot called %d times, want 1", n)
	}
}
