package driver

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/s3-node/internal/attachments"
	"github.com/stowage-csi/stowage/s3-node/internal/credentials"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// inlineReq is the kubelet's request for the inline volume "data" of workload uid.
func (r *rig) inlineReq(uid string, attrs map[string]string) *csi.NodePublishVolumeRequest {
	vc := map[string]string{"bucketName": "bucket-1", "csi.storage.k8s.io/ephemeral": "true",
		"csi.storage.k8s.io/pod.uid": uid, "csi.storage.k8s.io/pod.namespace": "apps", "csi.storage.k8s.io/serviceAccount.name": "reader",
		"csi.storage.k8s.io/serviceAccount.tokens": `{"sts.amazonaws.com":{"token":"pod-token","expirationTimestamp":"x"}}`}
	for k, v := range attrs {
		vc[k] = v
	}
	return &csi.NodePublishVolumeRequest{
		VolumeId:   s3api.InlineVolumeHandle(uid, "data"),
		TargetPath: filepath.Join(r.paths.Kubelet, "pods", uid, "volumes", "kubernetes.io~csi", "data", "mount"),
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
		},
		VolumeContext: vc,
	}
}

// TestPublishInlineVolumeWithPodCredentials: an inline volume is looked up under the Pod's own volume name
// (<pod uid>-<volume>) and the kubelet's volume ID, and mounts with the Pod's token and the attachment's
// role, never with the driver's keys.
func TestPublishInlineVolumeWithPodCredentials(t *testing.T) {
	r := newRig(t)
	r.d.opts.DriverCredentials = credentials.DriverEnv{AccessKeyID: "driver-key", SecretAccessKey: "driver-secret"}
	r.lookup.att.Spec.WorkloadServiceAccountIAMRoleARN = "arn:aws:iam::1:role/reader"
	if _, err := r.d.NodePublishVolume(context.Background(), r.inlineReq("w1", map[string]string{"authenticationSource": "pod", "prefix": "team/"})); err != nil {
		t.Fatal(err)
	}
	want := attachments.Key{NodeName: "node-1", PVName: "w1-data", VolumeID: s3api.InlineVolumeHandle("w1", "data"),
		AuthenticationSource: "pod", WorkloadNamespace: "apps", WorkloadServiceAccount: "reader"}
	if r.lookup.gotKey != want {
		t.Errorf("lookup key %+v\nwant %+v", r.lookup.gotKey, want)
	}
	if r.sentCount() != 1 {
		t.Fatalf("sent %d messages, want 1", r.sentCount())
	}
	o := r.sent[0]
	if !slices.Contains(o.Args, "--prefix=team/") {
		t.Errorf("args %q lack the prefix", o.Args)
	}
	env := strings.Join(o.Env, " ")
	for _, w := range []string{"AWS_ROLE_ARN=arn:aws:iam::1:role/reader", "AWS_WEB_IDENTITY_TOKEN_FILE=/comm/credentials/", "AWS_EC2_METADATA_DISABLED=true"} {
		if !strings.Contains(env, w) {
			t.Errorf("env %q lacks %s", o.Env, w)
		}
	}
	if strings.Contains(env, "driver-key") || strings.Contains(env, "AWS_PROFILE") {
		t.Errorf("env %q carries the driver's credentials", o.Env)
	}
}

// TestPublishInlineRefusesDriverCredentials: an inline volume without authenticationSource pod is refused
// before any lookup or mount, and the error names the attribute.
func TestPublishInlineRefusesDriverCredentials(t *testing.T) {
	for _, tc := range []struct {
		name  string
		attrs map[string]string
	}{
		{name: "attribute unset (driver by default)"},
		{name: "driver", attrs: map[string]string{"authenticationSource": "driver"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			_, err := r.d.NodePublishVolume(context.Background(), r.inlineReq("w1", tc.attrs))
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "volume attribute authenticationSource") ||
				!strings.Contains(err.Error(), "inline") {
				t.Fatalf("err = %v, want InvalidArgument naming authenticationSource", err)
			}
			if r.lookup.gotKey != (attachments.Key{}) || len(r.sys.Calls()) != 0 || r.sentCount() != 0 {
				t.Errorf("looked up %+v, calls %+v, %d messages: want nothing", r.lookup.gotKey, r.sys.Calls(), r.sentCount())
			}
		})
	}
}
