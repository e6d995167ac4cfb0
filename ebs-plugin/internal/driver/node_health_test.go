package driver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/testutil"
)

// healthRig is one volume staged and published (filesystem at fsTarget, raw block at blockTarget) through
// the fake mounter, for a test case to break.
type healthRig struct {
	driver                         *Driver
	fm                             *testutil.FakeMounter
	staging, fsTarget, blockTarget string
}

func TestNodeGetVolumeHealth(t *testing.T) {
	type want struct {
		reason string   // "" for a healthy answer
		inMsg  []string // fragments of the entry's message
	}
	tests := []struct {
		name     string
		breakIt  func(t *testing.T, r healthRig)
		req      func(r healthRig) *csi.NodeGetVolumeHealthRequest
		wantCode codes.Code
		inErr    []string
		want     []want
	}{
		{
			name: "healthy filesystem volume: no statuses",
			req:  fsRequest,
		},
		{
			name: "healthy raw block volume: the unused staging path is not checked",
			breakIt: func(t *testing.T, r healthRig) {
				// Block volumes are never mounted at the staging path.
				if err := r.fm.Unmount(r.staging); err != nil {
					t.Fatal(err)
				}
			},
			req: func(r healthRig) *csi.NodeGetVolumeHealthRequest {
				return &csi.NodeGetVolumeHealthRequest{VolumeId: "vol-1", VolumePublishPath: r.blockTarget, StagingTargetPath: r.staging}
			},
		},
		{
			name: "no paths and the device is attached: healthy",
			req: func(healthRig) *csi.NodeGetVolumeHealthRequest {
				return &csi.NodeGetVolumeHealthRequest{VolumeId: "vol-1"}
			},
		},
		{
			name: "publish path removed",
			breakIt: func(t *testing.T, r healthRig) {
				if err := r.fm.CleanupMountPoint(r.fsTarget); err != nil {
					t.Fatal(err)
				}
			},
			req:  fsRequest,
			want: []want{{reason: HealthPathNotFound, inMsg: []string{"volume_publish_path", "does not exist"}}},
		},
		{
			name:    "publish path no longer mounted",
			breakIt: unmounting(func(r healthRig) []string { return []string{r.fsTarget} }),
			req:     fsRequest,
			want:    []want{{reason: HealthNotMounted, inMsg: []string{"volume_publish_path", "no longer a mount point"}}},
		},
		{
			name:    "raw block file no longer bound to the device",
			breakIt: unmounting(func(r healthRig) []string { return []string{r.blockTarget} }),
			req: func(r healthRig) *csi.NodeGetVolumeHealthRequest {
				return &csi.NodeGetVolumeHealthRequest{VolumeId: "vol-1", VolumePublishPath: r.blockTarget}
			},
			want: []want{{reason: HealthNotMounted, inMsg: []string{"volume_publish_path"}}},
		},
		{
			name:    "staging and publish paths both unmounted: one entry naming both",
			breakIt: unmounting(func(r healthRig) []string { return []string{r.fsTarget, r.staging} }),
			req:     fsRequest,
			want:    []want{{reason: HealthNotMounted, inMsg: []string{"volume_publish_path", "staging_target_path"}}},
		},
		{
			name:    "staging unmounted while the bind mount still holds the device",
			breakIt: unmounting(func(r healthRig) []string { return []string{r.staging} }),
			req:     fsRequest,
			want:    []want{{reason: HealthNotMounted, inMsg: []string{"staging_target_path"}}},
		},
		{
			name:    "device gone from under the mounts",
			breakIt: func(t *testing.T, r healthRig) { delete(r.fm.Devices, "vol-1") },
			req:     fsRequest,
			want:    []want{{reason: HealthDeviceNotFound, inMsg: []string{"volume_publish_path", "staging_target_path", "no longer on this node"}}},
		},
		{
			name:    "device of a raw block volume gone",
			breakIt: func(t *testing.T, r healthRig) { delete(r.fm.Devices, "vol-1") },
			req: func(r healthRig) *csi.NodeGetVolumeHealthRequest {
				return &csi.NodeGetVolumeHealthRequest{VolumeId: "vol-1", VolumePublishPath: r.blockTarget}
			},
			want: []want{{reason: HealthDeviceNotFound, inMsg: []string{"block device", "volume_publish_path"}}},
		},
		{
			name: "no paths and no device: the volume is not on this node",
			req: func(healthRig) *csi.NodeGetVolumeHealthRequest {
				return &csi.NodeGetVolumeHealthRequest{VolumeId: "vol-9"}
			},
			wantCode: codes.NotFound, inErr: []string{"volume_id", "vol-9"},
		},
		{
			name: "missing volume_id",
			req: func(r healthRig) *csi.NodeGetVolumeHealthRequest {
				return &csi.NodeGetVolumeHealthRequest{VolumePublishPath: r.fsTarget}
			},
			wantCode: codes.InvalidArgument, inErr: []string{"volume_id"},
		},
		{
			name: "relative publish path",
			req: func(healthRig) *csi.NodeGetVolumeHealthRequest {
				return &csi.NodeGetVolumeHealthRequest{VolumeId: "vol-1", VolumePublishPath: "pods/x/mount"}
			},
			wantCode: codes.InvalidArgument, inErr: []string{"volume_publish_path", "absolute"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := newHealthRig(t)
			if tc.breakIt != nil {
				tc.breakIt(t, r)
			}
			resp, err := r.driver.NodeGetVolumeHealth(context.Background(), tc.req(r))
			if tc.wantCode != codes.OK {
				wantCode(t, err, tc.wantCode, tc.inErr...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			h := resp.GetVolumeHealth()
			if h.GetVolumeId() != "vol-1" {
				t.Errorf("volume_id = %q", h.GetVolumeId())
			}
			if len(h.GetHealthStatuses()) != len(tc.want) {
				t.Fatalf("statuses %v, want %d", h.GetHealthStatuses(), len(tc.want))
			}
			for i, w := range tc.want {
				e := h.GetHealthStatuses()[i]
				if e.GetStatus() != csi.VolumeHealthErrorType_INACCESSIBLE || e.GetReason() != w.reason {
					t.Errorf("entry %d = %s/%s, want INACCESSIBLE/%s", i, e.GetStatus(), e.GetReason(), w.reason)
				}
				for _, f := range w.inMsg {
					if !strings.Contains(e.GetMessage(), f) {
						t.Errorf("message %q does not name %q", e.GetMessage(), f)
					}
				}
			}
		})
	}
}

func newHealthRig(t *testing.T) healthRig {
	t.Helper()
	d, _, fm := newTestDriver(t, Options{})
	fm.Devices["vol-1"] = "/dev/loop7"
	root := t.TempDir()
	r := healthRig{driver: d, fm: fm, staging: filepath.Join(root, "staging"), fsTarget: filepath.Join(root, "pod", "mount"),
		blockTarget: filepath.Join(root, "pod", "dev", "vol-1")}
	ctx := context.Background()
	if _, err := d.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: r.staging, VolumeCapability: mountCap("ext4")}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: r.staging,
		TargetPath: r.fsTarget, VolumeCapability: mountCap("ext4")}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: r.blockTarget,
		VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(r.blockTarget); err != nil || fi.IsDir() {
		t.Fatalf("block target %v %v", fi, err)
	}
	return r
}

