//go:build e2e

package ebsdriver

import (
	"context"
	"os"
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
	d := localDriver(t, "i-04ea17400000000a1")
	ctx := testContext(t, 2*time.Minute)
	capability := mountCapability("ext4")
	checkHealthAdvertised(ctx, t, d.node)
	id := d.createVolume(ctx, volumeRequest("health", 1, capability, nil))
	v := d.mount(ctx, "health", id, capability, nil)
	h := &healthCheck{t: t, node: d.node, v: v}

	if got := h.get(ctx, h.both()); len(got) != 0 {
		t.Fatalf("staged and published volume reported unhealthy: %v", got)
	}
	if got := h.get(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: id}); len(got) != 0 {
		t.Fatalf("attached volume without paths reported unhealthy: %v", got)
	}

	// Someone unmounts the pod's bind mount behind the driver's back.
	if err := unix.Unmount(v.target, 0); err != nil {
		t.Fatalf("unmount %s: %v", v.target, err)
	}
	h.wantInaccessible(ctx, "NotMounted")
	if got := h.get(ctx, h.onlyStaging()); len(got) != 0 {
		t.Fatalf("staging path reported unhealthy after only the publish path broke: %v", got)
	}

	// ... and then removes the directory.
	if err := os.Remove(v.target); err != nil {
		t.Fatal(err)
	}
	h.wantInaccessible(ctx, "PathNotFound")
	// Stats keep their error code for a missing path.
	if _, err := d.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: v.target}); status.Code(err) != codes.NotFound {
		t.Fatalf("NodeGetVolumeStats on a missing path: %v, want NotFound", err)
	}

	// The driver cleans up as usual.
	d.unpublish(ctx, v)
	d.unstage(ctx, v)
	if got := h.get(ctx, h.onlyStaging()); len(got) != 1 || got[0].GetReason() != "NotMounted" {
		t.Fatalf("health after unstage = %v, want NotMounted", got)
	}
	d.detach(ctx, id)
	if _, err := d.node.NodeGetVolumeHealth(ctx, &csi.NodeGetVolumeHealthRequest{VolumeId: id}); status.Code(err) != codes.NotFound {
		t.Fatalf("NodeGetVolumeHealth of a detached volume without paths: %v, want NotFound", err)
	}
	d.deleteVolume(ctx, id)
}

func checkHealthAdvertised(ctx context.Context, t *testing.T, node csi.NodeClient) {
	t.Helper()
	caps, err := node.NodeGetCapabilities(ctx, &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range caps.GetCapabilities() {
		if c.GetRpc().GetType() == csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH {
			return
		}
	}
	t.Fatalf("GET_VOLUME_HEALTH not advertised: %v", caps.GetCapabilities())
}

// healthCheck asks NodeGetVolumeHealth about one mounted volume.
type healthCheck struct {
	t    *testing.T
	node csi.NodeClient
	v    *nodeVolume
}

func (h *healthCheck) both() *csi.NodeGetVolumeHealthRequest {
	return &csi.NodeGetVolumeHealthRequest{VolumeId: h.v.id, VolumePublishPath: h.v.target, StagingTargetPath: h.v.staging}
}

func (h *healthCheck) onlyStaging() *csi.NodeGetVolumeHealthRequest {
	return &csi.NodeGetVolumeHealthRequest{VolumeId: h.v.id, StagingTargetPath: h.v.staging}
}

// get returns the health statuses of the answer, which must name the volume.
func (h *healthCheck) get(ctx context.Context, req *csi.NodeGetVolumeHealthRequest) []*csi.VolumeHealth_VolumeHealthEntry {
	h.t.Helper()
	resp, err := h.node.NodeGetVolumeHealth(ctx, req)
	if err != nil {
		h.t.Fatalf("NodeGetVolumeHealth(%v): %v", req, err)
	}
	if resp.GetVolumeHealth().GetVolumeId() != h.v.id {
		h.t.Fatalf("volume_id = %q, want %q", resp.GetVolumeHealth().GetVolumeId(), h.v.id)
	}
	return resp.GetVolumeHealth().GetHealthStatuses()
}

// wantInaccessible fails unless the health of both paths is one INACCESSIBLE entry with reason, naming the
// publish path.
func (h *healthCheck) wantInaccessible(ctx context.Context, reason string) {
	h.t.Helper()
	got := h.get(ctx, h.both())
	if len(got) != 1 || got[0].GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE || got[0].GetReason() != reason ||
		!strings.Contains(got[0].GetMessage(), h.v.target) {
		h.t.Fatalf("health = %v, want one INACCESSIBLE/%s naming %s", got, reason, h.v.target)
	}
}
