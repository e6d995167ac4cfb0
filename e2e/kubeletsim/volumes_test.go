package kubeletsim

import (
	"encoding/json"
	"maps"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ns1", UID: "uid-1"},
		Spec:       v1.PodSpec{ServiceAccountName: "sa1"},
	}
}

func csiDriver(mut func(*storagev1.CSIDriverSpec)) *storagev1.CSIDriver {
	d := &storagev1.CSIDriver{ObjectMeta: metav1.ObjectMeta{Name: "d"}}
	if mut != nil {
		mut(&d.Spec)
	}
	return d
}

func TestPublishContextFollowsCSIDriver(t *testing.T) {
	tokens := map[string]serviceAccountToken{"aud": {Token: "t", ExpirationTimestamp: "2030-01-01T00:00:00Z"}}
	tokensJSON, _ := json.Marshal(tokens)
	claimVol := &volume{attributes: map[string]string{"a": "1"}}
	inlineVol := &volume{attributes: map[string]string{"b": "2"}, inline: true}
	podInfo := map[string]string{keyPodName: "app", keyPodNamespace: "ns1", keyPodUID: "uid-1", keyServiceAccountName: "sa1"}
	with := func(base map[string]string, extra ...map[string]string) map[string]string {
		out := maps.Clone(base)
		for _, e := range extra {
			maps.Copy(out, e)
		}
		return out
	}
	tests := []struct {
		name        string
		vol         *volume
		driver      *storagev1.CSIDriver
		tokens      map[string]serviceAccountToken
		wantCtx     map[string]string
		wantSecrets map[string]string
	}{
		{"no CSIDriver: attributes only", claimVol, nil, nil, map[string]string{"a": "1"}, nil},
		{"podInfoOnMount false", claimVol, csiDriver(func(s *storagev1.CSIDriverSpec) { s.PodInfoOnMount = ptrTo(false) }), nil, map[string]string{"a": "1"}, nil},
		{"podInfoOnMount, claim", claimVol, csiDriver(func(s *storagev1.CSIDriverSpec) { s.PodInfoOnMount = ptrTo(true) }), nil,
			with(map[string]string{"a": "1", keyEphemeral: "false"}, podInfo), nil},
		{"podInfoOnMount, inline", inlineVol, csiDriver(func(s *storagev1.CSIDriverSpec) { s.PodInfoOnMount = ptrTo(true) }), nil,
			with(map[string]string{"b": "2", keyEphemeral: "true"}, podInfo), nil},
		{"tokens in the volume context", claimVol, csiDriver(nil), tokens,
			map[string]string{"a": "1", keyTokens: string(tokensJSON)}, nil},
		{"tokens in the secrets", claimVol, csiDriver(func(s *storagev1.CSIDriverSpec) { s.ServiceAccountTokenInSecrets = ptrTo(true) }), tokens,
			map[string]string{"a": "1"}, map[string]string{keyTokens: string(tokensJSON)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := publishContext(tt.vol, tt.driver, testPod(), tt.tokens)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tt.wantCtx) {
				t.Errorf("volume context = %v, want %v", got, tt.wantCtx)
			}
			secrets, err := publishSecrets(nil, tt.driver, tt.tokens)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(secrets, tt.wantSecrets) {
				t.Errorf("secrets = %v, want %v", secrets, tt.wantSecrets)
			}
		})
	}
}

func TestAccessModeMapping(t *testing.T) {
	tests := []struct {
		modes       []v1.PersistentVolumeAccessMode
		multiWriter bool
		want        csi.VolumeCapability_AccessMode_Mode
	}{
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, true, csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}, true, csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}, false, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		{[]v1.PersistentVolumeAccessMode{v1.ReadOnlyMany}, false, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY},
		{[]v1.PersistentVolumeAccessMode{v1.ReadWriteMany, v1.ReadOnlyMany}, false, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		{nil, false, csi.VolumeCapability_AccessMode_UNKNOWN},
	}
	for _, tt := range tests {
		v := &volume{modes: tt.modes}
		if got := v.accessMode(tt.multiWriter); got != tt.want {
			t.Errorf("modes %v multiWriter %v: %v, want %v", tt.modes, tt.multiWriter, got, tt.want)
		}
	}
}

func TestCapabilityCarriesFsTypeFlagsAndGroup(t *testing.T) {
	v := &volume{fsType: "xfs", mountFlags: []string{"noatime"}, modes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}}
	c := v.capability(false, "1000")
	m := c.GetMount()
	if m.GetFsType() != "xfs" || len(m.GetMountFlags()) != 1 || m.GetVolumeMountGroup() != "1000" {
		t.Errorf("mount capability = %v", c)
	}
	v.block = true
	if c := v.capability(false, ""); c.GetBlock() == nil || c.GetMount() != nil {
		t.Errorf("block capability = %v", c)
	}
}

