package driver

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/s3-node/internal/testutil"
)

func TestPublishMountsOnceAndSharesTheSource(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	if _, err := r.d.NodePublishVolume(ctx, r.publishReq("w1", "region us-east-2", "allow-delete", "aws-max-attempts 3")); err != nil {
		t.Fatal(err)
	}
	if r.sentCount() != 1 {
		t.Fatalf("sent %d messages, want 1", r.sentCount())
	}
	o := r.sent[0]
	wantArgs := []string{"--allow-delete", "--allow-root", "--region=us-east-2", "--user-agent-prefix=s3-csi-driver/v9 credential-source#driver k8s/v1.36.3 md/install#unknown"}
	if o.BucketName != "bucket-1" || !reflect.DeepEqual(o.Args, wantArgs) {
		t.Errorf("message bucket %q args %q, want bucket-1 %q", o.BucketName, o.Args, wantArgs)
	}
	if want := []string{"AWS_MAX_ATTEMPTS=3", "AWS_REGION=eu-west-1"}; !reflect.DeepEqual(o.Env, want) {
		t.Errorf("env %q, want %q", o.Env, want)
	}
	if r.sys.OpenFds() != 0 {
		t.Errorf("%d FUSE fds left open", r.sys.OpenFds())
	}
	want := []testutil.Call{
		{Op: "mountfuse", Path: r.source(), AllowOther: true},
		{Op: "bind", Path: r.target("w1"), Source: r.source()},
	}
	if got := r.sys.Calls(); !reflect.DeepEqual(got, want) {
		t.Fatalf("calls %+v\nwant %+v", got, want)
	}
	mustExist(t, filepath.Join(r.comm(), "credentials"))

	// A second workload shares the source: one more bind, no message.
	if _, err := r.d.NodePublishVolume(ctx, r.publishReq("w2")); err != nil {
		t.Fatal(err)
	}
	if r.sentCount() != 1 || len(r.sys.Calls()) != 3 || r.sys.Calls()[2].Op != "bind" {
		t.Fatalf("second workload: %d messages, calls %+v", r.sentCount(), r.sys.Calls())
	}
	// A republish (requiresRepublish, or a retry after a timeout) changes no mount.
	if _, err := r.d.NodePublishVolume(ctx, r.publishReq("w1")); err != nil {
		t.Fatal(err)
	}
	if r.sentCount() != 1 || len(r.sys.Calls()) != 3 {
		t.Fatalf("republish: %d messages, calls %+v", r.sentCount(), r.sys.Calls())
	}
}

// The republish refreshes the pod-level token in place.
func TestRepublishRefreshesCredentials(t *testing.T) {
	r := newRig(t)
	r.d.opts.PodIdentityAgentURI = "http://agent"
	ctx := context.Background()
	req := func(tok string) *csi.NodePublishVolumeRequest {
		q := r.publishReq("w1")
		q.VolumeContext["authenticationSource"] = "pod"
		q.VolumeContext["csi.storage.k8s.io/serviceAccount.tokens"] = `{"pods.eks.amazonaws.com":{"token":"` + tok + `"}}`
		return q
	}
	tokenFile := filepath.Join(r.comm(), "credentials", mpUID+"-vol-1-eks-pod-identity.token")
	for _, tok := range []string{"t1", "t2"} {
		if _, err := r.d.NodePublishVolume(ctx, req(tok)); err != nil {
			t.Fatal(err)
		}
		if b, _ := os.ReadFile(tokenFile); string(b) != tok {
			t.Fatalf("token file %q, want %q", b, tok)
		}
	}
	if r.sentCount() != 1 {
		t.Fatalf("%d messages, want 1", r.sentCount())
	}
	env := r.sent[0].Env
	for _, want := range []string{"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE=/comm/credentials/" + mpUID + "-vol-1-eks-pod-identity.token", "AWS_EC2_METADATA_DISABLED=true"} {
		if !slices.Contains(env, want) {
			t.Errorf("env %q lacks %q", env, want)
		}
	}
	if k := r.lookup.gotKey; k.AuthenticationSource != "pod" || k.PVName != "pv-1" || k.NodeName != "node-1" || k.VolumeID != "vol-1" {
		t.Errorf("lookup key %+v", k)
	}
}

