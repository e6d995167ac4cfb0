package driver

import (
	"context"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/stowage-csi/stowage/s3-node/internal/credentials"
	sharedtestutil "github.com/stowage-csi/stowage/shared/testutil"
)

// irsaReq is a publish of workload uid with pod-level credentials through IRSA (the attachment has a role).
func (r *rig) irsaReq(uid string, attrs map[string]string, flags ...string) *csi.NodePublishVolumeRequest {
	r.lookup.att.Spec.WorkloadServiceAccountIAMRoleARN = "arn:aws:iam::1:role/workload"
	q := r.publishReq(uid, flags...)
	q.VolumeContext["authenticationSource"] = "pod"
	q.VolumeContext["csi.storage.k8s.io/serviceAccount.tokens"] = `{"sts.amazonaws.com":{"token":"t"},"pods.eks.amazonaws.com":{"token":"p"}}`
	for k, v := range attrs {
		q.VolumeContext[k] = v
	}
	return q
}

// withIMDS points the rig's driver at f, turned off by AWS_EC2_METADATA_DISABLED when disabled, and sets
// the node plugin's region variables to nodeEnv.
func (r *rig) withIMDS(t *testing.T, f *sharedtestutil.FakeIMDS, disabled bool, nodeEnv map[string]string) {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	// The SDK's IMDS client reads the variable when it is made.
	t.Setenv("AWS_EC2_METADATA_DISABLED", fmt.Sprint(disabled))
	r.d.opts.InstanceRegion = credentials.NewInstanceRegion(srv.URL)
	r.d.opts.NodeEnv = nodeEnv
}

func TestSTSRegionInUpstreamsOrder(t *testing.T) {
	for _, tc := range []struct {
		name     string
		attrs    map[string]string
		flags    []string
		nodeEnv  map[string]string
		want     string
		wantIMDS int
	}{
		{name: "volume attribute stsRegion", attrs: map[string]string{"stsRegion": "eu-north-1"}, flags: []string{"region eu-west-2"},
			nodeEnv: map[string]string{"AWS_REGION": "eu-west-1"}, want: "eu-north-1"},
		{name: "mount option region", flags: []string{"region eu-west-2"}, nodeEnv: map[string]string{"AWS_REGION": "eu-west-1"}, want: "eu-west-2"},
		{name: "node AWS_REGION", nodeEnv: map[string]string{"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "eu-west-3"}, want: "eu-west-1"},
		{name: "node AWS_DEFAULT_REGION", nodeEnv: map[string]string{"AWS_DEFAULT_REGION": "eu-west-3"}, want: "eu-west-3"},
		{name: "the node's region from IMDS", want: "ap-south-1", wantIMDS: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			imds := &sharedtestutil.FakeIMDS{Region: "ap-south-1"}
			r.withIMDS(t, imds, false, tc.nodeEnv)
			if _, err := r.d.NodePublishVolume(context.Background(), r.irsaReq("w1", tc.attrs, tc.flags...)); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"AWS_REGION=" + tc.want, "AWS_DEFAULT_REGION=" + tc.want, "AWS_ROLE_ARN=arn:aws:iam::1:role/workload"} {
				if !slices.Contains(r.sent[0].Env, want) {
					t.Errorf("Mountpoint's env %q lacks %q", r.sent[0].Env, want)
				}
			}
			if n := imds.Lookups(); n != tc.wantIMDS {
				t.Errorf("IMDS asked %d times, want %d", n, tc.wantIMDS)
			}
		})
	}
}

// The node's region is asked once and kept: later mounts and republishes do not ask again.
func TestSTSRegionFromIMDSIsKept(t *testing.T) {
	r := newRig(t)
	imds := &sharedtestutil.FakeIMDS{Region: "ap-south-1"}
	r.withIMDS(t, imds, false, nil)
	for _, uid := range []string{"w1", "w2", "w1"} {
		if _, err := r.d.NodePublishVolume(context.Background(), r.irsaReq(uid, nil)); err != nil {
			t.Fatalf("publish %s: %v", uid, err)
		}
	}
	if n := imds.Lookups(); n != 1 {
		t.Errorf("IMDS asked %d times over three publishes, want 1", n)
	}
}

func TestSTSRegionFailsOnlyAfterIMDS(t *testing.T) {
	for _, tc := range []struct {
		name     string
		region   string
		disabled bool
		wantErr  string
	}{
		{name: "IMDS without a region", wantErr: "404"},
		{name: "IMDS disabled", region: "ap-south-1", disabled: true, wantErr: "disabled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			imds := &sharedtestutil.FakeIMDS{Region: tc.region}
			r.withIMDS(t, imds, tc.disabled, nil)
			_, err := r.d.NodePublishVolume(context.Background(), r.irsaReq("w1", nil))
			if err == nil || !strings.Contains(err.Error(), "stsRegion") || !strings.Contains(err.Error(), "IMDS") || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("error %v, want one naming stsRegion and IMDS's %q", err, tc.wantErr)
			}
			if r.sentCount() != 0 || imds.Lookups() != 0 {
				t.Errorf("%d mounts sent, %d documents served: want none", r.sentCount(), imds.Lookups())
			}
		})
	}
}

// Pod Identity and driver credentials need no STS region: IMDS is not asked for them.
func TestSTSRegionIsNotAskedWithoutIRSA(t *testing.T) {
	r := newRig(t)
	imds := &sharedtestutil.FakeIMDS{Region: "ap-south-1"}
	r.withIMDS(t, imds, false, nil)
	r.d.opts.PodIdentityAgentURI = "http://agent"
	q := r.irsaReq("w1", nil)
	r.lookup.att.Spec.WorkloadServiceAccountIAMRoleARN = ""
	if _, err := r.d.NodePublishVolume(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if _, err := r.d.NodePublishVolume(context.Background(), r.publishReq("w2")); err != nil {
		t.Fatal(err)
	}
	if n := imds.Lookups(); n != 0 {
		t.Errorf("IMDS asked %d times, want 0", n)
	}
	if slices.ContainsFunc(r.sent[0].Env, func(e string) bool { return strings.HasPrefix(e, "AWS_REGION=") }) {
		t.Errorf("Pod Identity mount got an STS region: %q", r.sent[0].Env)
	}
}
