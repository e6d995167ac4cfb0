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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/e2e/cluster"
	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/helm"
	"github.com/stowage-csi/stowage/e2e/images"
	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/rig"
	"github.com/stowage-csi/stowage/e2e/tools"
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
	// installTimeout bounds helm install (its --wait) and the waits for Pods to come and go.
	installTimeout = 5 * time.Minute
	// helmMargin is left of a caller's deadline after helm install's wait.
	helmMargin = 15 * time.Second
	// startTimeout bounds ForTest's Start: cold builds of kube, containerd and the images come first.
	startTimeout = 50 * time.Minute
	// cleanupMargin is kept before a test binary's deadline for the teardown.
	cleanupMargin = 2 * time.Minute
)

// Options change what Start installs besides the stack.
type Options struct {
	// Nodes is how many real nodes, each in a zone of its own and each an ec2sim instance (default 2).
	Nodes int
	// Zones, if set, are the nodes' zones in order (two nodes may share one), and their number the nodes'.
	Zones []string
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
	// Dir holds the image archives, EC2's volumes and Helm's state; empty means a temporary directory that
	// Stop removes.
	Dir string
	// Progress, if set, gets a line as each stage of Start begins.
	Progress func(format string, args ...any)
}

// Stack is the installed stack. Stop tears it down.
type Stack struct {
	Cluster *node.Cluster
	EC2     *ec2sim.Server
	helm    *helm.Client
	chart   string
	root    string

	dir, ownDir        string
	snapshotController bool
	installed, stopped bool
	removeLinkDir      func() error
}

// Start builds Stowage's binaries and images, starts the real nodes, EC2, the snapshot controller and the
// chart, and returns once the kubelets registered the driver on every node and snapshot-controller is
// available. ctx bounds the start only: what Start starts runs until Stop. When a stage fails, what it
// started is torn down and the error names the stage, with what the kubelets said of the install's Pods.
func Start(ctx context.Context, o Options) (_ *Stack, err error) {
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if len(o.Zones) == 0 {
		for i := range o.Nodes {
			o.Zones = append(o.Zones, Region+string(rune('a'+i)))
		}
	}
	o.Nodes = len(o.Zones)
	if o.TimeScale == 0 {
		o.TimeScale = 0.02
	}
	if o.InstanceType == "" {
		o.InstanceType = "m5.large"
	}
	if o.SnapshotController == "" {
		o.SnapshotController = "stowage/snapshot-controller:" + imageTag
	}
	progress := o.Progress
	if progress == nil {
		progress = func(string, ...any) {}
	}
	s := &Stack{dir: o.Dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop(context.WithoutCancel(ctx)))
		}
	}()
	if s.root, err = rig.RepoRoot("."); err != nil {
		return nil, err
	}
	if s.dir == "" {
		if s.dir, err = os.MkdirTemp("", "ebsinstall-"); err != nil {
			return nil, err
		}
		s.ownDir = s.dir
	}
	progress("Assembling Stowage's images and the test images")
	imageDir, err := s.subdir("images")
	if err != nil {
		return nil, err
	}
	archives, err := images.Stowage(ctx, s.root, imageDir, imageTag)
	if err != nil {
		return nil, err
	}
	testImages, err := images.TestImages(ctx, images.TestOptions{CacheDir: tools.CacheDir(s.root), RepoRoot: s.root})
	if err != nil {
		return nil, fmt.Errorf("assemble the test images: %w", err)
	}
	for _, a := range testImages {
		archives = append(archives, a.Path)
	}
	// Each node registers with the driver's startup taint, as upstream's documentation recommends: no Pod
	// that needs a volume lands on it before the node plugin is up.
	var specs []node.Spec
	for i := range o.Nodes {
		specs = append(specs, node.Spec{
			Name: fmt.Sprintf("node-%c", 'a'+i), Zone: o.Zones[i], Taints: []string{startTaint + "=true:NoExecute"},
		})
	}
	progress("Starting the control plane and %d real nodes (kubelet, containerd, kube-proxy)", o.Nodes)
	s.Cluster, err = node.StartCluster(ctx, node.ClusterOptions{
		Nodes: specs, ControlPlane: cluster.Options{APIServerArgs: o.APIServerArgs}, Images: append(archives, o.ExtraImages...),
	})
	if err != nil {
		return nil, fmt.Errorf("start the cluster with real nodes: %w", err)
	}
	progress("Starting ec2sim as EC2 and every node's IMDS")
	if err := s.startEC2(ctx, o); err != nil {
		return nil, fmt.Errorf("start ec2sim: %w", err)
	}
	progress("Installing the snapshot CRDs and snapshot-controller")
	s.snapshotController = true
	manifests, err := s.subdir("snapshot-controller")
	if err != nil {
		return nil, err
	}
	if err := installSnapshotController(ctx, s.Cluster, s.root, manifests, o.SnapshotController); err != nil {
		return nil, fmt.Errorf("install snapshot-controller: %w", err)
	}
	progress("helm install %s", release)
	if err := s.installChart(ctx, o.Values); err != nil {
		return nil, err
	}
	// Only now: snapshot-controller, like every Pod without the driver's toleration, waits for the startup
	// taint to leave a node.
	err = rig.WaitFor(ctx, installTimeout, "snapshot-controller to be available", func(ctx context.Context) (bool, error) {
		d, err := s.Cluster.Client().AppsV1().Deployments(Namespace).Get(ctx, "snapshot-controller", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas > 0, nil
	})
	if err != nil {
		return nil, s.diagnosed(ctx, err)
	}
	return s, nil
}

