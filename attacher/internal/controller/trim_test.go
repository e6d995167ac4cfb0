package controller

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTrimVolumeKeepsWhatTheAttacherReads(t *testing.T) {
	now := metav1.Now()
	block := v1.PersistentVolumeBlock
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{
			Name: "pv1", UID: "u1", ResourceVersion: "7", DeletionTimestamp: &now,
			Finalizers:    []string{"kubernetes.io/pv-protection", "external-attacher/ebs-csi-aws-com"},
			Labels:        map[string]string{"topology.kubernetes.io/zone": "a"},
			Annotations:   map[string]string{"pv.kubernetes.io/provisioned-by": "ebs.csi.aws.com"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}},
		}
	}
	common := func(src v1.PersistentVolumeSource) v1.PersistentVolumeSpec {
		return v1.PersistentVolumeSpec{
			PersistentVolumeSource:        src,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod},
			VolumeMode:                    &block,
			MountOptions:                  []string{"noatime"},
			ClaimRef:                      &v1.ObjectReference{Namespace: "ns", Name: "claim"},
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
			StorageClassName:              "gp3",
			NodeAffinity:                  &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{}},
		}
	}
	ours := v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
		Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1", FSType: "xfs", ReadOnly: true,
		VolumeAttributes:           map[string]string{"k": "v"},
		ControllerPublishSecretRef: &v1.SecretReference{Namespace: "ns", Name: "s"},
	}}
	inTree := v1.PersistentVolumeSource{AWSElasticBlockStore: &v1.AWSElasticBlockStoreVolumeSource{VolumeID: "vol-2"}}
	trimmedMeta := func() metav1.ObjectMeta {
		m := meta()
		m.Labels, m.Annotations, m.ManagedFields = nil, nil, nil
		return m
	}
	tests := []struct {
		name string
		spec v1.PersistentVolumeSpec
		want v1.PersistentVolumeSpec
	}{
		{"this driver's volume keeps its source, access modes, volume mode and mount options", common(ours), v1.PersistentVolumeSpec{
			PersistentVolumeSource: ours, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}, VolumeMode: &block, MountOptions: []string{"noatime"},
		}},
		{"an in-tree volume keeps its spec but its capacity, for the translation", common(inTree), func() v1.PersistentVolumeSpec {
			s := common(inTree)
			s.Capacity = nil
			return s
		}()},
		{"another driver's volume keeps only the driver's name", common(v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "other", VolumeHandle: "x"}}),
			v1.PersistentVolumeSpec{PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{Driver: "other"}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pv := &v1.PersistentVolume{ObjectMeta: meta(), Spec: tc.spec, Status: v1.PersistentVolumeStatus{Phase: v1.VolumeBound, Message: "m"}}
			got, err := trimVolume("ebs.csi.aws.com")(pv)
			if err != nil {
				t.Fatal(err)
			}
			want := &v1.PersistentVolume{ObjectMeta: trimmedMeta(), Spec: tc.want}
			if !equality.Semantic.DeepEqual(want, got) {
				t.Errorf("trimmed PersistentVolume:\n got %+v\nwant %+v", got, want)
			}
		})
	}
	if got, err := trimVolume("d")("not a PV"); err != nil || got != "not a PV" {
		t.Errorf("another object: got %v, %v; want it back unchanged", got, err)
	}
}

func TestSettledVolumeAttachments(t *testing.T) {
	now := metav1.Now()
	tests := []struct {
		name     string
		attached bool
		deleting bool
		want     bool
	}{
		{"attached", true, false, true},
		{"not attached yet", false, false, false},
		{"attached and being deleted", true, true, false},
		{"being deleted, already detached", false, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			va := &storagev1.VolumeAttachment{Status: storagev1.VolumeAttachmentStatus{Attached: tc.attached}}
			if tc.deleting {
				va.DeletionTimestamp = &now
			}
			if got := settled(va); got != tc.want {
				t.Errorf("settled = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTrimAttachmentDropsOnlyManagedFields(t *testing.T) {
	pv := "pv1"
	va := &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{
			Name: "va1", ResourceVersion: "3", Finalizers: []string{"external-attacher/ebs-csi-aws-com"},
			Annotations: map[string]string{"csi.alpha.kubernetes.io/node-id": "i-1"},
		},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "ebs.csi.aws.com", NodeName: "n1", Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
		Status: storagev1.VolumeAttachmentStatus{Attached: true, AttachmentMetadata: map[string]string{"devicePath": "/dev/xvdba"},
			AttachError: &storagev1.VolumeError{Message: "old"}},
	}
	want := va.DeepCopy()
	va.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "csi-attacher"}}
	got, err := trimAttachment(va)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(want, got) {
		t.Errorf("trimmed VolumeAttachment:\n got %+v\nwant %+v", got, want)
	}
}