func TestNodeGetCapabilitiesAdvertisesVolumeHealth(t *testing.T) {
	d, _, _ := newTestDriver(t, Options{})
	resp, err := d.NodeGetCapabilities(context.Background(), &csi.NodeGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []csi.NodeServiceCapability_RPC_Type
	for _, c := range resp.GetCapabilities() {
		got = append(got, c.GetRpc().GetType())
	}
	if !slices.Contains(got, csi.NodeServiceCapability_RPC_GET_VOLUME_HEALTH) || !slices.Contains(got, csi.NodeServiceCapability_RPC_GET_VOLUME_STATS) {
		t.Fatalf("capabilities %v", got)
	}
}

// fsRequest asks after the filesystem volume by its publish and staging paths.
func fsRequest(r healthRig) *csi.NodeGetVolumeHealthRequest {
	return &csi.NodeGetVolumeHealthRequest{VolumeId: "vol-1", VolumePublishPath: r.fsTarget, StagingTargetPath: r.staging}
}

// unmounting breaks the volume by unmounting the paths pick chooses from the rig, in order.
func unmounting(pick func(r healthRig) []string) func(*testing.T, healthRig) {
	return func(t *testing.T, r healthRig) {
		for _, p := range pick(r) {
			if err := r.fm.Unmount(p); err != nil {
				t.Fatal(err)
			}
		}
	}
}
