package app

import (
	"context"

	"k8s.io/klog/v2"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/driver"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/taint"
)

// startupTaintRemover returns the background task that removes the node's ebs.csi.aws.com/agent-not-ready
// taint once the kubelet has registered the driver, or nil when it cannot run: without CSI_NODE_NAME or a
// Kubernetes client the node plugin still serves (as upstream's does), and a node created with the taint
// stays tainted, which the log says.
func startupTaintRemover(ctx context.Context, c Config) func(context.Context) {
	logger := klog.FromContext(ctx)
	if c.NodeName == "" {
		logger.Info("CSI_NODE_NAME is not set; the startup taint will not be removed", "taint", taint.AgentNotReady)
		return nil
	}
	client, err := kubeClient(c)
	if err != nil {
		logger.Info("No Kubernetes client; the startup taint will not be removed", "taint", taint.AgentNotReady, "err", err.Error())
		return nil
	}
	cfg := taint.Config{Client: client, NodeName: c.NodeName, Driver: driver.DriverName}
	return func(ctx context.Context) {
		if err := taint.Remove(ctx, cfg); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Removing the startup taint failed")
		}
	}
}
