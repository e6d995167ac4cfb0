package app

import (
	"context"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/driver"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/prestop"
)

// ModePreStopHook is upstream's `pre-stop-hook` mode, the node pod's lifecycle.preStop command: it waits
// while the node drains until the node's VolumeAttachments are gone, then exits.
const ModePreStopHook driver.Mode = "pre-stop-hook"

// runPreStop runs the hook for the node named by CSI_NODE_NAME. It serves nothing, so it needs neither AWS
// nor the CSI socket; its only bound is ctx, which the kubelet ends by killing the hook at the pod's
// terminationGracePeriodSeconds.
func runPreStop(ctx context.Context, c Config) error {
	client, err := kubeClient(c)
	if err != nil {
		return err
	}
	return prestop.Run(ctx, client, c.NodeName, driver.DriverName)
}
