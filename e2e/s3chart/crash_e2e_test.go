//go:build e2e

package s3chart_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3install"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// mountpointCrash kills the Mountpoint process of a mounted workload's Mountpoint Pod: the kubelet restarts
// the container (restartPolicy OnFailure), and once the workload that used the dead mount is gone, a new
// workload on the node mounts the volume again and reads it; then everything goes as before.
func mountpointCrash(t *testing.T, ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, n *node.Node) {
	w := workload(t, ctx, client, "crash-before", n.Name, volume, "echo crash > /data/crash.txt && echo written && exec sleep 3600")
	waitLog(t, ctx, client, w.Name, "written")
	mp := servingPod(t, ctx, dyn, string(w.UID))
	p, err := client.CoreV1().Pods(s3api.DefaultMountpointNamespace).Get(ctx, mp, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("Mountpoint Pod %s container statuses %+v", mp, p.Status.ContainerStatuses)
	}
	id := containerID(p.Status.ContainerStatuses[0])
	// Mountpoint's command line names the bucket; the mounter's does not.
	mountpoints, err := rig.ProcessesWith(bucket)
	if err != nil {
		t.Fatal(err)
	}
	var killed int
	for _, pid := range processesInCgroup(t, id) {
		if !containsPID(mountpoints, pid) {
			continue
		}
		num, err := strconv.Atoi(pid)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(num, syscall.SIGKILL); err != nil {
			t.Fatalf("kill Mountpoint process %d: %v", num, err)
		}
		killed++
	}
	if killed == 0 {
		t.Fatalf("no Mountpoint process of bucket %s in Mountpoint Pod %s", bucket, mp)
	}
	rig.Eventually(t, ctx, 3*time.Minute, "the kubelet to restart Mountpoint Pod "+mp, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(s3api.DefaultMountpointNamespace).Get(ctx, mp, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount > 0 && cs[0].Ready, nil
	})

	deletePods(t, ctx, client, w.Name)
	r := workload(t, ctx, client, "crash-after", n.Name, volume, "cat /data/crash.txt && echo read-done && exec sleep 3600")
	waitLog(t, ctx, client, r.Name, "crash\nread-done")
	deletePods(t, ctx, client, r.Name)
	rig.Eventually(t, ctx, 4*time.Minute, "the Mountpoint Pods and attachments to go", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(s3api.DefaultMountpointNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		atts, err := s3install.ListAttachments(ctx, dyn)
		return err == nil && len(pods.Items) == 0 && len(atts) == 0, err
	})
	if left := fuseMounts(t, n); len(left) > 0 {
		t.Errorf("FUSE mounts left on %s: %v", n.Name, left)
	}
}

// servingPod is the Mountpoint Pod an attachment names for the workload.
func servingPod(t *testing.T, ctx context.Context, dyn dynamic.Interface, workloadUID string) string {
	t.Helper()
	atts, err := s3install.ListAttachments(ctx, dyn)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range atts {
		if mp := a.MountpointPodFor(workloadUID); mp != "" {
			return mp
		}
	}
	t.Fatalf("no attachment serves workload %s", workloadUID)
	return ""
}

// containsPID reports whether a rig.ProcessesWith listing holds pid.
func containsPID(listing []string, pid string) bool {
	for _, l := range listing {
		if p, _, _ := strings.Cut(l, ":"); p == pid {
			return true
		}
	}
	return false
}
