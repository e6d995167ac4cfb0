package reconciler

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stowage-csi/stowage/shared/s3api"
)

// errNotBound means the claim has no PV yet: not a failure, the workload is looked at again shortly.
var errNotBound = errors.New("claim is not bound to a volume yet")

// resolve finds the claim and PV of a workload's claim volume. It returns nil, nil for a PV of another driver.
func (r *Reconciler) resolve(ctx context.Context, pod *corev1.Pod, claim *corev1.PersistentVolumeClaimVolumeSource) (*volume, error) {
	pvc := &corev1.PersistentVolumeClaim{}
	if err := r.client.Get(ctx, types.NamespacedName{Namespace: pod.Namespace, Name: claim.ClaimName}, pvc); err != nil {
		return nil, fmt.Errorf("get claim %s/%s: %w", pod.Namespace, claim.ClaimName, err)
	}
	if pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil, errNotBound
	}
	pv := &corev1.PersistentVolume{}
	if err := r.client.Get(ctx, types.NamespacedName{Name: pvc.Spec.VolumeName}, pv); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errNotBound
		}
		return nil, fmt.Errorf("get PV %s of claim %s/%s: %w", pvc.Spec.VolumeName, pod.Namespace, pvc.Name, err)
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != s3api.DriverName {
		return nil, nil
	}
	if ref := pv.Spec.ClaimRef; ref == nil || ref.Name != pvc.Name || ref.Namespace != pvc.Namespace {
		return nil, fmt.Errorf("PV %s is not bound to claim %s/%s", pv.Name, pvc.Namespace, pvc.Name)
	}
	return &volume{pod: pod, pvc: pvc, pv: pv, access: workloadAccess(claim, pvc, pv)}, nil
}

// serviceAccount returns the workload's ServiceAccount for pod-level credentials (its IAM role annotation
// is part of the sharing key), or nil when the volume uses the driver's credentials.
func (r *Reconciler) serviceAccount(ctx context.Context, v *volume) (*corev1.ServiceAccount, error) {
	if authSource(v.pv) != s3api.AuthenticationSourcePod {
		return nil, nil
	}
	sa := &corev1.ServiceAccount{}
	err := r.client.Get(ctx, types.NamespacedName{Namespace: v.pod.Namespace, Name: saName(v.pod)}, sa)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get service account %s/%s: %w", v.pod.Namespace, saName(v.pod), err)
	}
	return sa, nil
}
