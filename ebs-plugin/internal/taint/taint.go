// Package taint removes the startup taint ebs.csi.aws.com/agent-not-ready from the node plugin's Node.
//
// Clusters create nodes with that taint so that no pod needing an EBS volume is scheduled there before the
// node plugin can serve it; otherwise the pod's volume cannot be staged, and the scheduler, not knowing the
// node's attach limit yet, may put more volumes on it than the instance can hold. The node plugin is ready
// once the kubelet has registered it: the node's CSINode lists the driver, and the kubelet writes the
// driver's attach limit (allocatable) into that same entry.
package taint

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/shared/patch"
)

// AgentNotReady is the taint key upstream's manifests and node groups use; any effect is removed.
const AgentNotReady = "ebs.csi.aws.com/agent-not-ready"

// DefaultBackoff starts as upstream's (0.5 s, doubling) but, where upstream gives up after about ten
// minutes, keeps asking once a minute: a node left tainted never gets an EBS pod, and a slow registration
// (node-driver-registrar restarting, a busy kubelet) should not need a restart of the node plugin. Each
// attempt is one or two GETs.
func DefaultBackoff() wait.Backoff {
	return wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Steps: 10, Cap: time.Minute}
}

// Config is what Remove needs.
type Config struct {
	Client   kubernetes.Interface
	NodeName string
	// Driver is the CSI driver name the CSINode must list (ebs.csi.aws.com).
	Driver string
	// Backoff spaces the attempts; zero means DefaultBackoff.
	Backoff wait.Backoff
}

// Remove removes AgentNotReady from the Node once its CSINode lists the driver, retrying with c.Backoff
// until that is done or ctx ends. A Node without the taint is left alone, without a write.
func Remove(ctx context.Context, c Config) error {
	logger := klog.FromContext(ctx).WithValues("node", c.NodeName, "taint", AgentNotReady)
	backoff := c.Backoff
	if backoff.Duration <= 0 {
		backoff = DefaultBackoff()
	}
	for {
		done, err := c.try(ctx)
		if done {
			return nil
		}
		logger.V(2).Info("Startup taint not removed yet; retrying", "reason", err.Error())
		// Past its steps, Step returns the cap forever: keep trying, at most once a minute by default.
		t := time.NewTimer(backoff.Step())
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("removing taint %s from node %s: %w (last: %w)", AgentNotReady, c.NodeName, context.Cause(ctx), err)
		case <-t.C:
		}
	}
}

// try makes one attempt. It returns done when the Node has no AgentNotReady taint (any more), or else why
// not yet.
func (c Config) try(ctx context.Context) (done bool, err error) {
	logger := klog.FromContext(ctx).WithValues("node", c.NodeName, "taint", AgentNotReady)
	node, err := c.Client.CoreV1().Nodes().Get(ctx, c.NodeName, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("reading Node %s: %w", c.NodeName, err)
	}
	if !slices.ContainsFunc(node.Spec.Taints, isAgentNotReady) {
		logger.V(2).Info("Node has no startup taint")
		return true, nil
	}
	registered, err := c.registered(ctx)
	if !registered {
		return false, err
	}
	// A merge patch preconditioned on the resourceVersion read above: a taint added or changed meanwhile
	// makes it fail with Conflict instead of being overwritten, and the next attempt reads again.
	if _, err := patch.Mutate(ctx, c.Client.CoreV1().Nodes().Patch, node, func(n *corev1.Node) {
		n.Spec.Taints = slices.DeleteFunc(slices.Clone(n.Spec.Taints), isAgentNotReady)
	}); err != nil {
		return false, fmt.Errorf("removing the taint from Node %s: %w", c.NodeName, err)
	}
	logger.Info("Removed the startup taint: the driver is registered with the kubelet")
	return true, nil
}

// registered reports whether the node's CSINode lists the driver, or why not.
func (c Config) registered(ctx context.Context) (bool, error) {
	csiNode, err := c.Client.StorageV1().CSINodes().Get(ctx, c.NodeName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, fmt.Errorf("CSINode %s does not exist yet", c.NodeName)
	case err != nil:
		return false, fmt.Errorf("reading CSINode %s: %w", c.NodeName, err)
	}
	for _, d := range csiNode.Spec.Drivers {
		if d.Name == c.Driver {
			return true, nil
		}
	}
	return false, fmt.Errorf("CSINode %s does not list driver %s yet", c.NodeName, c.Driver)
}

func isAgentNotReady(t corev1.Taint) bool { return t.Key == AgentNotReady }
