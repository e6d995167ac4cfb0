package driver

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/metadata"
)

func TestNodeStageVolume(t *testing.T) {
	tests := []struct {
		name     string
		req      func(dir string) *csi.NodeStageVolumeRequest
		wantCode codes.Code
		inMsg    []string
		check    func(t *testing.T, calls int, opts, format []string)
	}{
		{
			name: "xfs gets nouuid and the class's format options",
			req: func(dir string) *csi.NodeStageVolumeRequest {
				return &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: dir, VolumeCapability: mountCap("xfs", "noatime"),
					VolumeContext: map[string]string{"blocksize": "4096"}}
			},
			check: func(t *testing.T, calls int, opts, format []string) {
				if calls != 1 || !slices.Equal(opts, []string{"noatime", "nouuid"}) || !slices.Equal(format, []string{"-b", "4096"}) {
					t.Errorf("calls %d opts %v format %v", calls, opts, format)
				}
			},
		},
		{
			name: "block volumes are not staged",
			req: func(dir string) *csi.NodeStageVolumeRequest {
				return &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: dir, VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}
			},
			check: func(t *testing.T, calls int, _, _ []string) {
				if calls != 0 {
					t.Errorf("block volume mounted")
				}
			},
		},
		{name: "no volume id", req: func(dir string) *csi.NodeStageVolumeRequest {
			return &csi.NodeStageVolumeRequest{StagingTargetPath: dir, VolumeCapability: mountCap("")}
		}, wantCode: codes.InvalidArgument, inMsg: []string{"volume_id"}},
		{name: "no staging path", req: func(string) *csi.NodeStageVolumeRequest {
			return &csi.NodeStageVolumeRequest{VolumeId: "vol-1", VolumeCapability: mountCap("")}
		}, wantCode: codes.InvalidArgument, inMsg: []string{"staging_target_path"}},
		{name: "no capability", req: func(dir string) *csi.NodeStageVolumeRequest {
			return &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: dir}
		}, wantCode: codes.InvalidArgument, inMsg: []string{"volume_capability"}},
		{name: "bad mount flag", req: func(dir string) *csi.NodeStageVolumeRequest {
			return &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: dir, VolumeCapability: mountCap("ext4", "bind")}
		}, wantCode: codes.InvalidArgument, inMsg: []string{"mount_flags", "bind"}},
		{name: "hostile format option in the volume context", req: func(dir string) *csi.NodeStageVolumeRequest {
			return &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: dir, VolumeCapability: mountCap("ext4"),
				VolumeContext: map[string]string{"blocksize": "4096 -O x"}}
		}, wantCode: codes.InvalidArgument, inMsg: []string{"blocksize"}},
		{name: "device not attached", req: func(dir string) *csi.NodeStageVolumeRequest {
			return &csi.NodeStageVolumeRequest{VolumeId: "vol-2", StagingTargetPath: dir, VolumeCapability: mountCap("")}
		}, wantCode: codes.NotFound, inMsg: []string{"vol-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _, fm := newTestDriver(t, Options{})
			fm.Devices["vol-1"] = "/dev/loop7"
			dir := filepath.Join(t.TempDir(), "staging")
			_, err := d.NodeStageVolume(context.Background(), tc.req(dir))
			if tc.wantCode != codes.OK {
				wantCode(t, err, tc.wantCode, tc.inMsg...)
				if len(fm.Calls) != 0 {
					t.Error("rejected request mounted something")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var opts, format []string
			if len(fm.Calls) > 0 {
				opts, format = fm.Calls[0].Options, fm.Calls[0].FormatArgs
			}
			tc.check(t, len(fm.Calls), opts, format)
		})
	}
}

