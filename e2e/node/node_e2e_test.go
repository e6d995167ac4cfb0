//go:build e2e

package node_test

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/node/nodetest"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// TestE2ERealNodes starts two real nodes in two zones and runs a Pod on each. The Pod reaches the API server
// through the kubernetes Service (kube-proxy's rules), and its log is read through the API server from the
// kubelet: the paths a CSI driver's Pods and a user's kubectl take. After the teardown nothing of the nodes
// is left on the machine.
func TestE2ERealNodes(t *testing.T) {
	ctx := context.Background()
	c := nodetest.Start(t, nodetest.TwoZones())
	client := c.Client()

	for _, n := range c.Nodes {
		obj, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := obj.Labels[node.ZoneLabel]; !ok {
			t.Errorf("node %s has no %s label: %v", n.Name, node.ZoneLabel, obj.Labels)
		}
	}

	for _, n := range c.Nodes {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "reach-" + n.Name, Namespace: "default"},
			Spec: corev1.PodSpec{
				RestartPolicy: corev1.RestartPolicyNever,
				NodeSelector:  map[string]string{"kubernetes.io/hostname": n.Name},
				Containers: []corev1.Container{{
					Name: "reach", Image: images.BusyboxImage,
					Command: []string{"sh", "-c",
						`printf 'GET /version HTTP/1.0\r\n\r\n' | nc -w 10 "$KUBERNETES_SERVICE_HOST" "$KUBERNETES_SERVICE_PORT" && echo "reached $KUBERNETES_SERVICE_HOST on $(hostname)"`},
				}},
			},
		}
		if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range c.Nodes {
		name := "reach-" + n.Name
		rig.Eventually(t, ctx, 2*time.Minute, "Pod "+name+" to succeed", func(ctx context.Context) (bool, error) {
			p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Status.Phase == corev1.PodFailed {
				logs, _ := client.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
				t.Fatalf("Pod %s failed: %s\n%+v", name, logs, p.Status.ContainerStatuses)
			}
			if p.Spec.NodeName != "" && p.Spec.NodeName != n.Name {
				t.Fatalf("Pod %s ran on %s, want %s", name, p.Spec.NodeName, n.Name)
			}
			return p.Status.Phase == corev1.PodSucceeded, nil
		})
		logs, err := client.CoreV1().Pods("default").GetLogs(name, &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			t.Fatalf("logs of %s through the API server: %v", name, err)
		}
		// The API server's answer to plain HTTP on its TLS port, through the Service's cluster IP (busybox has
		// no TLS client the API server's ciphers accept).
		for _, want := range []string{"Client sent an HTTP request to an HTTPS server", "reached 10.96.0.1 on " + name} {
			if !strings.Contains(string(logs), want) {
				t.Errorf("logs of %s = %q, want %q in them", name, logs, want)
			}
		}
	}

	// Tear down now, and check the machine.
	var states, cgroups []string
	for _, n := range c.Nodes {
		states = append(states, n.StateDir())
		cgroups = append(cgroups, n.CgroupRoot())
	}
	bridge := c.Network.Bridge
	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	for _, state := range states {
		if _, err := os.Stat(state); !os.IsNotExist(err) {
			t.Errorf("node state %s is left (stat: %v)", state, err)
		}
		procs, err := rig.ProcessesWith(state)
		if err != nil {
			t.Fatal(err)
		}
		if len(procs) > 0 {
			t.Errorf("processes of a stopped node are left: %v", procs)
		}
		if mounts := mountsMentioning(t, state); len(mounts) > 0 {
			t.Errorf("mounts of a stopped node are left: %v", mounts)
		}
	}
	for _, cg := range cgroups {
		left, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", "*", cg))
		if len(left) > 0 {
			t.Errorf("cgroups of a stopped node are left: %v", left)
		}
	}
	if _, err := net.InterfaceByName(bridge); err == nil {
		t.Errorf("bridge %s is left", bridge)
	}
	out, err := exec.Command("iptables", "-t", "nat", "-S").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -t nat -S: %v: %s", err, out)
	}
	if strings.Contains(string(out), "KUBE-SERVICES") {
		t.Errorf("kube-proxy's rules are left:\n%s", out)
	}
}

// mountsMentioning lists this mount namespace's mounts whose source or target names path.
func mountsMentioning(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.Contains(s.Text(), path) {
			out = append(out, s.Text())
		}
	}
	return out
}
