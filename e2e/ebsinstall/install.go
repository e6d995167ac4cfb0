// Package ebsinstall installs Stowage's EBS stack on real nodes for one test, as a user would on EC2: the
// images assembled from this tree, ec2sim as EC2 and as every node's IMDS, the snapshot CRDs and
// snapshot-controller from deploy/kustomize/snapshot-controller, and `helm install` of deploy/helm/stowage-ebs
// with its defaults. Start returns once the real kubelets registered the driver and its startup taint left
// every node.
package ebsinstall

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/helm"
	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/node/nodetest"
	"github.com/stowage-csi/stowage/e2e/rig"
)

const (
	// Driver is the CSI driver the chart installs.
	Driver = "ebs.csi.aws.com"
	// TopologyKey is the driver's zone label on nodes and in CSINode.
	TopologyKey = "topology.ebs.csi.aws.com/zone"
	// Namespace is where the chart and snapshot-controller go, as in their defaults.
	Namespace = "kube-system"
	// Region is ec2sim's region; the nodes' zones are Region plus a, b, ...
	Region = "us-east-1"

	startTaint = "ebs.csi.aws.com/agent-not-ready"
	release    = "stowage-ebs"
	imageTag   = "e2e"
	// linkDir is where Nitro instances' udev rules put the NVMe by-id links, and where the node plugin looks:
	// the node plugin Pods see the host's /dev.
	linkDir = "/dev/disk/by-id"
	// installTimeout bounds helm install (its --wait) and each wait for registration.
	installTimeout = 5 * time.Minute
)

// Options change what Start installs besides the stack.
type Options struct {
	// Nodes is how many real nodes, each in a zone of its own and each an ec2sim instance (default 2).
	Nodes int
	// ExtraImages are more image archives to import into every node (a test suite's own images).
	ExtraImages []string
	// Values are chart values set over Start's (merged map by map), e.g. a sidecar slot on another image.
	Values map[string]any
	// TimeScale is ec2sim's time scale: 1 is EC2's real delays; default 0.02, which keeps tests short.
	TimeScale float64
	// InstanceType is every node's EC2 instance type, which sets its attach limit (default m5.large).
	InstanceType string
	// APIServerArgs are added to kube-apiserver's flags (an audit log's).
	APIServerArgs []string
	// SnapshotController is the snapshot-controller Deployment's image (default Stowage's, as assembled
	// here), e.g. upstream's: the chart has no slot for it, one snapshot-controller serving every driver.
	// Its archive goes in ExtraImages.
	SnapshotController string
}

// Stack is the installed stack.
type Stack struct {
	Cluster *node.Cluster
	EC2     *ec2sim.Server
	helm    *helm.Client
	chart   string
}

// Start builds Stowage's binaries and images, starts the real nodes, EC2, the snapshot controller and the
// chart, and registers their teardown with t.
func Start(t testing.TB, o Options) *Stack {
	t.Helper()
	ctx := context.Background()
	root, err := rig.RepoRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.TimeScale == 0 {
		o.TimeScale = 0.02
	}
	if o.InstanceType == "" {
		o.InstanceType = "m5.large"
	}
	archives, err := images.Stowage(ctx, root, t.TempDir(), imageTag)
	if err != nil {
		t.Fatal(err)
	}
	// Each node registers with the driver's startup taint, as upstream's documentation recommends: no Pod
	// that needs a volume lands on it before the node plugin is up.
	var specs []node.Spec
	for i := range o.Nodes {
		specs = append(specs, node.Spec{
			Name: fmt.Sprintf("node-%c", 'a'+i), Zone: zone(i), Taints: []string{startTaint + "=true:NoExecute"},
		})
	}
	c := nodetest.StartWith(t, node.ClusterOptions{Nodes: specs, ControlPlane: cluster.Options{APIServerArgs: o.APIServerArgs}},
		append(archives, o.ExtraImages...)...)
	s := &Stack{Cluster: c, EC2: startEC2(t, ctx, c, o)}
	if o.SnapshotController == "" {
		o.SnapshotController = "stowage/snapshot-controller:" + imageTag
	}
	if err := installSnapshotController(ctx, c, root, t.TempDir(), o.SnapshotController); err != nil {
		t.Fatal(err)
	}
	// Runs after helm uninstall: every Pod of the install is gone before the nodes stop, so no container is
	// still exiting in a cgroup the node's teardown removes.
	t.Cleanup(func() {
		ctx := context.Background()
		client := c.Client()
		if err := client.AppsV1().Deployments(Namespace).Delete(ctx, "snapshot-controller", metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete snapshot-controller: %v", err)
		}
		rig.Eventually(t, ctx, installTimeout, "the install's Pods to go", func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			return len(pods.Items) == 0, nil
		})
	})
	s.installChart(t, ctx, root, o.Values)
	for _, n := range c.Nodes {
		waitRegistered(t, ctx, c.Client(), n.Name)
	}
	// Only now: snapshot-controller, like every Pod without the driver's toleration, waits for the startup
	// taint to leave a node.
	rig.Eventually(t, ctx, installTimeout, "snapshot-controller to be available", func(ctx context.Context) (bool, error) {
		d, err := c.Client().AppsV1().Deployments(Namespace).Get(ctx, "snapshot-controller", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas > 0, nil
	})
	return s
}

