//go:build e2e

package s3chart_test

import (
	"context"
	"testing"

	"github.com/stowage-csi/stowage/e2e/s3install"
)

// TestE2ES3ChartOnRealNodes installs stowage-s3 with `helm install` and its default values, overriding only the
// images (assembled here) and their pull policy; the S3 server's endpoint is the volume's mount options and its
// keys the chart's aws-secret, as upstream documents for S3-compatible servers. The real kubelets register the
// driver and the startup taint goes; Pods on both nodes write and read one bucket through Mountpoint Pods the
// controller created, which get the FUSE descriptor from the node plugin; deleting the Pods unmounts, and the
// teardown leaves no mount, FUSE connection or process.
func TestE2ES3ChartOnRealNodes(t *testing.T) {
	ctx := context.Background()
	st := s3install.ForTest(t, s3install.Options{})
	c, client, dyn, s3 := st.Cluster, st.Client, st.Dynamic, st.S3

	if err := s3.CreateBucket(ctx, bucket); err != nil {
		t.Fatal(err)
	}
	createVolume(t, ctx, client, s3.Endpoint, volume, nil)

	var fuseConns []string
	t.Run("WriteAndReadOnEachNode", func(t *testing.T) {
		fuseConns = writeReadShare(t, ctx, client, dyn, c, s3)
	})
	t.Run("ReadOnlyApartFromReadWrite", func(t *testing.T) {
		readOnlyApart(t, ctx, client, dyn)
	})
	t.Run("NodePluginRestart", func(t *testing.T) {
		nodePluginRestart(t, ctx, client, dyn, c.Nodes[1], s3)
	})
	t.Run("MountpointCrash", func(t *testing.T) {
		mountpointCrash(t, ctx, client, dyn, c.Nodes[0])
	})
	t.Run("RefusedMountOption", func(t *testing.T) {
		refusedOption(t, ctx, client, s3.Endpoint)
	})

	// Tear down as a user would, then the nodes, and look at the machine.
	if err := st.Uninstall(ctx); err != nil {
		t.Fatal(err)
	}
	checkTeardown(t, ctx, st, fuseConns)
}