func TestFSGroupPolicy(t *testing.T) {
	gid := int64(2000)
	withGroup := testPod()
	withGroup.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: &gid}
	rwo := []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}
	policy := func(p storagev1.FSGroupPolicy) *storagev1.CSIDriver {
		return csiDriver(func(s *storagev1.CSIDriverSpec) { s.FSGroupPolicy = &p })
	}
	tests := []struct {
		name     string
		vol      *volume
		driver   *storagev1.CSIDriver
		pod      *v1.Pod
		mountCap bool
		want     fsGroupAction
	}{
		{"no fsGroup", &volume{fsType: "ext4", modes: rwo}, nil, testPod(), false, fsGroupNone},
		{"default policy, RWO with fsType", &volume{fsType: "ext4", modes: rwo}, nil, withGroup, false, fsGroupChown},
		{"default policy, no fsType", &volume{modes: rwo}, nil, withGroup, false, fsGroupNone},
		{"default policy, RWX", &volume{fsType: "ext4", modes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}}, nil, withGroup, false, fsGroupNone},
		{"File policy, plugin applies the group", &volume{modes: rwo}, policy(storagev1.FileFSGroupPolicy), withGroup, true, fsGroupDelegate},
		{"File policy, kubelet applies the group", &volume{modes: rwo}, policy(storagev1.FileFSGroupPolicy), withGroup, false, fsGroupChown},
		{"None policy", &volume{fsType: "ext4", modes: rwo}, policy(storagev1.NoneFSGroupPolicy), withGroup, false, fsGroupNone},
		{"None policy, plugin with VOLUME_MOUNT_GROUP", &volume{fsType: "ext4", modes: rwo}, policy(storagev1.NoneFSGroupPolicy), withGroup, true, fsGroupDelegate},
		{"default policy, RWX, plugin with VOLUME_MOUNT_GROUP", &volume{modes: []v1.PersistentVolumeAccessMode{v1.ReadWriteMany}}, nil, withGroup, true, fsGroupDelegate},
		{"read-only volume", &volume{fsType: "ext4", modes: rwo, readOnly: true}, nil, withGroup, false, fsGroupNone},
		{"block volume", &volume{block: true, modes: rwo}, policy(storagev1.FileFSGroupPolicy), withGroup, true, fsGroupNone},
	}
	for _, tt := range tests {
		if got := fsGroupFor(tt.vol, tt.driver, tt.pod, tt.mountCap); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestVolumeFromPVAndInline(t *testing.T) {
	block := v1.PersistentVolumeBlock
	pv := &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv1"}, Spec: v1.PersistentVolumeSpec{
		VolumeMode: &block, AccessModes: []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, MountOptions: []string{"noatime"},
		PersistentVolumeSource: v1.PersistentVolumeSource{CSI: &v1.CSIPersistentVolumeSource{
			Driver: "d", VolumeHandle: "vol-1", FSType: "ext4", ReadOnly: true,
			NodeStageSecretRef: &v1.SecretReference{Name: "s", Namespace: "ns"},
		}},
	}}
	v, err := volumeFromPV("data", pv, "claim1", false)
	if err != nil {
		t.Fatal(err)
	}
	if !v.block || !v.readOnly || v.unique != "kubernetes.io/csi/d^vol-1" || v.specName != "pv1" || v.stageRef.Name != "s" || v.claim != "claim1" {
		t.Errorf("volume from PV = %+v", v)
	}
	if _, err := volumeFromPV("data", &v1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "nfs"}}, "c", false); err == nil {
		t.Error("a PersistentVolume without a CSI source was accepted")
	}

	pod := testPod()
	fs := "xfs"
	in := volumeFromInline(pod, v1.Volume{Name: "scratch", VolumeSource: v1.VolumeSource{CSI: &v1.CSIVolumeSource{
		Driver: "d", FSType: &fs, ReadOnly: ptrTo(true), VolumeAttributes: map[string]string{"k": "v"},
		NodePublishSecretRef: &v1.LocalObjectReference{Name: "creds"},
	}}})
	if !in.inline || in.handle != inlineVolumeHandle("uid-1", "scratch") || in.fsType != "xfs" || !in.readOnly ||
		in.publishRef.Namespace != "ns1" || in.specName != "scratch" {
		t.Errorf("inline volume = %+v", in)
	}
}

func TestExpansionPending(t *testing.T) {
	tests := []struct {
		name   string
		status v1.PersistentVolumeClaimStatus
		want   bool
	}{
		{"nothing", v1.PersistentVolumeClaimStatus{}, false},
		{"NodeResizePending", v1.PersistentVolumeClaimStatus{AllocatedResourceStatuses: map[v1.ResourceName]v1.ClaimResourceStatus{
			v1.ResourceStorage: v1.PersistentVolumeClaimNodeResizePending}}, true},
		{"ControllerResizeInProgress", v1.PersistentVolumeClaimStatus{AllocatedResourceStatuses: map[v1.ResourceName]v1.ClaimResourceStatus{
			v1.ResourceStorage: v1.PersistentVolumeClaimControllerResizeInProgress}}, false},
		{"FileSystemResizePending", v1.PersistentVolumeClaimStatus{Conditions: []v1.PersistentVolumeClaimCondition{{
			Type: v1.PersistentVolumeClaimFileSystemResizePending, Status: v1.ConditionTrue}}}, true},
	}
	for _, tt := range tests {
		if got := expansionPending(&v1.PersistentVolumeClaim{Status: tt.status}); got != tt.want {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestAttachRequiredDefaultsToTrue(t *testing.T) {
	if !attachRequired(nil) || !attachRequired(csiDriver(nil)) || attachRequired(csiDriver(func(s *storagev1.CSIDriverSpec) { s.AttachRequired = ptrTo(false) })) {
		t.Error("attachRequired: want true without a CSIDriver or field, false when set false")
	}
}
