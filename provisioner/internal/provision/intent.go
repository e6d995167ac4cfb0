package provision

import (
	"context"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// The intent finalizer and annotation on claims are what Stowage before the journal (journal.go) wrote.
// They are no longer written, only read and released, so a claim an older Stowage was provisioning when it was
// upgraded is finished or undone as it would have been. Claim writes are Updates guarded by the resourceVersion
// read (see updateObject); a release that meets 409 Conflict (the binder wrote the claim meanwhile) is retried by
// the queue from the newer copy.

// hasLegacyIntent reports whether the claim carries an older Stowage's persisted "volume may exist" state.
func hasLegacyIntent(claim *v1.PersistentVolumeClaim) bool {
	return slices.Contains(claim.Finalizers, IntentKey)
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

// releaseLegacyIntent drops the intent finalizer and annotation in one request and returns the claim as the server has
// it now.
func (p *Provisioner) releaseLegacyIntent(ctx context.Context, claim *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
	return p.mutateClaim(ctx, claim, func(c *v1.PersistentVolumeClaim) {
		c.Finalizers = slices.DeleteFunc(c.Finalizers, func(f string) bool { return f == IntentKey })
		delete(c.Annotations, IntentKey)
	})
}
