package app

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTrimClaimKeepsSpecMetadataAndPhase(t *testing.T) {
	gi := resource.MustParse("1Gi")
	meta := metav1.ObjectMeta{
		Namespace: "ns", Name: "c", UID: "u", ResourceVersion: "5",
		Annotations: map[string]string{"volume.kubernetes.io/selected-node": "n1"},
		Finalizers:  []string{"kubernetes.io/pvc-protection"},
	}
	spec := v1.PersistentVolumeClaimSpec{
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		Resources:   v1.VolumeResourceRequirements{Requests: v1.ResourceList{v1.ResourceStorage: gi}},
		VolumeName:  "pvc-u",
	}
	in := &v1.PersistentVolumeClaim{ObjectMeta: *meta.DeepCopy(), Spec: *spec.DeepCopy(), Status: v1.PersistentVolumeClaimStatus{
		Phase:       v1.PersistentVolumeClaimPhase(string([]byte("Bound"))),
		AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce},
		Capacity:    v1.ResourceList{v1.ResourceStorage: gi},
		Conditions:  []v1.PersistentVolumeClaimCondition{{Type: v1.PersistentVolumeClaimResizing}},
	}}
	in.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}
	got, err := trimClaim(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &v1.PersistentVolumeClaim{ObjectMeta: meta, Spec: spec, Status: v1.PersistentVolumeClaimStatus{Phase: v1.ClaimBound}}
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("trimmed claim:\n got %+v\nwant %+v", got, want)
	}
}

func TestTrimVolumeKeepsAllButCapacityAndStatus(t *testing.T) {
	now := metav1.Now()
	meta := metav1.ObjectMeta{
		Name: "pvc-u", DeletionTimestamp: &now,
		Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"},
		Finalizers:  []string{"external-provisioner.volume.kubernetes.io/finalizer"},
	}
	spec := v1.PersistentVolumeSpec{
		PersistentVolumeSource:        v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "d", VolumeHandle: "vol-1"}},
		ClaimRef:                      &v1.ObjectReference{Namespace: "ns", Name: "c", UID: "u"},
		PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
		NodeAffinity:                  &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{}},
		StorageClassName:              "gp3",
	}
	in := &v1.PersistentVolume{ObjectMeta: *meta.DeepCopy(), Spec: *spec.DeepCopy(), Status: v1.PersistentVolumeStatus{
		Phase: v1.PersistentVolumePhase(string([]byte("Released"))), Message: "m", LastPhaseTransitionTime: &now,
	}}
	in.Spec.Capacity = v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")}
	got, err := trimVolume(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &v1.PersistentVolume{ObjectMeta: meta, Spec: spec, Status: v1.PersistentVolumeStatus{Phase: v1.VolumeReleased}}
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("trimmed PV:\n got %+v\nwant %+v", got, want)
	}
	if got, err := trimVolume("not a PV"); err != nil || got != "not a PV" {
		t.Errorf("another object: got %v, %v; want it back unchanged", got, err)
	}
}

func TestUnknownPhasesAreKept(t *testing.T) {
	claim, err := trimClaim(&v1.PersistentVolumeClaim{Status: v1.PersistentVolumeClaimStatus{Phase: "Resizing"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := claim.(*v1.PersistentVolumeClaim).Status.Phase; got != "Resizing" {
		t.Errorf("claim phase = %q, want Resizing", got)
	}
	pv, err := trimVolume(&v1.PersistentVolume{Status: v1.PersistentVolumeStatus{Phase: "Custom"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := pv.(*v1.PersistentVolume).Status.Phase; got != "Custom" {
		t.Errorf("PV phase = %q, want Custom", got)
	}
}
