//go:build e2e

package ebschart_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/ebsinstall"
	"github.com/stowage-csi/stowage/e2e/ebsstack"
	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/rig"
)

// killedClaims is how many claims, half on each of the two nodes of zone a, are in flight while the
// containers die.
const killedClaims = 4

// containersKilled is the chaos test's short form on real nodes: while claims are provisioned, attached,
// staged and published, the containers that do it are SIGKILLed in their containerd, as a crash or an OOM
// kill ends them: every controller Pod's ebs-plugin, csi-provisioner and csi-attacher, then, once a volume is
// attached, the node plugin on the first node. The kubelets restart them; every Pod still runs, and after the
// claims are deleted EC2 holds no volume, no VolumeAttachment is left and no node has a CSI mount.
func containersKilled(t *testing.T, ctx context.Context, s *ebsinstall.Stack, p ebsstack.Platform) {
	client := s.Cluster.Client()
	nodeA, nodeB := s.Cluster.Nodes[0], s.Cluster.Nodes[1]
	if _, err := client.StorageV1().StorageClasses().Create(ctx, ebsstack.StorageClass("killed", map[string]string{"type": "gp3"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	controllers := runningPods(t, ctx, client, "app=ebs-csi-controller", "")
	nodePlugin := runningPods(t, ctx, client, "app=ebs-csi-node", nodeA.Name)[0]
	var names []string
	for i := range killedClaims {
		on := []*node.Node{nodeA, nodeB}[i%2].Name
		name := fmt.Sprintf("killed-%d", i)
		names = append(names, name)
		if _, err := client.CoreV1().PersistentVolumeClaims(ebsstack.Namespace).Create(ctx, ebsstack.Claim(name, "killed", "1Gi", on, false), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().Pods(ebsstack.Namespace).Create(ctx, ebsstack.Pod(name, on, name, false), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Every controller Pod, leader or not, loses these containers while CreateVolume and ControllerPublish
	// are in flight: the sidecars' leases must change hands or be taken back after the restarts.
	killed := map[string][]string{}
	for _, c := range controllers {
		killed[c.Name] = []string{"ebs-plugin", "csi-provisioner", "csi-attacher"}
		kill(t, ctx, nodeNamed(t, s, c.Spec.NodeName), c, killed[c.Name]...)
	}
	rig.Eventually(t, ctx, 3*time.Minute, "a volume attached to "+nodeA.Name, func(ctx context.Context) (bool, error) {
		vas, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, va := range vas.Items {
			if va.Spec.NodeName == nodeA.Name && va.Status.Attached {
				return true, nil
			}
		}
		return false, nil
	})
	// The node plugin dies while the kubelet stages and publishes.
	killed[nodePlugin.Name] = []string{"ebs-plugin"}
	kill(t, ctx, nodeA, nodePlugin, killed[nodePlugin.Name]...)

	for _, name := range names {
		rig.Eventually(t, ctx, 5*time.Minute, "Pod "+name+" Running", func(ctx context.Context) (bool, error) {
			pod, err := client.CoreV1().Pods(ebsstack.Namespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			return pod.Status.Phase == corev1.PodRunning, nil
		})
	}
	// The kills happened and the kubelets restarted each container.
	for pod, containers := range killed {
		rig.Eventually(t, ctx, 2*time.Minute, "the killed containers of "+pod+" restarted and ready", func(ctx context.Context) (bool, error) {
			got, err := client.CoreV1().Pods("kube-system").Get(ctx, pod, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, c := range got.Status.ContainerStatuses {
				for _, want := range containers {
					if c.Name == want && (c.RestartCount == 0 || !c.Ready) {
						return false, nil
					}
				}
			}
			return true, nil
		})
	}

	for _, name := range names {
		if err := client.CoreV1().Pods(ebsstack.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := client.CoreV1().PersistentVolumeClaims(ebsstack.Namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rig.Eventually(t, ctx, 5*time.Minute, "no volume in EC2 and no VolumeAttachment", func(ctx context.Context) (bool, error) {
		vas, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		return len(vas.Items) == 0 && len(s.EC2.State().Volumes) == 0, nil
	})
	for _, name := range p.NodeNames() {
		if mounts, err := p.Node(name).CSIMountsLeft(); err != nil || len(mounts) > 0 {
			t.Errorf("CSI mounts left on %s: %v (%v)", name, mounts, err)
		}
	}
}

// runningPods are the install's Running Pods with the label selector, on nodeName if it is set; at least one.
func runningPods(t *testing.T, ctx context.Context, client kubernetes.Interface, selector, nodeName string) []*corev1.Pod {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: selector}
	if nodeName != "" {
		opts.FieldSelector = "spec.nodeName=" + nodeName
	}
	pods, err := client.CoreV1().Pods("kube-system").List(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []*corev1.Pod
	for i := range pods.Items {
		if pods.Items[i].Status.Phase == corev1.PodRunning {
			out = append(out, &pods.Items[i])
		}
	}
	if len(out) == 0 {
		t.Fatalf("no Running Pod %s on %q", selector, nodeName)
	}
	return out
}

func nodeNamed(t *testing.T, s *ebsinstall.Stack, name string) *node.Node {
	t.Helper()
	for _, n := range s.Cluster.Nodes {
		if n.Name == name {
			return n
		}
	}
	t.Fatalf("no node %s", name)
	return nil
}

// kill SIGKILLs the named containers of pod on n.
func kill(t *testing.T, ctx context.Context, n *node.Node, pod *corev1.Pod, containers ...string) {
	t.Helper()
	for _, want := range containers {
		found := false
		for _, c := range pod.Status.ContainerStatuses {
			if c.Name == want {
				found = true
				if err := n.KillContainer(ctx, c.ContainerID); err != nil {
					t.Fatal(err)
				}
			}
		}
		if !found {
			t.Fatalf("Pod %s has no container %s", pod.Name, want)
		}
	}
	t.Logf("killed %v of %s on %s", containers, pod.Name, n.Name)
}
