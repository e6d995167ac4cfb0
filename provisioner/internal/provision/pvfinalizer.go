package provision

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/patch"
)

// needsVolumeFinalizer reports whether a PV should get the deletion-protection finalizer it lacks: a PV this
// driver provisioned dynamically (provisioned-by names it), bound, with reclaim policy Delete, not being deleted.
// These are upstream's conditions (sig-storage-lib-external-provisioner's handleProtectionFinalizer), which
// reach PVs made before the finalizer existed, or by a provisioner that did not add it; without it, deleting such
// a PV removes the object at once and leaks its volume. Static PVs are left alone: their volume was never ours to
// delete, and a finalizer would make Stowage the one deleting it.
func (p *Provisioner) needsVolumeFinalizer(pv *v1.PersistentVolume) bool {
	by := pv.Annotations[annProvisionedBy]
	return (by == p.cfg.DriverName || (by == p.migr.inTree && p.migratedPV(pv))) &&
		pv.Spec.PersistentVolumeReclaimPolicy == v1.PersistentVolumeReclaimDelete &&
		pv.DeletionTimestamp == nil &&
		pv.Status.Phase == v1.VolumeBound &&
		!slices.Contains(pv.Finalizers, VolumeFinalizer)
}

// addVolumeFinalizer adds the deletion-protection finalizer with one merge patch preconditioned on the PV's
// resourceVersion: a stale copy (the PV deleted or changed since) gets a 409 and is retried from a newer one,
// instead of adding a finalizer to a PV already on its way out. It returns the patched PV.
func (p *Provisioner) addVolumeFinalizer(ctx context.Context, pv *v1.PersistentVolume) (*v1.PersistentVolume, error) {
	out, err := patch.AddFinalizer(ctx, p.Kube.CoreV1().PersistentVolumes().Patch, pv, VolumeFinalizer)
	if apierrors.IsNotFound(err) {
		return pv, nil
	}
	if err != nil {
		return pv, fmt.Errorf("add finalizer %s to PV %s: %w", VolumeFinalizer, pv.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Added the deletion-protection finalizer to a provisioned PV", "finalizer", VolumeFinalizer)
	return out, nil
}