func zone(i int) string { return Region + string(rune('a'+i)) }

// startEC2 starts ec2sim on the Pod network's gateway, with one local instance per node whose Pods' range is
// the instance's IMDS callers, and its NVMe links in the host's /dev, which it removes when the test ends.
func startEC2(t testing.TB, ctx context.Context, c *node.Cluster, o Options) *ec2sim.Server {
	t.Helper()
	removeLinkDir := createdDirs(t, linkDir)
	var ins []ec2sim.Instance
	for i := range c.Nodes {
		start, _ := c.Network.NodeRange(i)
		callers := &net.IPNet{IP: start.Mask(net.CIDRMask(24, 32)), Mask: net.CIDRMask(24, 32)}
		ins = append(ins, ec2sim.Instance{ID: fmt.Sprintf("i-%017x", 0xa001+i), Zone: zone(i), Type: o.InstanceType, Local: true, Callers: callers})
	}
	gw := c.Network.Gateway.String()
	s, err := ec2sim.Start(ctx, ec2sim.Config{
		Listen: net.JoinHostPort(gw, "0"), IMDSListen: net.JoinHostPort(gw, "0"),
		DataDir: t.TempDir(), Region: Region, Instances: ins, DeviceLinkDir: linkDir, TimeScale: o.TimeScale,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close ec2sim: %v", err)
		}
		removeLinkDir()
	})
	return s
}

// createdDirs returns a function that removes the directories of path that do not exist now, deepest first.
func createdDirs(t testing.TB, path string) func() {
	var missing []string
	for p := path; p != "/"; p = filepath.Dir(p) {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
		}
	}
	return func() {
		for _, p := range missing {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("remove %s the test created: %v", p, err)
			}
		}
	}
}

// installSnapshotController applies deploy/kustomize/snapshot-controller as a user would: the snapshot CRDs,
// the controller's RBAC and its Deployment, with the image set to ref, one assembled here (what the
// kustomization's images override is for). The chart leaves it out on purpose: one snapshot-controller
// serves every driver of a cluster.
func installSnapshotController(ctx context.Context, c *node.Cluster, root, tmp, ref string) error {
	dir := filepath.Join(root, "deploy", "kustomize", "snapshot-controller")
	crds, err := filepath.Glob(filepath.Join(dir, "crd-*.yaml"))
	if err != nil || len(crds) == 0 {
		return fmt.Errorf("snapshot CRDs in %s: %v", dir, err)
	}
	if err := c.Apply(ctx, crds...); err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(dir, "deployment.yaml"))
	if err != nil {
		return err
	}
	const image = "stowage/snapshot-controller:latest"
	if !strings.Contains(string(data), image) {
		return fmt.Errorf("%s/deployment.yaml no longer names %s", dir, image)
	}
	deployment := filepath.Join(tmp, "snapshot-controller.yaml")
	if err := os.WriteFile(deployment, []byte(strings.ReplaceAll(string(data), image, ref)), 0o644); err != nil {
		return err
	}
	return c.Apply(ctx, filepath.Join(dir, "rbac-snapshot-controller.yaml"), deployment)
}

