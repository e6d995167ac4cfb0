//go:build e2e

package ebsdriver

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestE2EEBSVolumeHealth stages and publishes an ext4 volume on a loop device through the real binary, then
// breaks the publish path behind the driver's back: NodeGetVolumeHealth answers healthy, then
// INACCESSIBLE/NotMounted once the bind mount is gone, then INACCESSIBLE/PathNotFound once the directory is
// gone, while the staging path stays healthy throughout. The driver then cleans up as usual.
func TestE2EEBSVolumeHealth(t *testing.T) {
	const instanceID = "i-04ea17400000000a1"
	_, p := startLocalPlugin(t, instanceID)
	ctl, node := csi.NewControllerClient(p.conn), csi.NewNodeClient(p.conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}

	caps, err := node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	advertised := false
	for _, c := range caps.GetCapabilities() {
		advertised = advertised || c.GetRpc().GetType() == csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH
	}
	if !advertised {
		t.Fatalf("GET_VOLUME_HEALTH not advertised: %v", caps.GetCapabilities())
	}

	vol, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "health", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{capability}})
	if err != nil {
		t.Fatal(err)
	}
	id := vol.GetVolume().GetVolumeId()
	t.Cleanup(func() { _, _ = ctl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: id}) })
	pub, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: instanceID, VolumeCapability: capability})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = ctl.ControllerUnpublishVolume(context.Background(), &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: instanceID})
	})
	work := t.TempDir()
	staging, target := filepath.Join(work, "staging"), filepath.Join(work, "pod", "mount")
	// Runs before the emulator's cleanup detaches the loop device, also when the test fails half-way.
	t.Cleanup(func() {
		_ = unix.Unmount(target, unix.MNT_DETACH)
		_ = unix.Unmount(staging, unix.MNT_DETACH)
	})
	if _, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: capability,
		PublishContext: pub.GetPublishContext()}); err != nil {
		t.Fatalf("stage: %v", err)
	}
	if _, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: capability, PublishContext: pub.GetPublishContext()}); err != nil {
		t.Fatalf("publish: %v", err)
	}

	health := func(req *csi.NodeGetVolumeHealthRequest) []*csi.VolumeHealth_VolumeHealthEntry {
		t.Helper()
		resp, err := node.NodeGetVolumeHealth(ctx, req)
		if err != nil {
			t.Fatalf("NodeGetVolumeHealth(%v): %v", req, err)
		}
		if resp.GetVolumeHealth().GetVolumeId() != id {
			t.Fatalf("volume_id = %q, want %q", resp.GetVolumeHealth().GetVolumeId(), id)
		}
		return resp.GetVolumeHealth().GetHealthStatuses()
	}
	both := &csi.NodeGetVolumeHealthRequest{VolumeId: id, VolumePublishPath: target, StagingTargetPath: staging}
	onlyStaging := &csi.NodeGetVolumeHealthRequest{VolumeId: id, StagingTargetPath: staging}
	wantOne := func(got []*csi.VolumeHealth_VolumeHealthEntry, reason string) {
		t.Helper()
		if len(got) != 1 || got[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE || got[0].GetReason() != reason ||
			!strings.Contains(got[0].GetMessage(), target) {
			t.Fatalf("health = %v, want one INACCESSIBLE/%s naming %s", got, reason, target)
		}
	}

	if got := health(both); len(got) != 0 {
		t.Fatalf("staged and published volume reported unhealthy: %v", got)
	}
	if got := health(&csi.NodeGetVolumeHealthRequest{VolumeId: id}); len(got) != 0 {
		t.Fatalf("attached volume without paths reported unhealthy: %v", got)
	}

	// Someone unmounts the pod's bind mount behind the driver's back.
	if err := unix.Unmount(target, 0); err != nil {
		t.Fatalf("unmount %s: %v", target, err)
	}
	wantOne(health(both), "NotMounted")
	if got := health(onlyStaging); len(got) != 0 {
		t.Fatalf("staging path reported unhealthy after only the publish path broke: %v", got)
	}

	// ... and then removes the directory.
	if err := os.Remove(target); err != nil {
		t.Fatal(err)
	}
	wantOne(health(both), "PathNotFound")
	// Stats keep their error code for a missing path.
	if _, err := node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target}); status.Code(err) != codes.NotFound {
		t.Fatalf("NodeGetVolumeStats on a missing path: %v, want NotFound", err)
	}

	if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	if _, err := node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
		t.Fatalf("unstage: %v", err)
	}
	if got := health(onlyStaging); len(got) != 1 || got[0].GetReason() != "NotMounted" {
		t.Fatalf("health after unstage = %v, want NotMounted", got)
	}
	if _, err := ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: instanceID}); err != nil {
		t.Fatal(err)
	}
	if _, err := node.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: id}); status.Code(err) != codes.NotFound {
		t.Fatalf("NodeGetVolumeHealth of a detached volume without paths: %v, want NotFound", err)
	}
	if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
}
