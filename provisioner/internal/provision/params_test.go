package provision

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/stowage-csi/stowage/provisioner/internal/testutil"
)

func TestParseClassParams(t *testing.T) {
	tests := []struct {
		name       string
		params     map[string]string
		wantKey    string // ParamError key, "" for success
		wantDriver int
		wantFS     string
		check      func(*testing.T, *classParams)
	}{
		{name: "plain driver params pass through", params: map[string]string{"type": "gp3", "iops": "3000"}, wantDriver: 2},
		{name: "prefixed fstype is stripped", params: map[string]string{fsTypeKey: "ext4", "a": "b"}, wantDriver: 1, wantFS: "ext4"},
		{name: "deprecated fstype is used and passed on", params: map[string]string{"fstype": "xfs"}, wantDriver: 1, wantFS: "xfs"},
		{name: "both fstypes", params: map[string]string{"fstype": "xfs", fsTypeKey: "ext4"}, wantKey: "fstype"},
		// Upstream matches the deprecated key in any case, the prefixed one exactly.
		{name: "deprecated fsType in camel case is used and passed on", params: map[string]string{"fsType": "xfs"}, wantDriver: 1, wantFS: "xfs"},
		{name: "deprecated FSTYPE in upper case is used", params: map[string]string{"FSTYPE": "btrfs", "a": "b"}, wantDriver: 2, wantFS: "btrfs"},
		{name: "fsType and the prefixed key", params: map[string]string{"fsType": "xfs", fsTypeKey: "ext4"}, wantKey: "fsType"},
		{name: "fstype and fsType", params: map[string]string{"fsType": "xfs", "fstype": "ext4"}, wantKey: "fsType"},
		{name: "prefixed key in another case is unknown", params: map[string]string{paramPrefix + "fsType": "ext4"}, wantKey: paramPrefix + "fsType"},
		{name: "unknown prefixed key", params: map[string]string{paramPrefix + "provisioner-secret": "x"}, wantKey: paramPrefix + "provisioner-secret"},
		{name: "namespace without name", params: map[string]string{paramPrefix + "node-publish-secret-namespace": "ns"}, wantKey: paramPrefix + "node-publish-secret-name"},
		{name: "empty name", params: map[string]string{paramPrefix + "node-publish-secret-name": "", paramPrefix + "node-publish-secret-namespace": "ns"}, wantKey: paramPrefix + "node-publish-secret-name"},
		{
			name:   "default secret applies to every kind",
			params: map[string]string{defaultSecretNameKey: "s", defaultSecretNamespaceKey: "ns"},
			check: func(t *testing.T, c *classParams) {
				for k, s := range c.secrets {
					if s == nil || s.name != "s" {
						t.Errorf("secret kind %d = %v", k, s)
					}
				}
			},
		},
		{
			name:       "deprecated secret keys are used and passed on",
			params:     map[string]string{"csiProvisionerSecretName": "s", "csiProvisionerSecretNamespace": "ns"},
			wantDriver: 2,
			check: func(t *testing.T, c *classParams) {
				if s := c.secrets[secretProvisioner]; s == nil || s.name != "s" {
					t.Errorf("provisioner secret %v", s)
				}
			},
		},
		{
			name: "deprecated and new together",
			params: map[string]string{
				"csiProvisionerSecretName": "s", "csiProvisionerSecretNamespace": "ns",
				paramPrefix + "provisioner-secret-name": "s", paramPrefix + "provisioner-secret-namespace": "ns",
			},
			wantKey: "csiProvisionerSecretName",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseClassParams(tc.params)
			var pe *ParamError
			if tc.wantKey != "" {
				if !errors.As(err, &pe) || pe.Key != tc.wantKey {
					t.Fatalf("err = %v, want a ParamError for %q", err, tc.wantKey)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got.driver) != tc.wantDriver || got.fsType != tc.wantFS {
				t.Errorf("driver params %v fstype %q", got.driver, got.fsType)
			}
			if tc.check != nil {
				tc.check(t, got)
			}
		})
	}
}

func TestResolveSecret(t *testing.T) {
	claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{
		Namespace: "team", Name: "data", Annotations: map[string]string{"owner": "alice", "bad": "Not_Valid"},
	}}
	tests := []struct {
		name, tmplName, tmplNS string
		wantName, wantNS       string
		wantErrKey             string
	}{
		{name: "all name templates", tmplName: "${pv.name}-${pvc.name}-${pvc.namespace}-${pvc.annotations['owner']}", tmplNS: "${pvc.namespace}",
			wantName: "pvc-1-data-team-alice", wantNS: "team"},
		{name: "pv name as namespace", tmplName: "s", tmplNS: "${pv.name}", wantName: "s", wantNS: "pvc-1"},
		{name: "pvc name not allowed in namespace", tmplName: "s", tmplNS: "${pvc.name}", wantErrKey: "nsKey"},
		{name: "annotation not allowed in namespace", tmplName: "s", tmplNS: "${pvc.annotations['owner']}", wantErrKey: "nsKey"},
		{name: "unknown variable", tmplName: "${pod.name}", tmplNS: "x", wantErrKey: "nameKey"},
		{name: "result is no valid name", tmplName: "${pvc.annotations['bad']}", tmplNS: "x", wantErrKey: "nameKey"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ref, err := resolveSecret(&secretTemplate{name: tc.tmplName, namespace: tc.tmplNS, nameKey: "nameKey", namespaceKey: "nsKey"}, "pvc-1", claim)
			if tc.wantErrKey != "" {
				var pe *ParamError
				if !errors.As(err, &pe) || pe.Key != tc.wantErrKey {
					t.Fatalf("err = %v, want ParamError for %s", err, tc.wantErrKey)
				}
				return
			}
			if err != nil || ref.name != tc.wantName || ref.namespace != tc.wantNS {
				t.Fatalf("got %v, %v; want %s/%s", ref, err, tc.wantNS, tc.wantName)
			}
		})
	}
}

