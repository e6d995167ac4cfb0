package app

import (
	"context"
	"fmt"
	"time"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/driver"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/labeler"
	"github.com/stowage-csi/stowage/ebs-plugin/internal/metrics"
	"github.com/stowage-csi/stowage/shared/leaderelection"
)

// ModeMetadataLabeler is upstream's `metadataLabeler` mode: one leader among the replicas labels every Node
// with its instance's ENI and non-CSI EBS volume counts (package labeler).
const ModeMetadataLabeler driver.Mode = "metadataLabeler"

// runLabeler labels Nodes under leader election on the Lease upstream's labeler takes
// ("metadata-labeler-ebs-csi-aws-com" in the pod's namespace), so Stowage and upstream replicas never label
// at once. It needs EC2 (DescribeInstances) and Nodes get/list/watch/patch, PVs list/watch, Leases.
func runLabeler(ctx context.Context, c Config) error {
	client, err := kubeClient(c)
	if err != nil {
		return err
	}
	// A clientset of its own for the Lease, so label patches cannot starve its renewals.
	leaseClient, err := kubeClient(c)
	if err != nil {
		return err
	}
	ec2, _, err := controllerCloud(ctx, c, metrics.New())
	if err != nil {
		return err
	}
	e, err := leaderelection.New(leaderelection.Config{
		Enabled:       true,
		Client:        leaseClient,
		LockName:      leaderelection.LockName("metadata-labeler-", driver.DriverName),
		Namespace:     leaderelection.ResolveNamespace("", leaderelection.ServiceAccountNamespaceFile),
		LeaseDuration: 15 * time.Second, // csi-lib-utils' defaults, which upstream's labeler uses
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   5 * time.Second,
		ReleaseOnExit: true,
	})
	if err != nil {
		return fmt.Errorf("leader election: %w", err)
	}
	l := &labeler.Labeler{Client: client, Instances: ec2, Driver: driver.DriverName, Interval: labeler.Interval}
	return e.Run(ctx, l.Run)
}