func TestPublishReadOnly(t *testing.T) {
	r := newRig(t)
	q := r.publishReq("w1", "read-only")
	if _, err := r.d.NodePublishVolume(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	calls := r.sys.Calls()
	if !calls[0].ReadOnly || !calls[1].ReadOnly || slices.Contains(r.sent[0].Args, "--read-only") {
		t.Fatalf("calls %+v args %q: want a read-only kernel mount and bind, no --read-only", calls, r.sent[0].Args)
	}
}

// Mountpoint's failure is reported with mount.err's content, and nothing stays mounted.
func TestPublishReportsMountErr(t *testing.T) {
	r := newRig(t)
	r.sys.StatErr[r.source()] = syscall.ENOTCONN
	r.onSend = func(comm string) {
		_ = os.WriteFile(filepath.Join(comm, "mount.err"), []byte("Error: bucket nope does not exist\n"), 0o600)
	}
	_ = os.MkdirAll(r.comm(), 0o755)
	_, err := r.d.NodePublishVolume(context.Background(), r.publishReq("w1"))
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "bucket nope does not exist") {
		t.Fatalf("error %v, want Internal with mount.err's content", err)
	}
	if mps := r.sys.MountPoints(); len(mps) != 0 || r.sys.OpenFds() != 0 {
		t.Fatalf("left mounted %v, %d fds open", mps, r.sys.OpenFds())
	}
	// A retry with Mountpoint fixed mounts, after the old mount.err was removed.
	delete(r.sys.StatErr, r.source())
	r.onSend = nil
	if _, err := r.d.NodePublishVolume(context.Background(), r.publishReq("w1")); err != nil {
		t.Fatal(err)
	}
}

func TestPublishInvalid(t *testing.T) {
	r := newRig(t)
	tests := []struct {
		name   string
		mutate func(*csi.NodePublishVolumeRequest)
		want   string
	}{
		{"no volume id", func(q *csi.NodePublishVolumeRequest) { q.VolumeId = "" }, "volume_id"},
		{"no target", func(q *csi.NodePublishVolumeRequest) { q.TargetPath = "" }, "target_path"},
		{"no capability", func(q *csi.NodePublishVolumeRequest) { q.VolumeCapability = nil }, "volume_capability"},
		{"block", func(q *csi.NodePublishVolumeRequest) {
			q.VolumeCapability.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		}, "mount access type"},
		{"no bucket", func(q *csi.NodePublishVolumeRequest) { delete(q.VolumeContext, "bucketName") }, "bucketName"},
		{"bad auth source", func(q *csi.NodePublishVolumeRequest) { q.VolumeContext["authenticationSource"] = "x" }, "authenticationSource"},
		{"env not allowed", func(q *csi.NodePublishVolumeRequest) { q.VolumeContext["mountpointEnv.AWS_PROFILE"] = "x" }, "mountpointEnv.AWS_PROFILE"},
		{"option not allowed", func(q *csi.NodePublishVolumeRequest) {
			q.VolumeCapability.GetMount().MountFlags = []string{"allow-delete", "fsname x"}
		}, `"fsname x"`},
		{"ca-bundle", func(q *csi.NodePublishVolumeRequest) {
			q.VolumeCapability.GetMount().MountFlags = []string{"--ca-bundle=/x"}
		}, "ca-bundle"},
		{"target not kubelet's", func(q *csi.NodePublishVolumeRequest) { q.TargetPath = "/tmp/x" }, "not a kubelet CSI volume path"},
		{"bad fsGroup", func(q *csi.NodePublishVolumeRequest) { q.VolumeCapability.GetMount().VolumeMountGroup = "abc" }, "volume_mount_group"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := r.publishReq("w1")
			tt.mutate(q)
			_, err := r.d.NodePublishVolume(context.Background(), q)
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want InvalidArgument naming %q", err, tt.want)
			}
		})
	}
	if len(r.sys.Calls()) != 0 {
		t.Fatalf("invalid requests mounted: %+v", r.sys.Calls())
	}
}