func TestVolumeCapabilities(t *testing.T) {
	snw := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	tests := []struct {
		name  string
		modes []v1.PersistentVolumeAccessMode
		snmw  bool
		want  []csi.VolumeCapability_AccessMode_Mode
		err   bool
	}{
		{"RWO without SNMW", []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, false, []csi.VolumeCapability_AccessMode_Mode{snw}, false},
		{"RWOP without SNMW", []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}, false, []csi.VolumeCapability_AccessMode_Mode{snw}, false},
		{"RWO with SNMW", []v1.PersistentVolumeAccessMode{v1.ReadWriteOnce}, true, []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER}, false},
		{"RWOP with SNMW", []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod}, true, []csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER}, false},
		{"RWX and ROX", []v1.PersistentVolumeAccessMode{v1.ReadWriteMany, v1.ReadOnlyMany}, false,
			[]csi.VolumeCapability_AccessMode_Mode{csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY}, false},
		{"RWOP with another mode", []v1.PersistentVolumeAccessMode{v1.ReadWriteOncePod, v1.ReadWriteOnce}, true, nil, true},
		{"no mode", nil, false, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			caps, err := volumeCapabilities(tc.modes, tc.name == "RWX and ROX", "ext4", nil, tc.snmw)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v", err)
			}
			if len(caps) != len(tc.want) {
				t.Fatalf("got %d capabilities, want %d", len(caps), len(tc.want))
			}
			for i, c := range caps {
				if c.AccessMode.Mode != tc.want[i] {
					t.Errorf("capability %d mode %v, want %v", i, c.AccessMode.Mode, tc.want[i])
				}
				if (c.GetBlock() != nil) != (tc.name == "RWX and ROX") {
					t.Errorf("capability %d access type %v", i, c.AccessType)
				}
			}
		})
	}
}

func TestVolumeName(t *testing.T) {
	p := New(Config{VolumeNamePrefix: "pvc", VolumeNameUUIDLength: -1}, Deps{})
	if got := p.volumeName("ab-cd-ef"); got != "pvc-ab-cd-ef" {
		t.Errorf("got %q", got)
	}
	p.cfg.VolumeNameUUIDLength = 4
	if got := p.volumeName("ab-cd-ef"); got != "pvc-abcd" {
		t.Errorf("got %q", got)
	}
}

func FuzzParseClassParams(f *testing.F) {
	f.Add("csi.storage.k8s.io/fstype", "ext4", "csi.storage.k8s.io/secret-name", "${pvc.annotations['x']}")
	f.Add("fstype", "xfs", "csi.storage.k8s.io/provisioner-secret-namespace", "${pv.name}")
	f.Fuzz(func(t *testing.T, k1, v1s, k2, v2 string) {
		c, err := parseClassParams(map[string]string{k1: v1s, k2: v2})
		if err != nil {
			return
		}
		claim := &v1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "n", Annotations: map[string]string{"x": v2}}}
		for _, s := range c.secrets {
			_, _ = resolveSecret(s, "pvc-1", claim)
		}
	})
}

// The deprecated key in camel case reaches the volume capability and the PV, and the driver still gets it.
func TestCamelCaseFSTypeReachesThePV(t *testing.T) {
	claim := testutil.Claim("ns", "data", uid, "fast", "1Gi")
	h := newHarness(t, defaultConfig(), claim, testutil.Class("fast", map[string]string{"fsType": "xfs"}))
	if err := h.p.SyncClaim(context.Background(), claim.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	req := h.csi.Creates[0]
	if got := req.VolumeCapabilities[0].GetMount().GetFsType(); got != "xfs" {
		t.Errorf("CreateVolume mount fsType %q, want xfs", got)
	}
	if req.Parameters["fsType"] != "xfs" {
		t.Errorf("driver parameters %v lack the deprecated fsType", req.Parameters)
	}
	if pv := h.pv(t, volName); pv.Spec.CSI == nil || pv.Spec.CSI.FSType != "xfs" {
		t.Errorf("PV CSI source %+v, want fsType xfs", pv.Spec.CSI)
	}
}