// installChart runs helm install of stowage-ebs with its defaults, overriding only the images, the pull
// policy and the emulator's endpoints, with the AWS configuration the chart reads from a ConfigMap and a
// Secret; helm uninstall runs when the test ends.
func (s *Stack) installChart(t testing.TB, ctx context.Context, root string, values map[string]any) {
	t.Helper()
	client := s.Cluster.Client()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "aws-meta", Namespace: Namespace},
		Data: map[string]string{"endpoint": s.EC2.URL()}}
	if _, err := client.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// ec2sim does not check signatures here; the SDK wants credentials all the same.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "aws-secret", Namespace: Namespace},
		StringData: map[string]string{"key_id": "AKIDEXAMPLE", "access_key": "example-secret"}}
	if _, err := client.CoreV1().Secrets(Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h, err := helm.New(ctx, s.Cluster.Kubeconfig(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.helm, s.chart = h, filepath.Join(root, "deploy", "helm", "stowage-ebs")
	s.helmInstall(t, ctx, values)
	t.Cleanup(func() {
		if _, err := h.Uninstall(context.Background(), release, Namespace); err != nil {
			t.Errorf("helm uninstall: %v", err)
		}
	})
}

func (s *Stack) helmInstall(t testing.TB, ctx context.Context, values map[string]any) {
	t.Helper()
	out, err := s.helm.Install(ctx, release, s.chart, Namespace, mergeValues(s.values(), values), installTimeout)
	if err != nil {
		t.Fatalf("%v\n%s", err, s.Cluster.NodeLogTail(20))
	}
	t.Logf("helm install:\n%s", out)
}

// Reinstall uninstalls the chart, waits for its Pods to go, and installs it again with values set over
// Start's (as Options.Values), on the same nodes and EC2: one cluster serves several installs of a
// comparison. It returns once the kubelets registered the driver again.
func (s *Stack) Reinstall(t testing.TB, values map[string]any) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.helm.Uninstall(ctx, release, Namespace); err != nil {
		t.Fatalf("helm uninstall: %v", err)
	}
	client := s.Cluster.Client()
	rig.Eventually(t, ctx, installTimeout, "the chart's Pods to go", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
	s.helmInstall(t, ctx, values)
	for _, n := range s.Cluster.Nodes {
		waitRegistered(t, ctx, client, n.Name)
	}
}

// values are the chart's defaults but for the images (assembled here, never pulled) and the emulator's IMDS.
func (s *Stack) values() map[string]any {
	image := func(name string) map[string]any {
		return map[string]any{"repository": "stowage/" + name, "tag": imageTag, "pullPolicy": "Never"}
	}
	sidecar := func(name string) map[string]any { return map[string]any{"image": image(name)} }
	env := []map[string]string{{"name": "AWS_EC2_METADATA_SERVICE_ENDPOINT", "value": s.EC2.SharedIMDSURL()}}
	return map[string]any{
		"image": image("ebs-plugin"),
		"sidecars": map[string]any{
			"provisioner": sidecar("csi-provisioner"), "attacher": sidecar("csi-attacher"),
			"snapshotter": sidecar("csi-snapshotter"), "resizer": sidecar("csi-resizer"),
			"livenessProbe": sidecar("livenessprobe"), "nodeDriverRegistrar": sidecar("csi-node-driver-registrar"),
		},
		"controller": map[string]any{"env": append(env, map[string]string{"name": "AWS_REGION", "value": Region})},
		"node":       map[string]any{"env": env},
	}
}

// mergeValues sets over's values on base, descending into the maps both have, as helm merges values files.
func mergeValues(base, over map[string]any) map[string]any {
	for k, v := range over {
		b, bok := base[k].(map[string]any)
		o, ook := v.(map[string]any)
		if bok && ook {
			base[k] = mergeValues(b, o)
			continue
		}
		base[k] = v
	}
	return base
}

// waitRegistered waits for the real kubelet to list the driver in the node's CSINode with an attach limit and
// the topology key, for the node's zone label of the driver, and for the startup taint to be gone.
func waitRegistered(t testing.TB, ctx context.Context, client kubernetes.Interface, nodeName string) {
	t.Helper()
	rig.Eventually(t, ctx, 3*time.Minute, "the kubelet to register "+Driver+" on "+nodeName, func(ctx context.Context) (bool, error) {
		csiNode, err := client.StorageV1().CSINodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, d := range csiNode.Spec.Drivers {
			if d.Name == Driver {
				return d.Allocatable != nil && d.Allocatable.Count != nil && *d.Allocatable.Count > 0 &&
					slices.Contains(d.TopologyKeys, TopologyKey), nil
			}
		}
		return false, nil
	})
	rig.Eventually(t, ctx, 2*time.Minute, "the startup taint to leave "+nodeName, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if n.Labels[TopologyKey] == "" {
			return false, nil
		}
		return !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == startTaint }), nil
	})
}
