package kubeletsim

import (
	"errors"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// TestEphemeralClaimMustBeOwnedByPod follows the kubelet: a generic ephemeral volume's claim <pod>-<volume> is
// used only once it exists and the Pod controls it; a claim of that name made by anyone else is an error,
// never mounted.
func TestEphemeralClaimMustBeOwnedByPod(t *testing.T) {
	pod := testPod()
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{Ephemeral: &v1.EphemeralVolumeSource{}}}}
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}
	other := owner
	other.UID = "another-pod"
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-1"},
		Spec: v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{
			CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "vol-1"},
		}},
	}
	claim := func(owners ...metav1.OwnerReference) *v1.PersistentVolumeClaim {
		return &v1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "app-data", Namespace: pod.Namespace, OwnerReferences: owners},
			Spec:       v1.PersistentVolumeClaimSpec{VolumeName: pv.Name},
			Status:     v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound},
		}
	}
	tests := []struct {
		name        string
		claim       *v1.PersistentVolumeClaim
		wantWaiting bool
		wantErr     string
	}{
		{"claim not created yet: wait", nil, true, ""},
		{"claim controlled by the Pod: used", claim(owner), false, ""},
		{"claim without owner: refused", claim(), false, "was not created for pod ns1/app (pod is not owner)"},
		{"claim controlled by another Pod of that name: refused", claim(other), false, "pod is not owner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			volumes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if tt.claim != nil {
				if err := claims.Add(tt.claim); err != nil {
					t.Fatal(err)
				}
			}
			if err := volumes.Add(pv); err != nil {
				t.Fatal(err)
			}
			n := &Node{driver: "d", claims: corelisters.NewPersistentVolumeClaimLister(claims), volumes: corelisters.NewPersistentVolumeLister(volumes)}
			vols, err := n.resolveVolumes(pod)
			switch {
			case tt.wantWaiting:
				if !errors.Is(err, errWaiting) {
					t.Fatalf("got %v, want a wait", err)
				}
			case tt.wantErr != "":
				if err == nil || errors.Is(err, errWaiting) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
			default:
				if err != nil || len(vols) != 1 || vols[0].handle != "vol-1" {
					t.Fatalf("got %v, %v; want volume vol-1", vols, err)
				}
			}
		})
	}
}
