package metadata

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeGetter fetches a Node; a client-go clientset's CoreV1().Nodes() satisfies it.
type NodeGetter interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
}

// Kubernetes reads the instance from the Node object named by CSI_NODE_NAME: providerID
// "aws:///<zone>/<instance-id>", and the instance-type and zone labels.
type Kubernetes struct {
	nodes    NodeGetter
	nodeName string
}

// NewKubernetes returns a Kubernetes source for nodeName (CSI_NODE_NAME when empty).
func NewKubernetes(nodes NodeGetter, nodeName string) *Kubernetes {
	if nodeName == "" {
		nodeName = os.Getenv("CSI_NODE_NAME")
	}
	return &Kubernetes{nodes: nodes, nodeName: nodeName}
}

// Name implements Source.
func (*Kubernetes) Name() string { return "kubernetes" }

// Get implements Source. Missing data, such as the empty providerID of a Node the cloud provider has not
// initialised yet, is an error and never a panic, so the node plugin keeps running and the caller can try the
// next source.
func (k *Kubernetes) Get(ctx context.Context) (*Instance, error) {
	if k.nodes == nil {
		return nil, errors.New("no Kubernetes client (set --kubeconfig or run in a pod)")
	}
	if k.nodeName == "" {
		return nil, errors.New("CSI_NODE_NAME is not set")
	}
	node, err := k.nodes.Get(ctx, k.nodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", k.nodeName, err)
	}
	return instanceFromNode(node)
}

func instanceFromNode(node *corev1.Node) (*Instance, error) {
	pid := node.Spec.ProviderID
	rest, ok := strings.CutPrefix(pid, "aws://")
	if !ok {
		return nil, fmt.Errorf("node %s: providerID %q is not an AWS provider ID", node.Name, pid)
	}
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	id := parts[len(parts)-1]
	if !strings.HasPrefix(id, "i-") {
		return nil, fmt.Errorf("node %s: providerID %q does not end in an instance ID", node.Name, pid)
	}
	inst := &Instance{InstanceID: id, EBSMappings: 0, ENIs: 1}
	inst.InstanceType = node.Labels[corev1.LabelInstanceTypeStable]
	inst.AvailabilityZone = node.Labels[corev1.LabelTopologyZone]
	if inst.AvailabilityZone == "" && len(parts) >= 2 {
		inst.AvailabilityZone = parts[len(parts)-2]
	}
	if inst.AvailabilityZone == "" {
		return nil, fmt.Errorf("node %s: no zone in labels or providerID", node.Name)
	}
	inst.Region = node.Labels[corev1.LabelTopologyRegion]
	if inst.Region == "" {
		inst.Region = regionFromZone(inst.AvailabilityZone)
	}
	return inst, nil
}
