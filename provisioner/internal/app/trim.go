package app

import (
	v1 "k8s.io/api/core/v1"

	"github.com/stowage-csi/stowage/shared/kubeclient"
)

// The claim and PV informers' transforms keep out of the cache what the provisioner never reads, and share the
// strings that repeat across objects: at 10,000 bound claims the cache is most of its memory. Both replace the
// factory's transform, so they drop managed fields too.

// trimClaim keeps a claim's status phase only. Claims are written with Updates, which send the whole object
// back, so the spec and metadata stay as they are; the API server ignores the status of an Update to the
// claim itself (status is a subresource), so nothing left out can be written back.
func trimClaim(o any) (any, error) {
	claim, ok := o.(*v1.PersistentVolumeClaim)
	if !ok {
		return o, nil
	}
	claim.ManagedFields = nil
	claim.Status = v1.PersistentVolumeClaimStatus{Phase: kubeclient.Intern(claim.Status.Phase)}
	kubeclient.InternMeta(&claim.ObjectMeta)
	kubeclient.InternClaimSpec(&claim.Spec)
	return claim, nil
}

// trimVolume drops a PV's capacity and its status but the phase. PVs are written with JSON patches of their
// finalizers only; the capacity a PV is created with comes from the claim, not from the cache.
func trimVolume(o any) (any, error) {
	pv, ok := o.(*v1.PersistentVolume)
	if !ok {
		return o, nil
	}
	pv.ManagedFields = nil
	pv.Spec.Capacity = nil
	pv.Status = v1.PersistentVolumeStatus{Phase: kubeclient.Intern(pv.Status.Phase)}
	kubeclient.InternMeta(&pv.ObjectMeta)
	kubeclient.InternVolumeSpec(&pv.Spec)
	return pv, nil
}