func TestPublishWithoutAttachmentIsRetriable(t *testing.T) {
	r := newRig(t)
	_, err := r.d.NodePublishVolume(context.Background(), r.publishReq("unknown-workload"))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "unknown-workload") {
		t.Fatalf("error %v, want Unavailable naming the workload", err)
	}
}

func TestMergeEnvPrecedence(t *testing.T) {
	user := map[string]string{"HTTPS_PROXY": "http://proxy", "AWS_REGION": "user"}
	node := map[string]string{"AWS_REGION": "node", "AWS_STS_REGIONAL_ENDPOINTS": "regional"}
	cred := map[string]string{"AWS_REGION": "sts", "AWS_ROLE_ARN": "arn"}
	got := mergeEnv(user, nil, node, cred)
	want := []string{"AWS_REGION=sts", "AWS_ROLE_ARN=arn", "AWS_STS_REGIONAL_ENDPOINTS=regional", "HTTPS_PROXY=http://proxy"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("mergeEnv = %q, want %q", got, want)
	}
	if got := mergeEnv(user, nil, node); !slices.Contains(got, "AWS_REGION=node") {
		t.Fatalf("node default does not win over the user's: %q", got)
	}
}

func TestPublishFSGroupAndProxy(t *testing.T) {
	r := newRig(t)
	q := r.publishReq("w1")
	q.VolumeCapability.GetMount().VolumeMountGroup = "4000"
	q.VolumeContext["mountpointEnv.HTTPS_PROXY"] = "http://proxy:3128"
	if _, err := r.d.NodePublishVolume(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if r.lookup.gotKey.FSGroup != "4000" {
		t.Errorf("lookup fsGroup %q", r.lookup.gotKey.FSGroup)
	}
	for _, want := range []string{"--allow-other", "--gid=4000", "--dir-mode=770", "--file-mode=660"} {
		if !slices.Contains(r.sent[0].Args, want) {
			t.Errorf("args %q lack %q", r.sent[0].Args, want)
		}
	}
	if !slices.Contains(r.sent[0].Env, "HTTPS_PROXY=http://proxy:3128") {
		t.Errorf("env %q lacks the proxy", r.sent[0].Env)
	}
}

// A publish that runs out of time (the Mountpoint Pod never listened) leaves nothing behind, and the
// kubelet's retry mounts.
func TestPublishRetryAfterTimeout(t *testing.T) {
	r := newRig(t)
	r.sendHook = func(ctx context.Context) error {
		<-ctx.Done()
		return ctx.Err()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err := r.d.NodePublishVolume(ctx, r.publishReq("w1"))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("error %v, want DeadlineExceeded", err)
	}
	if mps := r.sys.MountPoints(); len(mps) != 0 || r.sys.OpenFds() != 0 {
		t.Fatalf("left mounted %v, %d fds open", mps, r.sys.OpenFds())
	}
	r.sendHook = nil
	if _, err := r.d.NodePublishVolume(context.Background(), r.publishReq("w1")); err != nil {
		t.Fatal(err)
	}
	if got := r.sys.MountPoints(); len(got) != 2 {
		t.Fatalf("mounts after the retry %v", got)
	}
}

// A publish through a Mountpoint Pod the node has asked to exit is retriable and sends nothing: the kubelet
// retries, and the workload, if it still exists, gets a new Pod from the controller.
func TestPublishThroughAnEndingPodIsRetriable(t *testing.T) {
	r := newRig(t)
	if err := os.MkdirAll(r.comm(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.comm(), "mount.exit"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := r.d.NodePublishVolume(context.Background(), r.publishReq("w1"))
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "mp-1") {
		t.Fatalf("error %v, want Unavailable naming the Mountpoint Pod", err)
	}
	if len(r.sent) != 0 || len(r.sys.MountPoints()) != 0 {
		t.Fatalf("sent %d mounts, mounted %v; want none", len(r.sent), r.sys.MountPoints())
	}
}
