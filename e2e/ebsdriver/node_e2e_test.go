//go:build e2e

package ebsdriver

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/e2e/ec2sim"
)

// TestE2EEBSNodeModeWithoutCredentials starts ebs-plugin in node mode with an environment that holds no AWS
// credentials at all and checks that it serves the node service, with NodeGetInfo answered from the
// emulator's IMDSv2 endpoint.
func TestE2EEBSNodeModeWithoutCredentials(t *testing.T) {
	const instanceID = "i-0a0de00000000c0de"
	sim, linkDir := startSim(t, 0.01, []ec2sim.Instance{{ID: instanceID, Zone: "us-east-1c", Type: "m5.large"}})
	env := pluginEnv(t, sim, instanceID, false)
	for _, e := range env {
		if strings.HasPrefix(e, "AWS_ACCESS_KEY_ID=") || strings.HasPrefix(e, "AWS_SECRET_ACCESS_KEY=") || strings.HasPrefix(e, "AWS_SESSION_TOKEN=") {
			t.Fatalf("credentials in the node environment: %s", e)
		}
	}
	p := startPlugin(t, buildPlugin(t), env, "node", "--metadata-sources=imds", "--device-link-dir="+linkDir)
	ctx := testContext(t, 30*time.Second)

	node := csi.NewNodeClient(p.conn)
	info, err := node.NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatalf("NodeGetInfo: %v", err)
	}
	seg := info.GetAccessibleTopology().GetSegments()
	if info.GetNodeId() != instanceID || seg["topology.ebs.csi.aws.com/zone"] != "us-east-1c" || seg["topology.kubernetes.io/zone"] != "us-east-1c" {
		t.Fatalf("NodeGetInfo = %v", info)
	}
	// m5.large: 27 shared slots, minus the root volume; one network interface takes nothing more.
	if info.GetMaxVolumesPerNode() != 26 {
		t.Fatalf("max volumes = %d, want 26", info.GetMaxVolumesPerNode())
	}
	caps, err := node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatalf("NodeGetCapabilities: %v", err)
	}
	var got []csi.NodeServiceCapability_RPC_Type
	for _, c := range caps.GetCapabilities() {
		got = append(got, c.GetRpc().GetType())
	}
	want := []csi.NodeServiceCapability_RPC_Type{
		csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
		csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
		csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
		csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("NodeGetCapabilities = %v, want %v", got, want)
	}
	_, err = node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-0123", VolumePath: t.TempDir() + "/gone"})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("NodeGetVolumeStats on a missing path: %v", err)
	}
	_, err = node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-0123", StagingTargetPath: t.TempDir(),
		VolumeCapability: &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("NodeStageVolume of an unattached volume: %v", err)
	}
	// The controller service is not served in node mode.
	_, err = csi.NewControllerClient(p.conn).ControllerGetCapabilities(ctx, &csi.ControllerGetCapabilitiesRequest{})
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("ControllerGetCapabilities in node mode: %v", err)
	}
}
