package kubeletsim

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// leaseDuration and renewInterval follow the kubelet's defaults (40 s lease, renewed every 10 s), so the
// node lifecycle controller never marks the node unreachable while it runs.
const (
	leaseDuration  = 40
	renewInterval  = 10 * time.Second
	nodeLeaseNS    = "kube-node-lease"
	kubeletVersion = "v1.36.3"
)

func labelsEverything() labels.Selector { return labels.Everything() }

func typesUID(s string) types.UID { return types.UID(s) }

// register creates (or updates) the Node with its labels, annotations and a Ready status, then records the
// plugin's NodeGetInfo in the Node (node ID annotation, topology labels) and the CSINode, as the kubelet's
// plugin registration does.
func (n *Node) register(ctx context.Context) error {
	info, err := n.node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		return fmt.Errorf("kubeletsim: NodeGetInfo: %w", err)
	}
	n.nodeID = info.GetNodeId()
	if n.nodeID == "" {
		return fmt.Errorf("kubeletsim: NodeGetInfo returned no node_id")
	}
	segments := info.GetAccessibleTopology().GetSegments()

	nodeLabels := map[string]string{LabelHostname: n.cfg.NodeName, "kubernetes.io/os": "linux", "kubernetes.io/arch": runtime.GOARCH}
	if n.cfg.Zone != "" {
		nodeLabels[LabelZone] = n.cfg.Zone
	}
	if n.cfg.InstanceType != "" {
		nodeLabels[LabelInstanceType] = n.cfg.InstanceType
	}
	for k, v := range n.cfg.Labels {
		nodeLabels[k] = v
	}
	for k, v := range segments {
		nodeLabels[k] = v
	}
	node, err := n.client.CoreV1().Nodes().Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		ids, err := nodeIDAnnotation("", n.driver, n.nodeID)
		if err != nil {
			return err
		}
		node = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.cfg.NodeName, Labels: nodeLabels,
			Annotations: map[string]string{annotationControllerAD: "true", annotationNodeID: ids}},
			Spec: v1.NodeSpec{Taints: n.cfg.Taints}}
		if node, err = n.client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kubeletsim: create node: %w", err)
		}
	case err != nil:
		return fmt.Errorf("kubeletsim: get node: %w", err)
	default:
		// The Node may already carry other drivers' node IDs (one kubeletsim per plugin on the node, or a
		// restarted one); the annotation is one JSON map for all of them, so this driver's entry is merged in.
		ids, err := nodeIDAnnotation(node.Annotations[annotationNodeID], n.driver, n.nodeID)
		if err != nil {
			return fmt.Errorf("kubeletsim: node %s: %w", n.cfg.NodeName, err)
		}
		annotations := map[string]string{annotationControllerAD: "true", annotationNodeID: ids}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": nodeLabels, "annotations": annotations}})
		if node, err = n.client.CoreV1().Nodes().Patch(ctx, n.cfg.NodeName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("kubeletsim: update node: %w", err)
		}
	}
	// A merge patch of the status, not an update: controllers (node lifecycle, taints) change the new Node
	// at the same time.
	now := metav1.Now()
	capacity := v1.ResourceList{
		v1.ResourceCPU: resource.MustParse("2"), v1.ResourceMemory: resource.MustParse("8Gi"), v1.ResourcePods: resource.MustParse("110"),
	}
	status, err := json.Marshal(map[string]any{"status": v1.NodeStatus{
		Capacity: capacity, Allocatable: capacity,
		Conditions: []v1.NodeCondition{{
			Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubeletsim is posting ready status",
			LastHeartbeatTime: now, LastTransitionTime: now,
		}},
		Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "127.0.0.1"}, {Type: v1.NodeHostName, Address: n.cfg.NodeName}},
		NodeInfo:  v1.NodeSystemInfo{KubeletVersion: kubeletVersion, OperatingSystem: "linux", Architecture: runtime.GOARCH},
	}})
	if err != nil {
		return err
	}
	if _, err := n.client.CoreV1().Nodes().Patch(ctx, n.cfg.NodeName, types.StrategicMergePatchType, status, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("kubeletsim: node status: %w", err)
	}
	if err := n.renewOnce(ctx); err != nil {
		return err
	}
	return n.registerCSINode(ctx, node, info)
}

// nodeIDAnnotation is the csi.volume.kubernetes.io/nodeid annotation with driver's entry set to nodeID and
// the other drivers' entries of existing (the annotation's current value, "" for none) kept.
func nodeIDAnnotation(existing, driver, nodeID string) (string, error) {
	ids := map[string]string{}
	if existing != "" {
		if err := json.Unmarshal([]byte(existing), &ids); err != nil {
			return "", fmt.Errorf("annotation %s=%q: %w", annotationNodeID, existing, err)
		}
	}
	ids[driver] = nodeID
	b, err := json.Marshal(ids)
	return string(b), err
}

// registerCSINode adds or replaces the driver's entry in the node's CSINode.
func (n *Node) registerCSINode(ctx context.Context, node *v1.Node, info *csi.NodeGetInfoResponse) error {
	keys := make([]string, 0, len(info.GetAccessibleTopology().GetSegments()))
	for k := range info.GetAccessibleTopology().GetSegments() {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	entry := storagev1.CSINodeDriver{Name: n.driver, NodeID: n.nodeID, TopologyKeys: keys}
	if max := info.GetMaxVolumesPerNode(); max > 0 {
		entry.Allocatable = &storagev1.VolumeNodeResources{Count: ptr.To(int32(max))}
	}
	csiNodes := n.client.StorageV1().CSINodes()
	existing, err := csiNodes.Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		obj := &storagev1.CSINode{
			ObjectMeta: metav1.ObjectMeta{Name: n.cfg.NodeName, OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID,
			}}},
			Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{entry}},
		}
		if _, err := csiNodes.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("kubeletsim: create csinode: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubeletsim: get csinode: %w", err)
	}
	drivers := []storagev1.CSINodeDriver{entry}
	for _, d := range existing.Spec.Drivers {
		if d.Name != n.driver {
			drivers = append(drivers, d)
		}
	}
	existing.Spec.Drivers = drivers
	if _, err := csiNodes.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("kubeletsim: update csinode: %w", err)
	}
	return nil
}

// renewLease keeps the node's Lease fresh until ctx ends.
func (n *Node) renewLease(ctx context.Context) {
	t := time.NewTicker(renewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := n.renewOnce(ctx); err != nil && ctx.Err() == nil {
				n.log.Error(err, "Renew node lease")
			}
		}
	}
}

func (n *Node) renewOnce(ctx context.Context) error {
	leases := n.client.CoordinationV1().Leases(nodeLeaseNS)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, n.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.cfg.NodeName, Namespace: nodeLeaseNS},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(n.cfg.NodeName),
				LeaseDurationSeconds: ptr.To(int32(leaseDuration)), RenewTime: &now},
		}
		if _, err := leases.Create(ctx, lease, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("kubeletsim: create node lease: %w", err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("kubeletsim: get node lease: %w", err)
	}
	lease.Spec.RenewTime = &now
	if _, err := leases.Update(ctx, lease, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("kubeletsim: renew node lease: %w", err)
	}
	return nil
}
