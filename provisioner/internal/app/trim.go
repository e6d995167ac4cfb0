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
	claim.Status = v1.PersistentVolumeClaimStatus{Phase: claimPhase(claim.Status.Phase)}
	kubeclient.InternMeta(&claim.ObjectMeta)
	spec := &claim.Spec
	kubeclient.InternAll(spec.AccessModes)
	internPtr(spec.StorageClassName)
	internPtr(spec.VolumeMode)
	internPtr(spec.VolumeAttributesClassName)
	spec.Resources.Requests = kubeclient.InternKeys(spec.Resources.Requests, nil)
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
	pv.Status = v1.PersistentVolumeStatus{Phase: volumePhase(pv.Status.Phase)}
	kubeclient.InternMeta(&pv.ObjectMeta)
	spec := &pv.Spec
	kubeclient.InternAll(spec.AccessModes)
	kubeclient.InternAll(spec.MountOptions)
	spec.StorageClassName = kubeclient.Intern(spec.StorageClassName)
	spec.PersistentVolumeReclaimPolicy = kubeclient.Intern(spec.PersistentVolumeReclaimPolicy)
	internPtr(spec.VolumeMode)
	if ref := spec.ClaimRef; ref != nil {
		ref.Kind, ref.APIVersion, ref.Namespace = kubeclient.Intern(ref.Kind), kubeclient.Intern(ref.APIVersion), kubeclient.Intern(ref.Namespace)
	}
	if src := spec.CSI; src != nil {
		src.Driver, src.FSType = kubeclient.Intern(src.Driver), kubeclient.Intern(src.FSType)
		src.VolumeAttributes = kubeclient.InternKeys(src.VolumeAttributes, func(_, v string) string { return kubeclient.Intern(v) })
	}
	if na := spec.NodeAffinity; na != nil && na.Required != nil {
		for i := range na.Required.NodeSelectorTerms {
			for j := range na.Required.NodeSelectorTerms[i].MatchExpressions {
				e := &na.Required.NodeSelectorTerms[i].MatchExpressions[j]
				e.Key, e.Operator = kubeclient.Intern(e.Key), kubeclient.Intern(e.Operator)
				kubeclient.InternAll(e.Values)
			}
		}
	}
	return pv, nil
}

// internPtr interns the string p points to, if any.
func internPtr[S ~string](p *S) {
	if p != nil {
		*p = kubeclient.Intern(*p)
	}
}

// claimPhase and volumePhase return the constant for a known phase, so that thousands of cached objects
// share one string instead of each holding the copy it was decoded into.
func claimPhase(p v1.PersistentVolumeClaimPhase) v1.PersistentVolumeClaimPhase {
	for _, known := range []v1.PersistentVolumeClaimPhase{v1.ClaimPending, v1.ClaimBound, v1.ClaimLost} {
		if p == known {
			return known
		}
	}
	return p
}

func volumePhase(p v1.PersistentVolumePhase) v1.PersistentVolumePhase {
	for _, known := range []v1.PersistentVolumePhase{v1.VolumePending, v1.VolumeAvailable, v1.VolumeBound, v1.VolumeReleased, v1.VolumeFailed} {
		if p == known {
			return known
		}
	}
	return p
}
