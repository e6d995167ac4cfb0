package driver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stowage-csi/stowage/s3-node/internal/attachments"
	"github.com/stowage-csi/stowage/s3-node/internal/mounter"
	"github.com/stowage-csi/stowage/s3-node/internal/testutil"
	"github.com/stowage-csi/stowage/shared/mountproto"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// fakeLookup answers from fixed objects.
type fakeLookup struct {
	att    *s3api.MountpointS3PodAttachment
	pod    *corev1.Pod
	err    error
	gotKey attachments.Key
}

func (f *fakeLookup) Find(_ context.Context, k attachments.Key, uid string) (*s3api.MountpointS3PodAttachment, string, error) {
	f.gotKey = k
	if f.err != nil {
		return nil, "", f.err
	}
	if name := f.att.MountpointPodFor(uid); name != "" {
		return f.att, name, nil
	}
	return nil, "", fmt.Errorf("workload %s: %w", uid, attachments.ErrNotFound)
}

func (f *fakeLookup) RunningPod(context.Context, string) (*corev1.Pod, error) { return f.pod, nil }

// rig is a driver on a fake mount table whose "Mountpoint" answers each message with onSend.
type rig struct {
	d      *Driver
	sys    *testutil.FakeSys
	lookup *fakeLookup
	paths  mounter.Paths
	mu     sync.Mutex
	sent   []mountproto.Options
	onSend func(comm string) // e.g. write mount.err
	// sendHook replaces the delivery (a Mountpoint Pod that is not listening).
	sendHook func(ctx context.Context) error
}

const mpUID = "mp-uid"

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{sys: testutil.NewFakeSys(), paths: mounter.Paths{Kubelet: t.TempDir()}}
	r.lookup = &fakeLookup{
		att: &s3api.MountpointS3PodAttachment{Spec: s3api.MountpointS3PodAttachmentSpec{
			MountpointS3PodAttachments: map[string][]s3api.WorkloadPodAttachment{"mp-1": {{WorkloadPodUID: "w1"}, {WorkloadPodUID: "w2"}}},
		}},
		pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "mp-1", Namespace: "mount-s3", UID: types.UID(mpUID)}},
	}
	m := mounter.New(mounter.Config{Sys: r.sys, Paths: r.paths, Send: func(ctx context.Context, sock string, o mountproto.Options) error {
		if r.sendHook != nil {
			return r.sendHook(ctx)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.sent = append(r.sent, o)
		if r.onSend != nil {
			r.onSend(filepath.Dir(sock))
		}
		return nil
	}})
	r.d = New(Options{NodeID: "node-1", Version: "v9", KubernetesVersion: "v1.36.3", Lookup: r.lookup, Mounter: m,
		NodeEnv: map[string]string{"AWS_REGION": "eu-west-1"}})
	return r
}

func (r *rig) target(uid string) string {
	return filepath.Join(r.paths.Kubelet, "pods", uid, "volumes", "kubernetes.io~csi", "pv-1", "mount")
}

func (r *rig) source() string { return r.paths.Source("mp-1") }

func (r *rig) comm() string { return r.paths.CommDir(mpUID) }

// publishReq is a kubelet-like request for workload uid.
func (r *rig) publishReq(uid string, flags ...string) *csi.NodePublishVolumeRequest {
	return &csi.NodePublishVolumeRequest{
		VolumeId:   "vol-1",
		TargetPath: r.target(uid),
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{MountFlags: flags}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		},
		VolumeContext: map[string]string{"bucketName": "bucket-1", "csi.storage.k8s.io/pod.uid": uid},
	}
}

func (r *rig) sentCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

func mustExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
