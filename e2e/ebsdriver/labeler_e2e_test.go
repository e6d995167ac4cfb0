//go:build e2e

package ebsdriver

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/stowage-csi/stowage/e2e/cluster/clustertest"
	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/rig"
)

const (
	volumesLabel = "ebs.csi.aws.com/non-csi-ebs-volumes-count"
	enisLabel    = "ebs.csi.aws.com/enis-count"
)

// TestE2EEBSMetadataLabeler runs `ebs-plugin metadataLabeler` against a real API server and ec2sim: it takes
// upstream's Lease, labels each Node with its instance's ENIs and the EBS volumes attached to it that no PV
// names (less the root volume), leaves a Node without an AWS providerID alone, and labels a Node that joins
// later (the next full round is an hour away, so only the Node watch can do it).
func TestE2EEBSMetadataLabeler(t *testing.T) {
	const (
		instA, instB, instC = "i-0a000000000000001", "i-0b000000000000002", "i-0c000000000000003"
	)
	c := clustertest.Start(t)
	sim, _ := startSim(t, 0.01, []ec2sim.Instance{{ID: instA, Zone: testZone, Type: "m5.large"}, {ID: instB, Zone: testZone, Type: "m5.large"},
		{ID: instC, Zone: testZone, Type: "m5.large"}})
	bin := buildPlugin(t)
	d := newDriver(t, sim, startPlugin(t, bin, pluginEnv(t, sim, "", true), "controller"), instA)
	ctx := testContext(t, 3*time.Minute)
	client := c.Client()

	// A: four volumes, one of them a PV's: 4 - 1 PV - 1 for the root = 2 (the root subtraction is upstream's;
	// ec2sim's instances have no root volume). B: nothing attached, 0 (upstream: -1). C: two volumes, 1.
	capability := mountCapability("")
	attach := func(name, instance string) string {
		id := d.createVolume(ctx, volumeRequest(name, 1, capability, nil))
		if _, err := d.ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: instance, VolumeCapability: capability}); err != nil {
			t.Fatalf("attach %s to %s: %v", id, instance, err)
		}
		t.Cleanup(func() {
			_, _ = d.ctl.ControllerUnpublishVolume(context.Background(), &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: instance})
		})
		return id
	}
	var pvVolume string
	for i := range 4 {
		id := attach(fmt.Sprintf("a-%d", i), instA)
		if i == 0 {
			pvVolume = id
		}
	}
	attach("c-0", instC)
	attach("c-1", instC)
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "labeler-pv"}, Spec: corev1.PersistentVolumeSpec{
		Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
		AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
		PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
		PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
			Driver: "ebs.csi.aws.com", VolumeHandle: pvVolume}},
	}}
	if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createNode := func(name, providerID string) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{ProviderID: providerID}}
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	createNode("node-a", "aws:///"+testZone+"/"+instA)
	createNode("node-b", "aws:///"+testZone+"/"+instB)
	createNode("node-x", "")

	env := append(pluginEnv(t, sim, "", true), "POD_NAMESPACE=default")
	proc, err := rig.Start(rig.Spec{Name: "labeler", Path: bin, Args: []string{"metadataLabeler", "--kubeconfig=" + c.Kubeconfig(), "--v=4"},
		Env: env, LogDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proc.Stop(15 * time.Second)
		if t.Failed() {
			t.Logf("labeler log (tail):\n%s", proc.Tail(100))
		}
	})
	waitLabels := func(node, volumes, enis string) {
		t.Helper()
		rig.Eventually(t, ctx, time.Minute, node+" labelled", func(ctx context.Context) (bool, error) {
			if done, err := proc.Exited(); done {
				return false, fmt.Errorf("labeler exited: %v", err)
			}
			n, err := client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			got := n.Labels[volumesLabel] + "/" + n.Labels[enisLabel]
			if got != "/" && got != volumes+"/"+enis {
				t.Fatalf("%s labelled volumes/enis %s, want %s/%s", node, got, volumes, enis)
			}
			return got != "/", nil
		})
	}
	waitLabels("node-a", "2", "1")
	waitLabels("node-b", "0", "1")
	lease, err := client.CoordinationV1().Leases("default").Get(ctx, "metadata-labeler-ebs-csi-aws-com", metav1.GetOptions{})
	if err != nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity == "" {
		t.Fatalf("upstream's labeler Lease: %v %v", lease, err)
	}
	// node-x was in the same first round as node-a and node-b.
	if n, err := client.CoreV1().Nodes().Get(ctx, "node-x", metav1.GetOptions{}); err != nil || n.Labels[enisLabel] != "" {
		t.Fatalf("node-x without a providerID: %v %v", n.GetLabels(), err)
	}

	createNode("node-c", "aws:///"+testZone+"/"+instC)
	waitLabels("node-c", "1", "1")
}
