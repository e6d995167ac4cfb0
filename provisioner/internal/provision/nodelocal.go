package provision

import (
	"context"
	"fmt"
	"slices"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/csiconn"
)

// Under --node-deployment every node runs a provisioner, each talking to its own node's driver: a volume may be
// provisioned, cleaned up and deleted only by the provisioner of the node it lives on, or every node's instance
// would call its own driver for every other node's volumes.

// claimOfOtherNode reports, under --node-deployment, whether the claim is another node's business: selected for
// another node, or carrying a legacy intent without being selected for this one. A claim no node has taken yet is
// not: it is a candidate for this node to take.
func (p *Provisioner) claimOfOtherNode(claim *v1.PersistentVolumeClaim) bool {
	if p.cfg.NodeName == "" {
		return false
	}
	sel := claim.Annotations[annSelectedNode]
	return sel != p.cfg.NodeName && (sel != "" || hasLegacyIntent(claim))
}

// volumeOnThisNode reports, under --node-deployment, whether the PV's required node affinity matches this
// node. A PV without node affinity names no node, so no node's instance deletes it (upstream does the same).
func (p *Provisioner) volumeOnThisNode(ctx context.Context, pv *v1.PersistentVolume) (bool, error) {
	if p.cfg.NodeName == "" {
		return true, nil
	}
	if pv.Spec.NodeAffinity == nil || pv.Spec.NodeAffinity.Required == nil {
		return false, nil
	}
	node, err := p.thisNode(ctx)
	if err != nil {
		return false, err
	}
	return matchesNodeSelector(node, pv.Spec.NodeAffinity.Required), nil
}

// thisNode is the Node this provisioner runs on, from the cache when there is one (drivers with topology).
func (p *Provisioner) thisNode(ctx context.Context) (*v1.Node, error) {
	if p.nodes != nil {
		if n, err := p.nodes.Get(p.cfg.NodeName); err == nil {
			return n, nil
		}
	}
	n, err := p.Kube.CoreV1().Nodes().Get(ctx, p.cfg.NodeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get this node %s: %w", p.cfg.NodeName, err)
	}
	return n, nil
}

// matchesNodeSelector reports whether node satisfies sel as the scheduler reads a PV's required node affinity:
// the terms are ORed, the requirements within a term ANDed, and an empty term matches nothing. Operators
// other than the label set ones and metadata.name In/NotIn are not matched, so an unknown one never claims
// another node's volume.
func matchesNodeSelector(node *v1.Node, sel *v1.NodeSelector) bool {
	for _, term := range sel.NodeSelectorTerms {
		if len(term.MatchExpressions) == 0 && len(term.MatchFields) == 0 {
			continue
		}
		if matchesTerm(node, term) {
			return true
		}
	}
	return false
}

func matchesTerm(node *v1.Node, term v1.NodeSelectorTerm) bool {
	set := labels.Set(node.Labels)
	for _, r := range term.MatchExpressions {
		value, has := set[r.Key]
		var ok bool
		switch r.Operator {
		case v1.NodeSelectorOpIn:
			ok = has && slices.Contains(r.Values, value)
		case v1.NodeSelectorOpNotIn:
			ok = !has || !slices.Contains(r.Values, value)
		case v1.NodeSelectorOpExists:
			ok = has
		case v1.NodeSelectorOpDoesNotExist:
			ok = !has
		}
		if !ok {
			return false
		}
	}
	for _, r := range term.MatchFields {
		if r.Key != "metadata.name" {
			return false
		}
		var ok bool
		switch r.Operator {
		case v1.NodeSelectorOpIn:
			ok = slices.Contains(r.Values, node.Name)
		case v1.NodeSelectorOpNotIn:
			ok = !slices.Contains(r.Values, node.Name)
		}
		if !ok {
			return false
		}
	}
	return true
}

// mayTakeImmediate decides, under --node-deployment, whether this node's provisioner competes for an immediate
// claim no node has taken, as upstream's does: not when its node is outside the class's allowedTopologies, and
// not while its driver reports less capacity than the claim asks in every segment the volume could be made in
// for this node. A node without room is asked again at the long retry interval, since capacity may free up and
// no event would say so; a check that cannot be made (a failed GetCapacity, a request that cannot be built)
// does not stop it, so provisioning itself reports the problem on the claim.
func (p *Provisioner) mayTakeImmediate(ctx context.Context, claim *v1.PersistentVolumeClaim, class *storagev1.StorageClass) (bool, error) {
	logger := klog.FromContext(ctx)
	if p.cfg.Capabilities.Topology && len(class.AllowedTopologies) > 0 {
		if err := p.nodeAllowed(class); err != nil {
			logger.V(4).Info("Not taking the claim: this node's topology is not allowed by its StorageClass", "node", p.cfg.NodeName, "reason", err.Error())
			return false, nil
		}
	}
	if !p.cfg.Capabilities.GetCapacity {
		return true, nil
	}
	size := claim.Spec.Resources.Requests[v1.ResourceStorage]
	if size.Value() == 0 {
		return true, nil
	}
	plan, err := p.planCreate(ctx, claim, class, p.volumeName(claim.UID), p.cfg.NodeName)
	if err != nil {
		logger.V(3).Info("Taking the claim although its capacity could not be checked", "err", err)
		return true, nil
	}
	topologies := []*csi.Topology{nil}
	if r := plan.req.GetAccessibilityRequirements(); len(r.GetRequisite()) > 0 {
		topologies = r.Requisite
	}
	for _, t := range topologies {
		resp, err := csiconn.Call(ctx, p.cfg.Timeout, p.CSI.GetCapacity, &csi.GetCapacityRequest{
			VolumeCapabilities: plan.req.VolumeCapabilities, Parameters: plan.req.Parameters, AccessibleTopology: t,
		})
		if err != nil {
			logger.V(3).Info("Taking the claim although GetCapacity failed", "err", err)
			return true, nil
		}
		if size.Value() <= resp.AvailableCapacity {
			return true, nil
		}
	}
	return false, slow(fmt.Errorf("node %s has less than the %s the claim asks for; not taking it", p.cfg.NodeName, size.String()))
}

// nodeAllowed checks this node's segment against the class's allowedTopologies as upstream does: some
// allowed combination must be a subset of the node's segment.
func (p *Provisioner) nodeAllowed(class *storagev1.StorageClass) error {
	csiNode, err := p.csiNodes.Get(p.cfg.NodeName)
	if err != nil {
		return fmt.Errorf("get CSINode %s: %w", p.cfg.NodeName, err)
	}
	keys, ok := p.topologyKeys(csiNode)
	if !ok || len(keys) == 0 {
		return fmt.Errorf("driver %s has no topology keys on node %s", p.cfg.DriverName, p.cfg.NodeName)
	}
	node, err := p.nodes.Get(p.cfg.NodeName)
	if err != nil {
		return fmt.Errorf("get node %s: %w", p.cfg.NodeName, err)
	}
	mine, err := nodeSegment(node, keys)
	if err != nil {
		return err
	}
	allowed := flattenAllowed(class.AllowedTopologies)
	for _, a := range allowed {
		if a.subsetOf(mine) {
			return nil
		}
	}
	return fmt.Errorf("segment %v is in none of %v", mine, allowed)
}