func TestNodeStageIsIdempotentAndUnstageUnmounts(t *testing.T) {
	d, _, fm := newTestDriver(t, Options{})
	fm.Devices["vol-1"] = "/dev/loop7"
	dir := filepath.Join(t.TempDir(), "staging")
	req := &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: dir, VolumeCapability: mountCap("ext4")}
	for range 2 {
		if _, err := d.NodeStageVolume(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if len(fm.Calls) != 1 || len(fm.Resized) != 1 {
		t.Fatalf("mounts %d resizes %d", len(fm.Calls), len(fm.Resized))
	}
	fm.Devices["vol-1"] = "/dev/loop8"
	_, err := d.NodeStageVolume(context.Background(), req)
	wantCode(t, err, codes.AlreadyExists, "/dev/loop7")
	for range 2 {
		if _, err := d.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: dir}); err != nil {
			t.Fatal(err)
		}
	}
	if len(fm.Mounts) != 0 {
		t.Fatal("still mounted")
	}
	_, err = d.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: "vol-1"})
	wantCode(t, err, codes.InvalidArgument, "staging_target_path")
}

func TestNodePublishAndUnpublish(t *testing.T) {
	d, _, fm := newTestDriver(t, Options{})
	fm.Devices["vol-1"] = "/dev/loop7"
	root := t.TempDir()
	staging := filepath.Join(root, "staging")
	if _, err := d.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, VolumeCapability: mountCap("ext4")}); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(root, "pod", "mount")
	if _, err := d.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging,
		TargetPath: target, VolumeCapability: mountCap("ext4", "noatime"), Readonly: true}); err != nil {
		t.Fatal(err)
	}
	if m := fm.Mounts[target]; m.Source != staging || !slices.Equal(m.Options, []string{"bind", "ro", "noatime"}) {
		t.Fatalf("publish mount %+v", m)
	}
	blockTarget := filepath.Join(root, "pod", "dev", "vol-1")
	if _, err := d.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: blockTarget,
		VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(blockTarget); err != nil || fi.IsDir() || fm.Mounts[blockTarget].Source != "/dev/loop7" {
		t.Fatalf("block target %v %v %+v", fi, err, fm.Mounts[blockTarget])
	}
	_, err := d.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: target, VolumeCapability: mountCap("ext4")})
	wantCode(t, err, codes.InvalidArgument, "staging_target_path")
	_, err = d.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: "vol-1", StagingTargetPath: filepath.Join(root, "nope"),
		TargetPath: target + "2", VolumeCapability: mountCap("ext4")})
	wantCode(t, err, codes.FailedPrecondition, "not staged")
	for _, tgt := range []string{target, blockTarget, target} {
		if _, err := d.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "vol-1", TargetPath: tgt}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(tgt); !os.IsNotExist(err) {
			t.Fatalf("%s not removed: %v", tgt, err)
		}
	}
}

func TestNodeExpandAndStats(t *testing.T) {
	d, _, fm := newTestDriver(t, Options{})
	fm.Devices["vol-1"] = "/dev/loop7"
	fm.Sizes["/dev/loop7"] = 3 * gib
	staging := filepath.Join(t.TempDir(), "staging")
	if _, err := d.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: staging, VolumeCapability: mountCap("ext4")}); err != nil {
		t.Fatal(err)
	}
	resp, err := d.NodeExpandVolume(context.Background(), &csi.NodeExpandVolumeRequest{VolumeId: "vol-1", VolumePath: staging})
	if err != nil || resp.GetCapacityBytes() != 3*gib || len(fm.Resized) != 2 {
		t.Fatalf("expand %v %v resized %v", resp, err, fm.Resized)
	}
	_, err = d.NodeExpandVolume(context.Background(), &csi.NodeExpandVolumeRequest{VolumeId: "vol-1", VolumePath: "/nonexistent/x"})
	wantCode(t, err, codes.NotFound, "/nonexistent/x")

	stats, err := d.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: staging})
	if err != nil || len(stats.GetUsage()) != 2 || stats.GetUsage()[0].GetTotal() <= 0 || stats.GetUsage()[1].GetUnit() != csi.VolumeUsage_INODES {
		t.Fatalf("stats %v %v", stats, err)
	}
	_, err = d.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: "/nonexistent/x"})
	wantCode(t, err, codes.NotFound, "/nonexistent/x")
	notMounted := t.TempDir()
	_, err = d.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumeId: "vol-1", VolumePath: notMounted})
	wantCode(t, err, codes.FailedPrecondition, "not a mount point")
	_, err = d.NodeGetVolumeStats(context.Background(), &csi.NodeGetVolumeStatsRequest{VolumePath: staging})
	wantCode(t, err, codes.InvalidArgument, "volume_id")
}