// ForTest is Start for a test: it fails t when Start fails, and tears the stack down when t ends, logging
// the control plane's and the nodes' log tails first if t failed.
func ForTest(t testing.TB, o Options) *Stack {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), rig.StartDeadline(t, startTimeout, cleanupMargin))
	defer cancel()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	s, err := Start(ctx, o)
	if err != nil {
		t.Fatalf("install stowage-ebs on real nodes: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", s.Cluster.LogTail(30))
			t.Logf("node logs:\n%s", s.Cluster.NodeLogTail(40))
		}
		if err := s.Stop(context.Background()); err != nil {
			t.Errorf("tear down the EBS install: %v", err)
		}
	})
	return s
}

// Stop uninstalls the chart and snapshot-controller, waits for their Pods to go, and stops EC2 and the
// cluster, in that order: every Pod of the install is gone before the nodes stop, so no container is still
// exiting in a cgroup the node's teardown removes. A second call does nothing.
func (s *Stack) Stop(ctx context.Context) error {
	if s.stopped {
		return nil
	}
	s.stopped = true
	var errs []error
	if s.installed {
		if _, err := s.helm.Uninstall(ctx, release, Namespace); err != nil {
			errs = append(errs, fmt.Errorf("helm uninstall: %w", err))
		}
	}
	if s.snapshotController {
		client := s.Cluster.Client()
		err := client.AppsV1().Deployments(Namespace).Delete(ctx, "snapshot-controller", metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("delete snapshot-controller: %w", err))
		}
		errs = append(errs, rig.WaitFor(ctx, installTimeout, "the install's Pods to go", func(ctx context.Context) (bool, error) {
			pods, err := client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			return len(pods.Items) == 0, nil
		}))
	}
	if s.EC2 != nil {
		if err := s.EC2.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close ec2sim: %w", err))
		}
	}
	if s.removeLinkDir != nil {
		errs = append(errs, s.removeLinkDir())
	}
	if s.Cluster != nil {
		errs = append(errs, s.Cluster.Stop(ctx))
	}
	if s.ownDir != "" {
		errs = append(errs, os.RemoveAll(s.ownDir))
	}
	return errors.Join(errs...)
}

// EC2Dir holds ec2sim's volume and snapshot files: a loop device backed by a file below it is an attached
// volume.
func (s *Stack) EC2Dir() string { return filepath.Join(s.dir, "ec2") }

// subdir makes the directory name in the stack's.
func (s *Stack) subdir(name string) (string, error) {
	dir := filepath.Join(s.dir, name)
	return dir, os.MkdirAll(dir, 0o755)
}

// diagnosed adds what the kubelets said of the install's Pods to err.
func (s *Stack) diagnosed(ctx context.Context, err error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return fmt.Errorf("%w\n%s%s", err, rig.PodDiagnosis(ctx, s.Cluster.Client(), Namespace), s.Cluster.NodeLogTail(20))
}

// startEC2 starts ec2sim on the Pod network's gateway, with one local instance per node whose Pods' range is
// the instance's IMDS callers, and its NVMe links in the host's /dev; Stop removes the folders it made there.
func (s *Stack) startEC2(ctx context.Context, o Options) error {
	c := s.Cluster
	s.removeLinkDir = createdDirs(linkDir)
	var ins []ec2sim.Instance
	for i := range c.Nodes {
		start, _ := c.Network.NodeRange(i)
		callers := &net.IPNet{IP: start.Mask(net.CIDRMask(24, 32)), Mask: net.CIDRMask(24, 32)}
		ins = append(ins, ec2sim.Instance{ID: fmt.Sprintf("i-%017x", 0xa001+i), Zone: o.Zones[i], Type: o.InstanceType, Local: true, Callers: callers})
	}
	data, err := s.subdir("ec2")
	if err != nil {
		return err
	}
	gw := c.Network.Gateway.String()
	// ec2sim serves until its context ends; Start's ctx only bounds the start.
	s.EC2, err = ec2sim.Start(context.WithoutCancel(ctx), ec2sim.Config{
		Listen: net.JoinHostPort(gw, "0"), IMDSListen: net.JoinHostPort(gw, "0"),
		DataDir: data, Region: Region, Instances: ins, DeviceLinkDir: linkDir, TimeScale: o.TimeScale,
	})
	return err
}

