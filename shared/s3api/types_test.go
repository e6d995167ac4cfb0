package s3api

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func sample() *MountpointS3PodAttachment {
	return &MountpointS3PodAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "s3pa-abc", Labels: map[string]string{LabelCreatedByVersion: "v1"}},
		Spec: MountpointS3PodAttachmentSpec{
			NodeName: "node-1", PersistentVolumeName: "pv-1", VolumeID: "vol-1", MountOptions: "--allow-delete",
			AuthenticationSource: AuthenticationSourceDriver,
			MountpointS3PodAttachments: map[string][]WorkloadPodAttachment{
				"mp-1": {{WorkloadPodUID: "uid-1", AttachmentTime: metav1.NewTime(time.Unix(100, 0))}},
			},
		},
	}
}

// The JSON layout is upstream's: a Stowage controller and an upstream node (or the reverse) read each other's
// objects.
func TestJSONLayoutIsUpstreams(t *testing.T) {
	b, err := json.Marshal(sample().Spec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"nodeName":"node-1","persistentVolumeName":"pv-1","volumeID":"vol-1","mountOptions":"--allow-delete",` +
		`"authenticationSource":"driver","workloadFSGroup":"","mountpointS3PodAttachments":` +
		`{"mp-1":[{"workloadPodUID":"uid-1","attachmentTime":"1970-01-01T00:01:40Z"}]}}`
	if string(b) != want {
		t.Fatalf("spec JSON\n got %s\nwant %s", b, want)
	}
}

func TestDeepCopyIsIndependent(t *testing.T) {
	a := sample()
	c := a.DeepCopy()
	if !reflect.DeepEqual(a, c) {
		t.Fatal("copy differs")
	}
	c.Spec.MountpointS3PodAttachments["mp-1"][0].WorkloadPodUID = "changed"
	c.Labels["x"] = "y"
	if a.Spec.MountpointS3PodAttachments["mp-1"][0].WorkloadPodUID != "uid-1" || a.Labels["x"] != "" {
		t.Fatal("copy shares memory with the original")
	}
	l := &MountpointS3PodAttachmentList{Items: []MountpointS3PodAttachment{*a}}
	if lc := l.DeepCopyObject().(*MountpointS3PodAttachmentList); !reflect.DeepEqual(l, lc) {
		t.Fatal("list copy differs")
	}
}

func TestSchemeAndLookup(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	gvks, _, err := s.ObjectKinds(&MountpointS3PodAttachment{})
	if err != nil || gvks[0].Kind != Kind || gvks[0].GroupVersion() != SchemeGroupVersion {
		t.Fatalf("kinds %v, %v", gvks, err)
	}
	a := sample()
	if got := a.MountpointPodFor("uid-1"); got != "mp-1" {
		t.Fatalf("MountpointPodFor(uid-1) = %q", got)
	}
	if got := a.MountpointPodFor("uid-2"); got != "" {
		t.Fatalf("MountpointPodFor(uid-2) = %q", got)
	}
}

// TestInlineVolumeHandle pins the kubelet's volume ID of an inline volume (makeVolumeHandle) and the
// attachment's volume name.
func TestInlineVolumeHandle(t *testing.T) {
	if got, want := InlineVolumeHandle("uid-1", "data"), "csi-d6e418cffb6079f9b02d83af7dffbf3511ed5a26b3f106f1f3ca764ed6505c9c"; got != want {
		t.Errorf("InlineVolumeHandle = %s, want %s", got, want)
	}
	if got := InlineVolumeName("uid-1", "data"); got != "uid-1-data" {
		t.Errorf("InlineVolumeName = %s", got)
	}
}
