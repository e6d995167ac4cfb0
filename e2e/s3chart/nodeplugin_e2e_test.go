//go:build e2e

package s3chart_test

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/s3install"
	"github.com/stowage-csi/stowage/e2e/s3server"
	"github.com/stowage-csi/stowage/shared/s3api"
)

// nodePluginRestart kills the node plugin's container under a mounted workload. The mount lives in the
// Mountpoint Pod, not in the plugin: the workload keeps writing, the kubelet restarts the plugin, and a new
// workload on the node mounts through the restarted plugin and shares the same Mountpoint Pod; deleting both
// cleans up as before.
func nodePluginRestart(t *testing.T, ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, n *node.Node, s3 *s3server.Server) {
	w := workload(t, ctx, client, "keep", n.Name, volume,
		"echo before > /data/np-before.txt && echo written && until [ -f /data/np-go ]; do sleep 1; done; "+
			"echo after > /data/np-after.txt && echo after-written && exec sleep 3600")
	waitLog(t, ctx, client, w.Name, "written")

	plugin := nodePluginPod(t, ctx, client, n.Name)
	var id string
	for _, cs := range plugin.Status.ContainerStatuses {
		if cs.Name == "s3-plugin" {
			id = containerID(cs)
		}
	}
	pids := processesInCgroup(t, id)
	if id == "" || len(pids) == 0 {
		t.Fatalf("no process of the s3-plugin container %q of %s", id, plugin.Name)
	}
	for _, pid := range pids {
		p, err := strconv.Atoi(pid)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(p, syscall.SIGKILL); err != nil {
			t.Fatalf("kill s3-plugin process %d: %v", p, err)
		}
	}
	rig.Eventually(t, ctx, 3*time.Minute, "the kubelet to restart s3-plugin on "+n.Name, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(s3install.Namespace).Get(ctx, plugin.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == "s3-plugin" {
				return cs.RestartCount > 0 && cs.Ready && containerID(cs) != id, nil
			}
		}
		return false, nil
	})

	if err := s3.PutObject(ctx, bucket, "np-go", nil); err != nil {
		t.Fatal(err)
	}
	waitLog(t, ctx, client, w.Name, "after-written")
	if got, err := s3.GetObject(ctx, bucket, "np-after.txt"); err != nil || string(got) != "after\n" {
		t.Errorf("object np-after.txt written after the plugin's restart = %q, %v; want %q", got, err, "after\n")
	}

	r := workload(t, ctx, client, "after-restart", n.Name, volume, "cat /data/np-before.txt && echo read-done && exec sleep 3600")
	waitLog(t, ctx, client, r.Name, "before\nread-done")
	atts, err := s3install.ListAttachments(ctx, dyn)
	if err != nil {
		t.Fatal(err)
	}
	serving := map[string]string{}
	for _, a := range atts {
		for mp, workloads := range a.Spec.MountpointS3PodAttachments {
			for _, wl := range workloads {
				serving[wl.WorkloadPodUID] = mp
			}
		}
	}
	if a, b := serving[string(w.UID)], serving[string(r.UID)]; a == "" || a != b {
		t.Errorf("the workload from before the restart is served by Mountpoint Pod %q, the one after by %q: want one shared", a, b)
	}

	deletePods(t, ctx, client, w.Name, r.Name)
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

// nodePluginPod is the stowage-s3 node plugin Pod on nodeName.
func nodePluginPod(t *testing.T, ctx context.Context, client kubernetes.Interface, nodeName string) *corev1.Pod {
	t.Helper()
	pods, err := client.CoreV1().Pods(s3install.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=s3-csi-node",
		FieldSelector: "spec.nodeName=" + nodeName})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 {
		t.Fatalf("%d node plugin Pods on %s, want 1", len(pods.Items), nodeName)
	}
	return &pods.Items[0]
}
