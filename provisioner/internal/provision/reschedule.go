package provision

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// nodeGone reports whether the Node named by the claim's selected-node annotation no longer exists. The cache
// answers first; its "not found" is confirmed with a GET, because the scheduler may pick a Node our cache has
// not seen yet, and dropping its choice then would only delay the pod.
func (p *Provisioner) nodeGone(ctx context.Context, name string) (bool, error) {
	if p.nodes != nil {
		_, err := p.nodes.Get(name)
		if err == nil {
			return false, nil
		}
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("get selected node %s: %w", name, err)
		}
	}
	_, err := p.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return false, nil
	case apierrors.IsNotFound(err):
		return true, nil
	default:
		return false, fmt.Errorf("get selected node %s: %w", name, err)
	}
}

// rescheduleFromGoneNode hands a claim whose selected Node was deleted back to the scheduler, as upstream does:
// it drops volume.kubernetes.io/selected-node (one resourceVersion-guarded Update) so the scheduler picks a Node
// that exists, instead of the provisioner failing on the missing Node forever. The journal entry (or legacy
// intent) is kept: an earlier CreateVolume for the old Node may have made the volume, and it is what finds it again.
func (p *Provisioner) rescheduleFromGoneNode(ctx context.Context, claim *v1.PersistentVolumeClaim, node string) error {
	if _, err := p.mutateClaim(ctx, claim, func(c *v1.PersistentVolumeClaim) {
		delete(c.Annotations, annSelectedNode)
	}); err != nil {
		return err
	}
	klog.FromContext(ctx).V(2).Info("Selected node no longer exists, claim sent back to the scheduler", "node", node)
	p.event(claim, v1.EventTypeWarning, ReasonProvisioningFailed,
		fmt.Sprintf("selected node %q no longer exists: the claim is sent back to the scheduler", node))
	return nil
}
