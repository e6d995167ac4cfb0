package controller

import (
	"context"
	"fmt"
	"slices"

	snapv1 "github.com/kubernetes-csi/external-snapshotter/client/v8/apis/volumesnapshot/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/patch"
	"github.com/stowage-csi/stowage/snapshotter/internal/snapapi"
)

// protectClaim puts pvc-as-source-protection on the snapshot's source claim, so the claim (and its volume)
// outlives the snapshot being taken of it.
func (c *Controller) protectClaim(ctx context.Context, vs *snapv1.VolumeSnapshot) error {
	pvc, err := c.sourceClaim(vs)
	if err != nil {
		return fmt.Errorf("cannot get claim from snapshot %s/%s: %w", vs.Namespace, vs.Name, err)
	}
	if slices.Contains(pvc.Finalizers, snapapi.PVCAsSourceFinalizer) {
		return nil
	}
	if pvc.DeletionTimestamp != nil {
		return fmt.Errorf("cannot add finalizer on claim %s/%s for snapshot %s: claim is being deleted", pvc.Namespace, pvc.Name, vs.Name)
	}
	_, err = patch.RetryOnConflict(ctx, pvc, c.getClaim(pvc), func(ctx context.Context, pvc *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
		if slices.Contains(pvc.Finalizers, snapapi.PVCAsSourceFinalizer) {
			return pvc, nil
		}
		if pvc.DeletionTimestamp != nil {
			return pvc, fmt.Errorf("cannot add finalizer on claim %s/%s for snapshot %s: claim is being deleted", pvc.Namespace, pvc.Name, vs.Name)
		}
		return c.updateClaimFinalizers(ctx, pvc, func(f []string) []string { return append(f, snapapi.PVCAsSourceFinalizer) })
	})
	if err != nil {
		return fmt.Errorf("adding %s to claim %s/%s: %w", snapapi.PVCAsSourceFinalizer, pvc.Namespace, pvc.Name, err)
	}
	return nil
}

// releaseClaim removes pvc-as-source-protection from the snapshot's source claim once no snapshot of the claim
// is still being taken (not ready). skipSelf leaves vs out of that count, for a snapshot being deleted.
func (c *Controller) releaseClaim(ctx context.Context, vs *snapv1.VolumeSnapshot, skipSelf bool) error {
	if vs.Spec.Source.PersistentVolumeClaimName == nil {
		return nil
	}
	pvc, err := c.sourceClaim(vs)
	if err != nil {
		return nil // the claim is gone: nothing to release
	}
	if !slices.Contains(pvc.Finalizers, snapapi.PVCAsSourceFinalizer) || c.claimInUse(pvc, vs, skipSelf) {
		return nil
	}
	_, err = patch.RetryOnConflict(ctx, pvc, c.getClaim(pvc), func(ctx context.Context, pvc *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
		return c.updateClaimFinalizers(ctx, pvc, func(f []string) []string {
			return slices.DeleteFunc(f, func(s string) bool { return s == snapapi.PVCAsSourceFinalizer })
		})
	})
	if err != nil {
		return fmt.Errorf("removing %s from claim %s/%s: %w", snapapi.PVCAsSourceFinalizer, pvc.Namespace, pvc.Name, err)
	}
	return nil
}

// updateClaimFinalizers writes the claim's finalizers as change makes them, by an Update carrying the version
// the claim was read at (so a stale read gets a 409, never overwrites). Not a patch: upstream's role grants
// update, not patch, on claims, and this controller works under that role unchanged. Nothing is written when
// change leaves the finalizers as they are.
func (c *Controller) updateClaimFinalizers(ctx context.Context, pvc *v1.PersistentVolumeClaim, change func([]string) []string) (*v1.PersistentVolumeClaim, error) {
	f := change(slices.Clone(pvc.Finalizers))
	if slices.Equal(f, pvc.Finalizers) {
		return pvc, nil
	}
	updated := pvc.DeepCopy()
	updated.Finalizers = f
	return c.cfg.Kube.CoreV1().PersistentVolumeClaims(pvc.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
}

// claimInUse reports whether a snapshot of pvc (other than vs when skipSelf) is not ready yet.
func (c *Controller) claimInUse(pvc *v1.PersistentVolumeClaim, vs *snapv1.VolumeSnapshot, skipSelf bool) bool {
	snaps, err := c.byClaim.ByIndex(bySourceClaim, pvc.Namespace+"/"+pvc.Name)
	if err != nil {
		return true // cannot tell: keep the claim protected
	}
	for _, o := range snaps {
		snap, ok := o.(*snapv1.VolumeSnapshot)
		if !ok || (skipSelf && snap.Name == vs.Name) {
			continue
		}
		if !isReady(snap) {
			return true
		}
	}
	return false
}

// restoring reports whether a claim is being provisioned from vs: a Pending claim whose dataSource names it.
func (c *Controller) restoring(vs *snapv1.VolumeSnapshot) (bool, error) {
	pvcs, err := c.claims.PersistentVolumeClaims(vs.Namespace).List(everything)
	if err != nil {
		return false, err
	}
	for _, pvc := range pvcs {
		if ds := pvc.Spec.DataSource; isSnapshotSource(ds) && ds.Name == vs.Name && pvc.Status.Phase == v1.ClaimPending {
			return true, nil
		}
	}
	return false, nil
}