func TestNodeInFlightGuard(t *testing.T) {
	d, _, fm := newTestDriver(t, Options{})
	fm.Devices["vol-1"] = "/dev/loop7"
	release, _ := d.inFlight.Insert("node/vol-1")
	defer release()
	_, err := d.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: t.TempDir(), VolumeCapability: mountCap("")})
	wantCode(t, err, codes.Aborted, "vol-1")
}

// TestNodeGetInfoVolumeLimit checks that NodeGetInfo reports the table's limit for the instance's type, with
// the flags applied; limits.TestMaxVolumes covers the arithmetic row by row.
func TestNodeGetInfoVolumeLimit(t *testing.T) {
	tests := []struct {
		name     string
		inst     metadata.Instance
		flag     int64
		reserved int
		want     int64
	}{
		{name: "g5.48xlarge: 9 shared, not the flat 27", inst: metadata.Instance{InstanceType: "g5.48xlarge", ENIs: 2}, flag: -1, reserved: -1, want: 7},
		{name: "m7i.large: 32 dedicated, ENIs do not count", inst: metadata.Instance{InstanceType: "m7i.large", EBSMappings: 1, ENIs: 4}, flag: -1, reserved: -1, want: 30},
		{name: "m5.large: unlisted, 27 shared", inst: metadata.Instance{InstanceType: "m5.large", EBSMappings: 2, ENIs: 3}, flag: -1, reserved: -1, want: 22},
		{name: "multi-card type counts one card, as attaches land there", inst: metadata.Instance{InstanceType: "r8gn.48xlarge", ENIs: 1}, flag: -1, reserved: -1, want: 127},
		{name: "xen: dedicated 39", inst: metadata.Instance{InstanceType: "m4.xlarge", ENIs: 5}, flag: -1, reserved: -1, want: 38},
		{name: "reserved flag replaces the mapping count", inst: metadata.Instance{InstanceType: "m5.large", EBSMappings: 9, ENIs: 1}, flag: -1, reserved: 4, want: 23},
		{name: "attach limit flag wins", inst: metadata.Instance{InstanceType: "g5.48xlarge", EBSMappings: 5, ENIs: 4}, flag: 11, reserved: -1, want: 11},
		{name: "attach limit 0 is reported as upstream does", inst: metadata.Instance{InstanceType: "m7i.large", ENIs: 1}, flag: 0, reserved: -1, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, _, _ := newTestDriver(t, Options{})
			// Set after construction: the helper reads a zero VolumeAttachLimit as "unset".
			d.opts.VolumeAttachLimit, d.opts.ReservedVolumeAttachments = tc.flag, tc.reserved
			tc.inst.InstanceID, tc.inst.AvailabilityZone = testNode, "us-east-1b"
			d.metadata = fakeMeta{inst: &tc.inst}
			resp, err := d.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetMaxVolumesPerNode(); got != tc.want {
				t.Fatalf("max_volumes_per_node = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestNodeGetInfo(t *testing.T) {
	d, _, _ := newTestDriver(t, Options{})
	resp, err := d.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	seg := resp.GetAccessibleTopology().GetSegments()
	if resp.GetNodeId() != testNode || resp.GetMaxVolumesPerNode() != 26 || seg[ZoneTopologyKey] != "us-east-1b" || seg[WellKnownZoneTopologyKey] != "us-east-1b" {
		t.Fatalf("%v", resp)
	}
	// The metadata source going away later keeps the last answer.
	d.metadata = fakeMeta{err: os.ErrDeadlineExceeded}
	if again, err := d.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{}); err != nil || again.GetNodeId() != testNode {
		t.Fatalf("%v %v", again, err)
	}
	fresh, _, _ := newTestDriver(t, Options{})
	fresh.metadata = fakeMeta{err: os.ErrDeadlineExceeded}
	_, err = fresh.NodeGetInfo(context.Background(), &csi.NodeGetInfoRequest{})
	wantCode(t, err, codes.Unavailable)
}
