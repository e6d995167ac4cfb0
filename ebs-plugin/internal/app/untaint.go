package app

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/driver"
	"github.com/stowage-csi/stowage/shared/startuptaint"
)

// AgentNotReady is the startup taint key upstream's manifests and node groups use; any effect is removed.
const AgentNotReady = "ebs.csi.aws.com/agent-not-ready"

// startupTaintRemover returns the background task that removes the node's ebs.csi.aws.com/agent-not-ready
// taint once the kubelet has registered the driver, or nil when it cannot run: without CSI_NODE_NAME or a
// Kubernetes client the node plugin still serves (as upstream's does), and a node created with the taint
// stays tainted, which the log says.
func startupTaintRemover(ctx context.Context, c Config) func(context.Context) {
	logger := klog.FromContext(ctx)
	if c.NodeName == "" {
		logger.Info("CSI_NODE_NAME is not set; the startup taint will not be removed", "taint", AgentNotReady)
		return nil
	}
	client, err := kubeClient(c)
	if err != nil {
		logger.Info("No Kubernetes client; the startup taint will not be removed", "taint", AgentNotReady, "err", err.Error())
		return nil
	}
	// The node plugin reports an attach limit, so the taint stays until the kubelet has written it into the
	// CSINode, as upstream's does: before that the scheduler would not count this node's volumes.
	cfg := startuptaint.Config{Client: client, NodeName: c.NodeName, Driver: driver.DriverName, TaintKey: AgentNotReady, RequireAllocatable: true}
	return func(ctx context.Context) {
		// Remove only fails when ctx ends: the plugin is stopping before the kubelet registered it.
		if err := startuptaint.Remove(ctx, cfg); err != nil {
			klog.FromContext(ctx).Info("Stopped before the startup taint was removed", "reason", err.Error())
		}
	}
}
