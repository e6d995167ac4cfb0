// Package claimstatus writes the status of a claim for both of the resizer's workers (expand and modify).
package claimstatus

import (
	"context"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/shared/ownwrites"
	"github.com/stowage-csi/stowage/shared/patch"
)

// Write patches the claim's status with mutate and records the write in writes. A conflict (the other worker,
// the kubelet or kube-controller-manager wrote the claim meanwhile) re-reads the claim and applies mutate to it:
// the fields mutate sets are the resizer's own, and repeating the whole sync instead would repeat the CSI call.
// On error it returns pvc as it was.
func Write(ctx context.Context, kube kubernetes.Interface, writes *ownwrites.Writes, pvc *v1.PersistentVolumeClaim,
	mutate func(*v1.PersistentVolumeClaim)) (*v1.PersistentVolumeClaim, error) {
	claims := kube.CoreV1().PersistentVolumeClaims(pvc.Namespace)
	updated, err := ownwrites.Retry(ctx, writes, pvc,
		func(ctx context.Context) (*v1.PersistentVolumeClaim, error) {
			return claims.Get(ctx, pvc.Name, metav1.GetOptions{})
		},
		func(ctx context.Context, cur *v1.PersistentVolumeClaim) (*v1.PersistentVolumeClaim, error) {
			return patch.Status(ctx, claims.Patch, cur, mutate)
		})
	if err != nil {
		return pvc, err
	}
	return updated, nil
}
