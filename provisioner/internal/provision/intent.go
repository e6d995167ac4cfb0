package provision

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/shared/patch"
)

// Writes go through shared/patch: most as one merge patch preconditioned on the resourceVersion the caller read.
// Releasing the intent uses patch.RemoveOwned instead, a JSON patch that tests the exact finalizer slot and
// annotation value it removes, because it follows the PV create, on which the PV controller binds the claim (an
// Update of the claim) at about the same moment: a resourceVersion precondition would fail there with 409 and
// cost a re-read and a second write, while the test still fails instead of removing anything it did not see.

// hasIntent reports whether the claim carries the persisted "volume may exist" state.
func hasIntent(claim *v1.PersistentVolumeClaim) bool {
	return slices.Contains(claim.Finalizers, IntentKey)
}

// recordIntent persists, in one patch, that a volume named volName may be created for claim: the finalizer keeps
// the claim until the provisioner has finished or undone the job, the annotation says which volume. The patch is
// preconditioned on the claim's resourceVersion, so it is never written from a copy older than what the
// provisioner last saw (the claim is only ours once the PV controller's annotation is in that copy).
func (p *Provisioner) recordIntent(ctx context.Context, claim *v1.PersistentVolumeClaim, volName string) (*v1.PersistentVolumeClaim, error) {
	return p.mutateClaim(ctx, claim, func(c *v1.PersistentVolumeClaim) {
		if !slices.Contains(c.Finalizers, IntentKey) {
			c.Finalizers = append(c.Finalizers, IntentKey)
		}
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, IntentKey, volName)
	})
}

// mutateClaim writes the changes mutate makes to a copy of claim as one merge patch preconditioned on the claim's
// resourceVersion (shared/patch), and returns the claim as the server has it now.
func (p *Provisioner) mutateClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, mutate func(*v1.PersistentVolumeClaim)) (*v1.PersistentVolumeClaim, error) {
	out, err := patch.Mutate(ctx, p.Kube.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch, claim, mutate)
	if err != nil {
		return nil, fmt.Errorf("patch PVC %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return out, nil
}

// releaseIntent drops the intent finalizer and annotation in one request and returns the claim as the server has
// it now; both are only ever set by this provisioner (see patch.RemoveOwned).
func (p *Provisioner) releaseIntent(ctx context.Context, claim *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
	out, err := patch.RemoveOwned(ctx, p.Kube.CoreV1().PersistentVolumeClaims(claim.Namespace).Patch, claim,
		patch.Owned{Finalizers: []string{IntentKey}, Annotations: []string{IntentKey}})
	if err != nil {
		return nil, fmt.Errorf("patch PVC %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return out, nil
}
