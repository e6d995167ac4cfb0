package ebsstack

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stowage-csi/stowage/e2e/ebsinstall"
	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/node"
	"github.com/stowage-csi/stowage/e2e/rig"
)

const (
	// kubeletRoot is the real kubelet's --root-dir inside each node's mount namespace.
	kubeletRoot = "/var/lib/kubelet"
	// csiPluginDir is the kubelet's own directory for CSI volumes (staging and block publish paths).
	csiPluginDir = kubeletRoot + "/plugins/kubernetes.io/csi"
	// csiVolumeDir is the kubelet's name, in a Pod's volumes and volumeDevices, for CSI volumes.
	csiVolumeDir = "kubernetes.io~csi"
	// chartController is the chart's controller Deployment.
	chartController = "ebs-csi-controller"
)

// OnRealNodes is the scenarios' Platform on real kubelets with the chart installed by ebsinstall. A node's
// zone is its zone label and its instance ID the node ID the kubelet registered for the driver in CSINode; its
// paths are the kubelet's, read from the host through /proc/<pid>/root of a process in the node's mount
// namespace, where the node plugin's mounts are (the host's mount table never holds them).
func OnRealNodes(ctx context.Context, s *ebsinstall.Stack) (Platform, error) {
	client := s.Cluster.Client()
	p := &realPlatform{s: s, nodes: map[string]*realNode{}}
	for _, n := range s.Cluster.Nodes {
		kn, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		csiNode, err := client.StorageV1().CSINodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		i := slices.IndexFunc(csiNode.Spec.Drivers, func(d storagev1.CSINodeDriver) bool { return d.Name == Driver })
		if i < 0 {
			return nil, fmt.Errorf("CSINode %s lists no %s", n.Name, Driver)
		}
		p.names = append(p.names, n.Name)
		p.nodes[n.Name] = &realNode{n: n, zone: kn.Labels[node.ZoneLabel], instance: csiNode.Spec.Drivers[i].NodeID}
	}
	return p, nil
}

type realPlatform struct {
	s     *ebsinstall.Stack
	names []string
	nodes map[string]*realNode
}

func (p *realPlatform) KubeClient() kubernetes.Interface { return p.s.Cluster.Client() }
func (p *realPlatform) RESTConfig() *rest.Config         { return p.s.Cluster.RESTConfig() }
func (p *realPlatform) EC2() *ec2sim.Server              { return p.s.EC2 }
func (p *realPlatform) NodeNames() []string              { return p.names }
func (p *realPlatform) VolumeDir() string                { return p.s.EC2Dir() }

func (p *realPlatform) Node(name string) PlatformNode {
	n, ok := p.nodes[name]
	if !ok {
		return nil
	}
	return n
}

// EnsureSnapshotting starts nothing: ebsinstall installs snapshot-controller, and the chart runs
// csi-snapshotter in the controller Pod by default. It checks that both are there.
func (p *realPlatform) EnsureSnapshotting(ctx context.Context) error {
	d, err := p.KubeClient().AppsV1().Deployments(ebsinstall.Namespace).Get(ctx, "snapshot-controller", metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("snapshot-controller: %w", err)
	}
	if d.Status.AvailableReplicas == 0 {
		return fmt.Errorf("snapshot-controller has no available replica")
	}
	return p.controllerRuns(ctx, "csi-snapshotter")
}

// CheckResizer checks that the chart's controller Pod runs csi-resizer, as it does by default.
func (p *realPlatform) CheckResizer(ctx context.Context) error {
	return p.controllerRuns(ctx, "csi-resizer")
}

// controllerRuns fails unless the chart's controller Deployment has a container of that name.
func (p *realPlatform) controllerRuns(ctx context.Context, container string) error {
	d, err := p.KubeClient().AppsV1().Deployments(ebsinstall.Namespace).Get(ctx, chartController, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == container {
			return nil
		}
	}
	return fmt.Errorf("the chart's %s runs no %s", chartController, container)
}

// realNode is one real node: its kubelet's paths are those of the kubelet's own code (volume handles hashed
// in the staging path, the PV's name in a Pod's).
type realNode struct {
	n              *node.Node
	zone, instance string
}

func (n *realNode) Zone() string       { return n.zone }
func (n *realNode) InstanceID() string { return n.instance }

// root is the node's / as this process reads it.
func (n *realNode) root() string { return fmt.Sprintf("/proc/%d/root", n.n.Pid()) }

// hostPath is the path this process reads p of the node at.
func (n *realNode) hostPath(p string) string { return n.root() + p }

func (n *realNode) StagingPath(volumeHandle string) string {
	sum := sha256.Sum256([]byte(volumeHandle))
	return n.hostPath(filepath.Join(csiPluginDir, Driver, hex.EncodeToString(sum[:]), "globalmount"))
}

func (n *realNode) PublishPath(podUID, pvName string) string {
	return n.hostPath(filepath.Join(kubeletRoot, "pods", podUID, "volumes", csiVolumeDir, pvName, "mount"))
}

// DevicePath follows the kubelet's link in the Pod's volumeDevices to the block publish path: the link is
// absolute in the node's terms, which the host would resolve against its own root.
func (n *realNode) DevicePath(podUID, pvName string) string {
	link := n.hostPath(filepath.Join(kubeletRoot, "pods", podUID, "volumeDevices", csiVolumeDir, pvName))
	target, err := os.Readlink(link)
	if err != nil || !filepath.IsAbs(target) {
		return link
	}
	return n.hostPath(target)
}

// FSType reads the node's mount table, in which path (one of the node's paths above) is the part after root.
func (n *realNode) FSType(path string) (string, error) {
	inNode, ok := strings.CutPrefix(path, n.root())
	if !ok {
		return "", fmt.Errorf("%s is not a path of node %s (%s)", path, n.n.Name, n.root())
	}
	return mountFSType(fmt.Sprintf("/proc/%d/mountinfo", n.n.Pid()), inNode)
}

// CSIMountsLeft lists the mounts of CSI volumes in the node's mount table: staging and block paths under the
// kubelet's CSI plugin directory, and Pods' CSI volumes. Other mounts under the kubelet's root (the API
// tokens of the node plugin's own Pod) belong to Pods that keep running.
func (n *realNode) CSIMountsLeft() ([]string, error) {
	if n.n.Pid() == 0 {
		return nil, errors.New("node " + n.n.Name + " is not running")
	}
	return rig.MountPoints(fmt.Sprintf("/proc/%d/mountinfo", n.n.Pid()), func(mp string) bool {
		inPod := strings.HasPrefix(mp, kubeletRoot+"/pods/") && strings.Contains(mp, "/"+csiVolumeDir+"/")
		return inPod || strings.HasPrefix(mp, csiPluginDir+"/")
	})
}
