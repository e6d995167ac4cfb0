package metadata

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Labels upstream's metadataLabeler keeps on each Node from DescribeInstances, so that a node without IMDS
// still learns what shares its attachment slots.
const (
	// VolumesLabel counts the instance's EBS volumes that no PV names, less the root (EBSMappings).
	VolumesLabel = "ebs.csi.aws.com/non-csi-ebs-volumes-count"
	// ENIsLabel counts the instance's network interfaces.
	ENIsLabel = "ebs.csi.aws.com/enis-count"
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
	return instanceFromNode(ctx, node)
}

// ProviderInstanceID reads the instance ID from the Node's providerID "aws:///<zone>/<instance-id>"; parts
// are the providerID's path segments.
func ProviderInstanceID(node *corev1.Node) (id string, parts []string, err error) {
	pid := node.Spec.ProviderID
	rest, ok := strings.CutPrefix(pid, "aws://")
	if !ok {
		return "", nil, fmt.Errorf("node %s: providerID %q is not an AWS provider ID", node.Name, pid)
	}
	parts = strings.Split(strings.Trim(rest, "/"), "/")
	id = parts[len(parts)-1]
	if !validInstanceID(id) {
		return "", nil, fmt.Errorf("node %s: providerID %q does not end in an instance ID", node.Name, pid)
	}
	return id, parts, nil
}

func instanceFromNode(ctx context.Context, node *corev1.Node) (*Instance, error) {
	id, parts, err := ProviderInstanceID(node)
	if err != nil {
		return nil, err
	}
	// Without the labeler's labels, assume what upstream assumes: one interface, no launch volumes.
	inst := &Instance{InstanceID: id, EBSMappings: 0, ENIs: 1}
	if n, ok := countLabel(ctx, node, VolumesLabel, 0); ok {
		inst.EBSMappings = n
	}
	if n, ok := countLabel(ctx, node, ENIsLabel, 1); ok {
		inst.ENIs = n
	}
	inst.InstanceType = node.Labels[corev1.LabelInstanceTypeStable]
	inst.AvailabilityZone = node.Labels[corev1.LabelTopologyZone]
	if inst.AvailabilityZone == "" && len(parts) >= 2 {
		// A blank segment ("aws:// /i-0") names no zone.
		inst.AvailabilityZone = strings.TrimSpace(parts[len(parts)-2])
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

// countLabel reads a count label of at least minimum. A malformed value is logged and ignored: a label anyone
// can edit must not stop the node from registering.
func countLabel(ctx context.Context, node *corev1.Node, key string, minimum int) (int, bool) {
	v, ok := node.Labels[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < minimum {
		klog.FromContext(ctx).Info("Ignoring malformed node label", "node", node.Name, "label", key, "value", v, "minimum", minimum)
		return 0, false
	}
	return n, true
}
