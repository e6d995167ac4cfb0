//go:build e2e

package s3chart_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// writeReadShare runs a writer on each node, then on each node a reader of the other node's file. The two
// Pods on a node share one Mountpoint Pod, as upstream shares (same volume, options, fsGroup and driver-level
// credentials). Each Mountpoint Pod is an unprivileged container of the s3-mounter image serving a FUSE
// mount the node plugin opened. Deleting the Pods unmounts, and removes the Mountpoint Pods and attachments.
//
// It returns the FUSE connections of the mounts, for the teardown's check.
func writeReadShare(t *testing.T, ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, c *node.Cluster, s3 *s3server.Server) []string {
	writers := map[string]*corev1.Pod{}
	for _, n := range c.Nodes {
		script := fmt.Sprintf("echo from-%[1]s > /data/%[1]s.txt && echo written && exec sleep 3600", n.Name)
		writers[n.Name] = workload(t, ctx, client, "write-"+n.Name, n.Name, volume, script)
	}
	for _, n := range c.Nodes {
		waitLog(t, ctx, client, "write-"+n.Name, "written")
		got, err := s3.GetObject(ctx, bucket, n.Name+".txt")
		if err != nil {
			t.Fatalf("object %s.txt in versitygw: %v", n.Name, err)
		}
		if want := "from-" + n.Name + "\n"; string(got) != want {
			t.Errorf("object %s.txt in versitygw = %q, want %q", n.Name, got, want)
		}
	}
	readers := map[string]*corev1.Pod{}
	for i, n := range c.Nodes {
		other := c.Nodes[1-i].Name
		script := fmt.Sprintf("cat /data/%s.txt && echo read-done && exec sleep 3600", other)
		readers[n.Name] = workload(t, ctx, client, "read-"+n.Name, n.Name, volume, script)
	}
	for i, n := range c.Nodes {
		waitLog(t, ctx, client, "read-"+n.Name, "from-"+c.Nodes[1-i].Name+"\nread-done")
	}

	// One Mountpoint Pod per node serves both of the node's workloads.
	atts, err := s3install.ListAttachments(ctx, dyn)
	if err != nil {
		t.Fatal(err)
	}
	mpPods := map[string]string{} // node -> Mountpoint Pod
	for _, n := range c.Nodes {
		var onNode []s3api.MountpointS3PodAttachment
		for _, a := range atts {
			if a.Spec.NodeName == n.Name && a.Spec.PersistentVolumeName == volume {
				onNode = append(onNode, a)
			}
		}
		if len(onNode) != 1 || len(onNode[0].Spec.MountpointS3PodAttachments) != 1 {
			t.Fatalf("attachments on %s: %+v, want one with one Mountpoint Pod", n.Name, onNode)
		}
		for mp, workloads := range onNode[0].Spec.MountpointS3PodAttachments {
			var uids []string
			for _, w := range workloads {
				uids = append(uids, w.WorkloadPodUID)
			}
			for _, p := range []*corev1.Pod{writers[n.Name], readers[n.Name]} {
				if !slices.Contains(uids, string(p.UID)) {
					t.Errorf("Mountpoint Pod %s on %s serves %v, not %s (%s): the node's Pods do not share it", mp, n.Name, uids, p.Name, p.UID)
				}
			}
			mpPods[n.Name] = mp
		}
	}
	fuseConns := map[string][]string{} // node -> FUSE connections of its mounts
	var allConns []string
	for _, n := range c.Nodes {
		checkMountpointPod(t, ctx, client, n, mpPods[n.Name])
		fuseConns[n.Name] = checkFUSEMount(t, n, mpPods[n.Name])
		allConns = append(allConns, fuseConns[n.Name]...)
	}

	var names []string
	for _, n := range c.Nodes {
		names = append(names, writers[n.Name].Name, readers[n.Name].Name)
	}
	deletePods(t, ctx, client, names...)
	rig.Eventually(t, ctx, 4*time.Minute, "the Mountpoint Pods and attachments to go", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(s3api.DefaultMountpointNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		atts, err := s3install.ListAttachments(ctx, dyn)
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0 && len(atts) == 0, nil
	})
	for _, n := range c.Nodes {
		if left := fuseMounts(t, n); len(left) > 0 {
			t.Errorf("FUSE mounts left on %s after its Pods went: %v", n.Name, left)
		}
		for _, conn := range fuseConns[n.Name] {
			if _, err := os.Stat(filepath.Join("/sys/fs/fuse/connections", conn)); !os.IsNotExist(err) {
				t.Errorf("FUSE connection %s of %s is left (stat: %v)", conn, n.Name, err)
			}
		}
		for _, p := range []*corev1.Pod{writers[n.Name], readers[n.Name]} {
			if left := nodeMounts(t, n, "/var/lib/kubelet/pods/"+string(p.UID)); len(left) > 0 {
				t.Errorf("mounts of deleted Pod %s left on %s: %v", p.Name, n.Name, left)
			}
		}
	}
	return allConns
}