// createdDirs returns a function that removes the directories of path that do not exist now, deepest first.
func createdDirs(path string) func() error {
	var missing []string
	for p := path; p != "/"; p = filepath.Dir(p) {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, p)
		}
	}
	return func() error {
		var errs []error
		for _, p := range missing {
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove %s the install created: %w", p, err))
			}
		}
		return errors.Join(errs...)
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
// Secret, and waits for the driver's registration on every node; Stop uninstalls.
func (s *Stack) installChart(ctx context.Context, values map[string]any) error {
	client := s.Cluster.Client()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "aws-meta", Namespace: Namespace},
		Data: map[string]string{"endpoint": s.EC2.URL()}}
	if _, err := client.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return err
	}
	// ec2sim does not check signatures here; the SDK wants credentials all the same.
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "aws-secret", Namespace: Namespace},
		StringData: map[string]string{"key_id": "AKIDEXAMPLE", "access_key": "example-secret"}}
	if _, err := client.CoreV1().Secrets(Namespace).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		return err
	}
	home, err := s.subdir("helm")
	if err != nil {
		return err
	}
	if s.helm, err = helm.New(ctx, s.Cluster.Kubeconfig(), home); err != nil {
		return err
	}
	s.chart = filepath.Join(s.root, "deploy", "helm", "stowage-ebs")
	return s.helmInstall(ctx, values)
}

// helmInstall installs the chart with values set over the stack's and waits for the kubelets to register
// the driver. Helm waits for the install's workloads until installTimeout or ctx's deadline, whichever
// comes first, so a caller that expects a failure need not wait five minutes for it.
func (s *Stack) helmInstall(ctx context.Context, values map[string]any) error {
	wait := installTimeout
	// Helm's own timeout ends its wait first, leaving ctx the time to ask the kubelets why.
	if d, ok := ctx.Deadline(); ok && time.Until(d)-helmMargin < wait {
		wait = max(time.Until(d)-helmMargin, time.Second)
	}
	s.installed = true
	out, err := s.helm.Install(ctx, release, s.chart, Namespace, helm.MergeValues(s.values(), values), wait)
	klog.FromContext(ctx).V(2).Info("helm install", "release", release, "output", out)
	if err != nil {
		return s.diagnosed(ctx, fmt.Errorf("helm install %s: %w", release, err))
	}
	for _, n := range s.Cluster.Nodes {
		if err := waitRegistered(ctx, s.Cluster.Client(), n.Name); err != nil {
			return s.diagnosed(ctx, err)
		}
	}
	return nil
}

// Reinstall uninstalls the chart, waits for its Pods to go, and installs it again with values set over
// Start's (as Options.Values), on the same nodes and EC2: one cluster serves several installs of a
// comparison. It returns once the kubelets registered the driver again.
func (s *Stack) Reinstall(ctx context.Context, values map[string]any) error {
	if _, err := s.helm.Uninstall(ctx, release, Namespace); err != nil {
		return fmt.Errorf("helm uninstall: %w", err)
	}
	s.installed = false
	client := s.Cluster.Client()
	err := rig.WaitFor(ctx, installTimeout, "the chart's Pods to go", func(ctx context.Context) (bool, error) {
		pods, err := client.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release})
		if err != nil {
			return false, err
		}
		return len(pods.Items) == 0, nil
	})
	if err != nil {
		return err
	}
	return s.helmInstall(ctx, values)
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

// waitRegistered waits for the real kubelet to list the driver in the node's CSINode with an attach limit and
// the topology key, for the node's zone label of the driver, and for the startup taint to be gone.
func waitRegistered(ctx context.Context, client kubernetes.Interface, nodeName string) error {
	err := rig.WaitFor(ctx, 3*time.Minute, "the kubelet to register "+Driver+" on "+nodeName, func(ctx context.Context) (bool, error) {
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
	if err != nil {
		return err
	}
	return rig.WaitFor(ctx, 2*time.Minute, "the startup taint to leave "+nodeName, func(ctx context.Context) (bool, error) {
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
