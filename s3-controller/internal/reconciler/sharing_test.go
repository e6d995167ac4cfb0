package reconciler

import (
	"context"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/stowage-csi/stowage/shared/s3api"
)

func TestSharing(t *testing.T) {
	roPV := func(pv *corev1.PersistentVolume, pvc *corev1.PersistentVolumeClaim) {
		pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadOnlyMany}
	}
	podAuth := func(pv *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim) {
		pv.Spec.CSI.VolumeAttributes[attrAuthenticationSource] = s3api.AuthenticationSourcePod
	}
	tests := []struct {
		name            string
		objs            []client.Object
		a, b            *corev1.Pod
		wantAttachments int
		wantMPPods      int
	}{
		{"same key shares one attachment and one Mountpoint Pod", volumeObjs("pv", []string{"allow-delete"}),
			workload("a", "pv"), workload("b", "pv"), 1, 1},
		{"different fsGroup: separate attachments and Mountpoint Pods", volumeObjs("pv", nil),
			workload("a", "pv", withFSGroup(1)), workload("b", "pv", withFSGroup(2)), 2, 2},
		{"different mount options: separate", append(volumeObjs("pv1", []string{"allow-delete"}), volumeObjs("pv2", []string{"region x"})...),
			workload("a", "pv1"), workload("b", "pv2"), 2, 2},
		{"read-only and read-write: one attachment, two Mountpoint Pods", volumeObjs("pv", nil),
			workload("a", "pv"), workload("b", "pv", readOnlyClaim), 1, 2},
		{"two read-only workloads share", volumeObjs("pv", nil, roPV),
			workload("a", "pv"), workload("b", "pv", readOnlyClaim), 1, 1},
		{"pod auth, different service accounts: separate", volumeObjs("pv", nil, podAuth),
			workload("a", "pv", withSA("x")), workload("b", "pv", withSA("y")), 2, 2},
		{"pod auth, same service account: share", volumeObjs("pv", nil, podAuth),
			workload("a", "pv", withSA("x")), workload("b", "pv", withSA("x")), 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, append(tt.objs, tt.a, tt.b)...)
			e.mustReconcile(tt.a, tt.b, tt.a, tt.b) // a second pass changes nothing
			as, mps := e.attachments(), e.mountpointPods()
			if len(as) != tt.wantAttachments || len(mps) != tt.wantMPPods {
				t.Fatalf("got %d attachments, %d Mountpoint Pods; want %d, %d: %+v", len(as), len(mps), tt.wantAttachments, tt.wantMPPods, uidsByMountpointPod(as))
			}
			byMP := uidsByMountpointPod(as)
			for _, mp := range mps {
				if _, ok := byMP[mp.Name]; !ok {
					t.Errorf("Mountpoint Pod %s is in no attachment", mp.Name)
				}
			}
			for _, a := range as {
				if !strings.HasPrefix(a.Name, "s3pa-") || a.Labels[s3api.LabelCreatedByVersion] != testVersion {
					t.Errorf("attachment %s labels %v", a.Name, a.Labels)
				}
			}
		})
	}
}

func TestAttachmentSpecIsUpstreams(t *testing.T) {
	objs := volumeObjs("pv", []string{"region us-east-1", "allow-delete"}, func(pv *corev1.PersistentVolume, _ *corev1.PersistentVolumeClaim) {
		pv.Spec.CSI.VolumeAttributes[attrAuthenticationSource] = s3api.AuthenticationSourcePod
	})
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = "default", "app"
	sa.Annotations = map[string]string{roleARNAnnotation: "arn:aws:iam::1:role/r"}
	w := workload("a", "pv", withFSGroup(42), withSA("app"))
	e := newEnv(t, append(objs, sa, w)...)
	e.mustReconcile(w)
	as := e.attachments()
	if len(as) != 1 {
		t.Fatalf("%d attachments", len(as))
	}
	got := as[0].Spec
	want := s3api.MountpointS3PodAttachmentSpec{NodeName: testNode, PersistentVolumeName: "pv", VolumeID: "pv-handle",
		MountOptions: "region us-east-1,allow-delete", AuthenticationSource: "pod", WorkloadFSGroup: "42",
		WorkloadServiceAccountName: "app", WorkloadNamespace: "default", WorkloadServiceAccountIAMRoleARN: "arn:aws:iam::1:role/r"}
	got.MountpointS3PodAttachments = nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("spec\n got %+v\nwant %+v", got, want)
	}
	for _, ws := range as[0].Spec.MountpointS3PodAttachments {
		if len(ws) != 1 || ws[0].WorkloadPodUID != "uid-a" || !ws[0].AttachmentTime.Time.Equal(testNow) {
			t.Fatalf("workloads %+v", ws)
		}
	}
}

func TestOrderInsensitiveMountOptions(t *testing.T) {
	objs := append(volumeObjs("pv", []string{"allow-delete", "region x"}), workload("a", "pv"))
	e := newEnv(t, objs...)
	e.mustReconcile(workload("a", "pv"))
	// The PV's options are reordered (and spelled differently); a new workload still shares.
	pv := &corev1.PersistentVolume{}
	if err := e.c.Get(context.Background(), client.ObjectKey{Name: "pv"}, pv); err != nil {
		t.Fatal(err)
	}
	pv.Spec.MountOptions = []string{"--region=x", "--allow-delete"}
	if err := e.c.Update(context.Background(), pv); err != nil {
		t.Fatal(err)
	}
	b := workload("b", "pv")
	if err := e.c.Create(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	e.mustReconcile(b)
	if as, mps := e.attachments(), e.mountpointPods(); len(as) != 1 || len(mps) != 1 {
		t.Fatalf("%d attachments, %d Mountpoint Pods, want 1, 1", len(as), len(mps))
	}
	if got := e.attachments()[0].Spec.MountOptions; got != "allow-delete,region x" {
		t.Fatalf("mountOptions %q, want the first PV order as written", got)
	}
}

func TestNormalizeMountOptions(t *testing.T) {
	for in, want := range map[string]string{
		"":                                "",
		"b,a":                             "--a,--b",
		"region us-east-1,--allow-delete": "--allow-delete,--region=us-east-1",
		"--region=us-east-1,allow-delete": "--allow-delete,--region=us-east-1",
		"uid=1000, gid 2000 ,allow-other": "--allow-other,--gid=2000,--uid=1000",
		"a,a,--a":                         "--a",
		"prefix some path/":               "--prefix=some path/",
	} {
		if got := normalizeMountOptions(in); got != want {
			t.Errorf("normalizeMountOptions(%q) = %q, want %q", in, got, want)
		}
	}
}
