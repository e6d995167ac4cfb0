package provision

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Claim writes are Updates guarded by the resourceVersion read (see updateObject). Releasing the intent follows
// the PV create, on which the PV controller binds the claim (an Update of the claim) at about the same moment, so
// that release may meet 409 Conflict: the queue then retries it from the bound copy, which costs a second write
// but never removes anything from a claim the provisioner has not seen.

// hasIntent reports whether the claim carries the persisted "volume may exist" state.
func hasIntent(claim *v1.PersistentVolumeClaim) bool {
	return slices.Contains(claim.Finalizers, IntentKey)
}

// recordIntent persists, in one write, that a volume named volName may be created for claim: the finalizer keeps
// the claim until the provisioner has finished or undone the job, the annotation says which volume. The Update is
// guarded by the claim's resourceVersion, so it is never written from a copy older than what the
// provisioner last saw (the claim is only ours once the PV controller's annotation is in that copy).
func (p *Provisioner) recordIntent(ctx context.Context, claim *v1.PersistentVolumeClaim, volName string) (*v1.PersistentVolumeClaim, error) {
	return p.mutateClaim(ctx, claim, func(c *v1.PersistentVolumeClaim) {
		if !slices.Contains(c.Finalizers, IntentKey) {
			c.Finalizers = append(c.Finalizers, IntentKey)
		}
		metav1.SetMetaDataAnnotation(&c.ObjectMeta, IntentKey, volName)
	})
}

// mutateClaim writes the changes mutate makes to a copy of claim as one Update guarded by the claim's
// resourceVersion (updateObject), and returns the claim as the server has it now.
func (p *Provisioner) mutateClaim(ctx context.Context, claim *v1.PersistentVolumeClaim, mutate func(*v1.PersistentVolumeClaim)) (*v1.PersistentVolumeClaim, error) {
	out, err := updateObject(ctx, p.Kube.CoreV1().PersistentVolumeClaims(claim.Namespace).Update, claim, mutate)
	if err != nil {
		return nil, fmt.Errorf("update PVC %s/%s: %w", claim.Namespace, claim.Name, err)
	}
	return out, nil
}

// releaseIntent drops the intent finalizer and annotation in one request and returns the claim as the server has
// it now.
func (p *Provisioner) releaseIntent(ctx context.Context, claim *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
	return p.mutateClaim(ctx, claim, func(c *v1.PersistentVolumeClaim) {
		c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == IntentKey })
		delete(c.Annotations, IntentKey)
	})
}