// checkMountpointPod checks that the Mountpoint Pod runs the s3-mounter image as an unprivileged, non-root
// container with no host path and no device, and that its Mountpoint process on the node holds a /dev/fuse
// descriptor it cannot have opened itself: the node plugin's, passed over the comm socket.
func checkMountpointPod(t *testing.T, ctx context.Context, client kubernetes.Interface, n *node.Node, name string) {
	t.Helper()
	p, err := client.CoreV1().Pods(s3api.DefaultMountpointNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Spec.NodeName != n.Name || p.Status.Phase != corev1.PodRunning {
		t.Errorf("Mountpoint Pod %s: node %s phase %s, want Running on %s", name, p.Spec.NodeName, p.Status.Phase, n.Name)
	}
	for _, v := range p.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("Mountpoint Pod %s has host path volume %s (%s)", name, v.Name, v.HostPath.Path)
		}
	}
	if len(p.Spec.Containers) != 1 {
		t.Fatalf("Mountpoint Pod %s has %d containers, want 1", name, len(p.Spec.Containers))
	}
	ctr := p.Spec.Containers[0]
	if want := "stowage/s3-mounter:" + s3install.ImageTag; ctr.Image != want {
		t.Errorf("Mountpoint Pod %s runs %s, want %s", name, ctr.Image, want)
	}
	sc := ctr.SecurityContext
	if sc == nil || (sc.Privileged != nil && *sc.Privileged) || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("Mountpoint Pod %s's container security context %+v, want unprivileged, non-root, no escalation", name, sc)
	}
	if len(ctr.VolumeDevices) > 0 {
		t.Errorf("Mountpoint Pod %s has devices %v", name, ctr.VolumeDevices)
	}

	// The Mountpoint process is inside the node's PID namespace, which this machine's /proc shows too; the
	// container's ID ties it to the Pod.
	if len(p.Status.ContainerStatuses) != 1 {
		t.Fatalf("Mountpoint Pod %s container statuses %+v", name, p.Status.ContainerStatuses)
	}
	id := containerID(p.Status.ContainerStatuses[0])
	pids := processesInCgroup(t, id)
	if len(pids) == 0 {
		t.Fatalf("no process of Mountpoint Pod %s's container %s on this machine", name, id)
	}
	var fuseHolders int
	for _, pid := range pids {
		if uid := processUID(t, pid); uid == "0" {
			t.Errorf("process %s of Mountpoint Pod %s runs as root", pid, name)
		}
		fds, _ := filepath.Glob(filepath.Join("/proc", pid, "fd", "*"))
		for _, fd := range fds {
			if target, err := os.Readlink(fd); err == nil && target == "/dev/fuse" {
				fuseHolders++
			}
		}
	}
	if fuseHolders == 0 {
		t.Errorf("no process of Mountpoint Pod %s holds /dev/fuse", name)
	}
	// The container has no /dev/fuse to open: the descriptor came from outside it.
	if _, err := os.Stat(filepath.Join("/proc", pids[0], "root", "dev", "fuse")); !os.IsNotExist(err) {
		t.Errorf("Mountpoint Pod %s's container has /dev/fuse (stat: %v)", name, err)
	}
}

// containerID is the runtime's ID of the container, without the runtime's scheme.
func containerID(cs corev1.ContainerStatus) string {
	return cs.ContainerID[strings.LastIndex(cs.ContainerID, "/")+1:]
}

// checkFUSEMount checks that the node's mount namespace has the Mountpoint Pod's source mount, a FUSE mount,
// and returns its FUSE connections (the device minor numbers of /sys/fs/fuse/connections).
func checkFUSEMount(t *testing.T, n *node.Node, mpPod string) []string {
	t.Helper()
	source := "/var/lib/kubelet/plugins/" + s3api.DriverName + "/mnt/" + mpPod
	var conns []string
	for _, m := range fuseMounts(t, n) {
		if m.target == source {
			conns = append(conns, m.minor)
		}
	}
	if len(conns) == 0 {
		t.Errorf("no FUSE mount at %s on %s; its FUSE mounts: %v", source, n.Name, fuseMounts(t, n))
	}
	return conns
}
