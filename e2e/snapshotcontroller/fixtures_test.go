//go:build e2e

package snapshotcontroller

import (
	"context"
	"strings"
	"testing"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/csimock"
	e2erig "github.com/stowage-csi/stowage/e2e/rig"
)

// Upstream's names (external-snapshotter pkg/utils), on purpose not taken from Stowage's code.
const (
	pvcSourceFinalizer  = "snapshot.storage.kubernetes.io/pvc-as-source-protection"
	contentFinalizer    = "snapshot.storage.kubernetes.io/volumesnapshotcontent-bound-protection"
	volumeSizeBytes     = 1 << 30
	snapshotClassPrefix = "class-"
)

// fixture makes the objects of one scenario on the rig and waits for what the binaries do to them.
type fixture struct {
	t   testing.TB
	ctx context.Context
	r   rig
	drv *csimock.Driver
}

// claim puts a volume into the driver and binds a claim to it through a static PersistentVolume (the PV
// controller of kube-controller-manager binds them), and returns the claim's name.
func (f fixture) claim(name string) string {
	f.t.Helper()
	vol := f.drv.AddVolume(name, volumeSizeBytes)
	size := resource.MustParse("1Gi")
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-" + name},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:    corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: f.drv.Name(), VolumeHandle: vol.ID}},
			ClaimRef:                      &corev1.ObjectReference{Namespace: testNamespace, Name: name},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		},
	}
	if _, err := f.r.Client.CoreV1().PersistentVolumes().Create(f.ctx, pv, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("create pv %s: %v", pv.Name, err)
	}
	empty := ""
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
			VolumeName:       pv.Name,
			StorageClassName: &empty,
		},
	}
	if _, err := f.r.Client.CoreV1().PersistentVolumeClaims(testNamespace).Create(f.ctx, pvc, metav1.CreateOptions{}); err != nil {
		f.t.Fatalf("create pvc %s: %v", name, err)
	}
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "claim "+name+" bound", func(ctx context.Context) (bool, error) {
		got, err := f.r.Client.CoreV1().PersistentVolumeClaims(testNamespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil && got.Status.Phase == corev1.ClaimBound, err
	})
	return name
}

// class creates a VolumeSnapshotClass of the driver with policy and returns its name.
func (f fixture) class(policy snapv1.DeletionPolicy) string {
	f.t.Helper()
	name := snapshotClassPrefix + strings.ToLower(string(policy))
	c := &snapv1.VolumeSnapshotClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Driver: f.drv.Name(), DeletionPolicy: policy}
	if _, err := f.r.Snap.SnapshotV1().VolumeSnapshotClasses().Create(f.ctx, c, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		f.t.Fatalf("create volumesnapshotclass %s: %v", name, err)
	}
	return name
}

// snapshot creates a dynamic VolumeSnapshot of claim in class.
func (f fixture) snapshot(name, claim, class string) *snapv1.VolumeSnapshot {
	f.t.Helper()
	vs := &snapv1.VolumeSnapshot{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace},
		Spec: snapv1.VolumeSnapshotSpec{VolumeSnapshotClassName: &class,
			Source: snapv1.VolumeSnapshotSource{PersistentVolumeClaimName: &claim}},
	}
	out, err := f.r.Snap.SnapshotV1().VolumeSnapshots(testNamespace).Create(f.ctx, vs, metav1.CreateOptions{})
	if err != nil {
		f.t.Fatalf("create volumesnapshot %s: %v", name, err)
	}
	return out
}

// waitReady waits until the snapshot is bound and readyToUse and returns it.
func (f fixture) waitReady(name string) *snapv1.VolumeSnapshot {
	f.t.Helper()
	var vs *snapv1.VolumeSnapshot
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "volumesnapshot "+name+" ready", func(ctx context.Context) (bool, error) {
		var err error
		vs, err = f.r.Snap.SnapshotV1().VolumeSnapshots(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		st := vs.Status
		return st != nil && st.ReadyToUse != nil && *st.ReadyToUse && st.BoundVolumeSnapshotContentName != nil, nil
	})
	return vs
}

// deleteSnapshot deletes the snapshot and waits until it is gone.
func (f fixture) deleteSnapshot(name string) {
	f.t.Helper()
	if err := f.r.Snap.SnapshotV1().VolumeSnapshots(testNamespace).Delete(f.ctx, name, metav1.DeleteOptions{}); err != nil {
		f.t.Fatalf("delete volumesnapshot %s: %v", name, err)
	}
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "volumesnapshot "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := f.r.Snap.SnapshotV1().VolumeSnapshots(testNamespace).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// waitContentGone waits until the content is gone.
func (f fixture) waitContentGone(name string) {
	f.t.Helper()
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "volumesnapshotcontent "+name+" gone", func(ctx context.Context) (bool, error) {
		_, err := f.r.Snap.SnapshotV1().VolumeSnapshotContents().Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
}

// waitClaimReleased waits until the claim no longer carries pvc-as-source-protection.
func (f fixture) waitClaimReleased(name string) {
	f.t.Helper()
	e2erig.Eventually(f.t, f.ctx, waitTimeout, "claim "+name+" without "+pvcSourceFinalizer, func(ctx context.Context) (bool, error) {
		pvc, err := f.r.Client.CoreV1().PersistentVolumeClaims(testNamespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, fin := range pvc.Finalizers {
			if fin == pvcSourceFinalizer {
				return false, nil
			}
		}
		return true, nil
	})
}

// driverSnapshots lists the IDs of the snapshots the driver holds.
func (f fixture) driverSnapshots() []string {
	var ids []string
	for _, s := range f.drv.Snapshots() {
		ids = append(ids, s.ID)
	}
	return ids
}

// content gets a VolumeSnapshotContent.
func (f fixture) content(name string) *snapv1.VolumeSnapshotContent {
	f.t.Helper()
	c, err := f.r.Snap.SnapshotV1().VolumeSnapshotContents().Get(f.ctx, name, metav1.GetOptions{})
	if err != nil {
		f.t.Fatalf("get volumesnapshotcontent %s: %v", name, err)
	}
	return c
}
