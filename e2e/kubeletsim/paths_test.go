package kubeletsim

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestKubeletPathLayout(t *testing.T) {
	p := paths{root: "/var/lib/kubelet"}
	const uid = types.UID("0f0e-uid")
	tests := []struct {
		name, got, want string
	}{
		{"staging", p.stagingPath("ebs.csi.aws.com", "vol-1"),
			"/var/lib/kubelet/plugins/kubernetes.io/csi/ebs.csi.aws.com/" + sha256Hex("vol-1") + "/globalmount"},
		{"publish", p.publishPath(uid, "pvc-1"), "/var/lib/kubelet/pods/0f0e-uid/volumes/kubernetes.io~csi/pvc-1/mount"},
		{"block staging", p.blockStagingPath("pvc-1"), "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/staging/pvc-1"},
		{"block publish", p.blockPublishPath("pvc-1", uid), "/var/lib/kubelet/plugins/kubernetes.io/csi/volumeDevices/publish/pvc-1/0f0e-uid"},
		{"pod device", p.podDevicePath(uid, "pvc-1"), "/var/lib/kubelet/pods/0f0e-uid/volumeDevices/kubernetes.io~csi/pvc-1"},
		{"unique name", uniqueVolumeName("ebs.csi.aws.com", "vol-1"), "kubernetes.io/csi/ebs.csi.aws.com^vol-1"},
		// The attach-detach controller's name: sha256 of handle, driver and node, concatenated.
		{"attachment", attachmentName("vol-1", "ebs.csi.aws.com", "node-a"), "csi-" + sha256Hex("vol-1ebs.csi.aws.comnode-a")},
		{"inline handle", inlineVolumeHandle(uid, "scratch"), "csi-" + sha256Hex("0f0e-uidscratch")},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if got := sha256Hex("abc"); got != "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad" {
		t.Errorf("sha256Hex(abc) = %s", got)
	}
}
