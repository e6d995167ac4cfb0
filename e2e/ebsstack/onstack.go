package ebsstack

import (
	"context"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
	"github.com/stowage-csi/stowage/e2e/kubeletsim"
)

// OnStack is the scenarios' Platform on s: its nodes' paths are kubeletsim's, on the host itself.
func OnStack(s *Stack) Platform { return stackPlatform{s} }

type stackPlatform struct{ s *Stack }

func (p stackPlatform) KubeClient() kubernetes.Interface { return p.s.Client }
func (p stackPlatform) RESTConfig() *rest.Config         { return p.s.Cluster.RESTConfig() }
func (p stackPlatform) EC2() *ec2sim.Server              { return p.s.EC2 }
func (p stackPlatform) NodeNames() []string              { return p.s.NodeOrder }

func (p stackPlatform) VolumeDir() string { return filepath.Join(p.s.Dir, "ec2") }

func (p stackPlatform) Node(name string) PlatformNode {
	n, ok := p.s.Nodes[name]
	if !ok {
		return nil
	}
	return stackNode{n}
}

// EnsureSnapshotting starts snapshot-controller and csi-snapshotter as processes if the stack was started
// without them.
func (p stackPlatform) EnsureSnapshotting(ctx context.Context) error {
	return p.s.ensureSnapshotSidecars(ctx)
}

func (p stackPlatform) CheckResizer(context.Context) error {
	if p.s.Sidecar("csi-resizer") == nil {
		return fmt.Errorf("the stack runs no csi-resizer: start it with Options.With")
	}
	return nil
}

// stackNode is a node of the stack: kubeletsim mounts in the host's own mount namespace.
type stackNode struct{ n *Node }

func (n stackNode) Zone() string       { return n.n.Spec.Zone }
func (n stackNode) InstanceID() string { return n.n.Spec.InstanceID }
func (n stackNode) StagingPath(volumeHandle string) string {
	return n.n.Kubelet.StagingPath(volumeHandle)
}
func (n stackNode) PublishPath(podUID, pvName string) string {
	return n.n.Kubelet.PublishPath(podUID, pvName)
}
func (n stackNode) DevicePath(podUID, pvName string) string {
	return n.n.Kubelet.DevicePath(podUID, pvName)
}

func (n stackNode) FSType(path string) (string, error) {
	return mountFSType("/proc/self/mountinfo", path)
}

// CSIMountsLeft lists every mount under the kubelet's root: the scenarios' Pods have no volumes but CSI ones,
// and kubeletsim mounts no API token.
func (n stackNode) CSIMountsLeft() ([]string, error) {
	return kubeletsim.MountsUnder(n.n.Kubelet.RootDir())
}
