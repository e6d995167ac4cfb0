//go:build e2e

package s3node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/shared/mountproto"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// TestE2ES3Node walks one volume through the node plugin's life on real parts: two workloads share one
// Mountpoint, a file written through the first is in the bucket, unpublish and needs-unmount end the
// Mountpoint Pod and clean up, a read-only publish is read-only, a disallowed mount option and a missing
// bucket are refused with their reason and leave nothing mounted, and the startup taint is removed.
func TestE2ES3Node(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	bucket := fmt.Sprintf("b-%d", time.Now().UnixNano())
	if err := e.srv.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.PutObject(ctx, bucket, "hello.txt", []byte("from S3")); err != nil {
		t.Fatal(err)
	}

	t.Run("startup taint removed", func(t *testing.T) {
		rig.Eventually(t, ctx, time.Minute, "the agent-not-ready taint gone", func(ctx context.Context) (bool, error) {
			n, err := e.c.Client().CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return len(n.Spec.Taints) == 0 || !slices.ContainsFunc(n.Spec.Taints, func(tt corev1.Taint) bool { return tt.Key == s3api.TaintAgentNotReady }), nil
		})
	})

	pod, mp := e.mpPod(ctx, "mp-e2e-1")
	att := e.attachment(ctx, "pv-1", "vol-1", pod.Name, "w1")
	opts := e.mountOptions("allow-delete", "allow-overwrite")
	source := e.source(pod.Name)

	t.Run("publish mounts through the Mountpoint Pod and writes reach the bucket", func(t *testing.T) {
		if _, err := e.node.NodePublishVolume(ctx, e.publishReq(bucket, "pv-1", "vol-1", "w1", opts...)); err != nil {
			t.Fatal(err)
		}
		tgt := e.target("w1", "pv-1")
		if got, err := os.ReadFile(filepath.Join(tgt, "hello.txt")); err != nil || string(got) != "from S3" {
			t.Fatalf("read through the target: %q, %v", got, err)
		}
		if err := os.WriteFile(filepath.Join(tgt, "written.txt"), []byte("by w1"), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := e.srv.GetObject(ctx, bucket, "written.txt"); err != nil || string(got) != "by w1" {
			t.Fatalf("object written through the target: %q, %v", got, err)
		}
		// Credentials went as an AWS profile in the comm directory, with upstream's modes.
		creds := filepath.Join(e.commDir(pod), mountproto.CredentialsDir)
		entries, err := os.ReadDir(creds)
		if err != nil || len(entries) != 2 {
			t.Fatalf("credential files: %v, %v", entries, err)
		}
		for _, en := range entries {
			info, _ := en.Info()
			if info.Mode().Perm() != 0o640 || !strings.HasPrefix(en.Name(), string(pod.UID)+"-vol-1-s3-csi-") {
				t.Errorf("credential file %s mode %v", en.Name(), info.Mode().Perm())
			}
		}
		// A republish (requiresRepublish) refreshes credentials and mounts nothing new.
		if _, err := e.node.NodePublishVolume(ctx, e.publishReq(bucket, "pv-1", "vol-1", "w1", opts...)); err != nil {
			t.Fatal(err)
		}
		if n := mp.received.Load(); n != 1 {
			t.Fatalf("the Mountpoint Pod received %d mounts, want 1", n)
		}
	})

	t.Run("a second workload shares the source", func(t *testing.T) {
		addWorkload(t, e, att, pod.Name, "w2")
		if _, err := e.node.NodePublishVolume(ctx, e.publishReq(bucket, "pv-1", "vol-1", "w2", opts...)); err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(e.target("w2", "pv-1"), "written.txt")); err != nil || string(got) != "by w1" {
			t.Fatalf("read through the second target: %q, %v", got, err)
		}
		if n := mp.received.Load(); n != 1 {
			t.Fatalf("the Mountpoint Pod received %d mounts, want 1 (shared)", n)
		}
	})

	t.Run("a disallowed mount option is refused by name", func(t *testing.T) {
		_, err := e.node.NodePublishVolume(ctx, e.publishReq(bucket, "pv-1", "vol-1", "w3", e.mountOptions("fsname evil")...))
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"fsname evil"`) {
			t.Fatalf("error %v, want InvalidArgument naming the option", err)
		}
	})

	t.Run("unpublish and needs-unmount end the Mountpoint Pod", func(t *testing.T) {
		for _, w := range []string{"w1", "w2"} {
			if _, err := e.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: e.target(w, "pv-1")}); err != nil {
				t.Fatal(err)
			}
		}
		if left := mounts(e.kubelet + "/pods"); len(left) != 0 {
			t.Fatalf("targets still mounted: %v", left)
		}
		if !slices.Contains(mounts(source), source) {
			t.Fatal("the source went with the workloads; it should wait for needs-unmount")
		}
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, s3api.AnnotationNeedsUnmount)
		if _, err := e.c.Client().CoreV1().Pods(namespace).Patch(ctx, pod.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-mp.done:
		case <-time.After(time.Minute):
			t.Fatal("the Mountpoint Pod did not end within a minute of needs-unmount")
		}
		if !mountproto.Exited(e.commDir(pod)) {
			t.Fatal("no mount.exit")
		}
		rig.Eventually(t, ctx, 30*time.Second, "source unmounted and removed, credentials deleted", func(context.Context) (bool, error) {
			_, srcErr := os.Stat(source)
			_, credErr := os.Stat(filepath.Join(e.commDir(pod), mountproto.CredentialsDir))
			return len(mounts(source)) == 0 && os.IsNotExist(srcErr) && os.IsNotExist(credErr), nil
		})
	})

	t.Run("a read-only publish mounts read-only", func(t *testing.T) {
		pod3, _ := e.mpPod(ctx, "mp-e2e-3")
		e.attachment(ctx, "pv-3", "vol-3", pod3.Name, "w5")
		req := e.publishReq(bucket, "pv-3", "vol-3", "w5", e.mountOptions()...)
		req.Readonly = true
		if _, err := e.node.NodePublishVolume(ctx, req); err != nil {
			t.Fatal(err)
		}
		tgt := e.target("w5", "pv-3")
		if got, err := os.ReadFile(filepath.Join(tgt, "written.txt")); err != nil || string(got) != "by w1" {
			t.Fatalf("read through the read-only target: %q, %v", got, err)
		}
		if err := os.WriteFile(filepath.Join(tgt, "ro.txt"), []byte("x"), 0o644); !errors.Is(err, syscall.EROFS) {
			t.Fatalf("write through the read-only target: %v, want EROFS", err)
		}
		if _, err := e.node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-3", TargetPath: tgt}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("a missing bucket reports Mountpoint's error and leaves nothing mounted", func(t *testing.T) {
		pod2, mp2 := e.mpPod(ctx, "mp-e2e-2")
		e.attachment(ctx, "pv-2", "vol-2", pod2.Name, "w4")
		_, err := e.node.NodePublishVolume(ctx, e.publishReq("no-such-bucket", "pv-2", "vol-2", "w4", e.mountOptions()...))
		if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), "Mountpoint in Pod mp-e2e-2 failed") {
			t.Fatalf("error %v, want Internal with Mountpoint's error", err)
		}
		errFile, _ := os.ReadFile(filepath.Join(e.commDir(pod2), mountproto.ErrorName))
		if len(strings.TrimSpace(string(errFile))) == 0 || !strings.Contains(err.Error(), strings.TrimSpace(string(errFile))) {
			t.Fatalf("error %q does not carry mount.err %q", err, errFile)
		}
		t.Logf("NodePublishVolume: %v", err)
		for _, path := range []string{e.source(pod2.Name), e.target("w4", "pv-2")} {
			if left := mounts(path); len(left) != 0 {
				t.Fatalf("left mounted: %v", left)
			}
		}
		if mp2.received.Load() < 1 {
			t.Fatal("the Mountpoint Pod never received the mount")
		}
	})
}

// addWorkload adds a workload to the attachment, as the controller does when it shares a Mountpoint Pod.
func addWorkload(t *testing.T, e *env, att *unstructured.Unstructured, mpPod, uid string) {
	t.Helper()
	patch := fmt.Sprintf(`[{"op":"add","path":"/spec/mountpointS3PodAttachments/%s/-","value":{"workloadPodUID":%q,"attachmentTime":%q}}]`,
		mpPod, uid, time.Now().UTC().Format(time.RFC3339))
	if _, err := e.dyn.Resource(s3api.GroupVersionResource()).Patch(context.Background(), att.GetName(), types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
