//go:build e2e

package ebsdriver

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
)

// TestE2EEBSXFSSnapshotRestore walks an XFS volume through what csi-sanity does not: format options and
// --legacy-xfs reaching mkfs.xfs, online expansion (ControllerExpand + NodeExpand with xfs_growfs), and a
// volume restored from a snapshot mounted on the same node as its source while the source is still mounted,
// which only works because the driver mounts XFS with nouuid.
func TestE2EEBSXFSSnapshotRestore(t *testing.T) {
	d := localDriver(t, "i-0f5f5f5f5f5f5f5f5", "--legacy-xfs", "--modify-volume-request-handler-timeout=200ms")
	ctx := testContext(t, 5*time.Minute)
	capability := mountCapability("xfs")
	formatOptions := map[string]string{"blocksize": "4096", "inodesize": "512"}

	srcID := d.createVolume(ctx, volumeRequest("xfs-src", 1, capability,
		map[string]string{"csi.storage.k8s.io/fstype": "xfs", "blockSize": "4096", "inodeSize": "512"}))
	src := d.mount(ctx, "src", srcID, capability, formatOptions)
	if err := os.WriteFile(filepath.Join(src.target, "hello"), []byte("stowage"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := exec.Command("xfs_info", src.staging).CombinedOutput()
	if err != nil || !strings.Contains(string(info), "isize=512") || !strings.Contains(string(info), "bigtime=0") {
		t.Fatalf("xfs_info does not show inodeSize 512 and --legacy-xfs (bigtime=0): %v\n%s", err, info)
	}

	expandOnline(ctx, t, d, src, capability, 2<<30)

	unix.Sync()
	snapID := d.snapshotReady(ctx, "xfs-snap", srcID)
	restore := volumeRequest("xfs-restored", 2, capability, map[string]string{"csi.storage.k8s.io/fstype": "xfs"})
	restore.VolumeContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snapID}}}
	dstID := d.createVolume(ctx, restore)
	dst := d.mount(ctx, "restored", dstID, capability, nil) // same XFS UUID as the mounted source
	if b, err := os.ReadFile(filepath.Join(dst.target, "hello")); err != nil || string(b) != "stowage" {
		t.Fatalf("restored data: %q %v", b, err)
	}

	d.unmount(ctx, dst)
	d.deleteVolume(ctx, dstID)
	d.unmount(ctx, src)
	d.deleteVolume(ctx, srcID)
	if _, err := d.ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snapID}); err != nil {
		t.Fatalf("delete snapshot: %v", err)
	}
}

// expandOnline grows the mounted volume to size with ControllerExpandVolume and NodeExpandVolume and checks
// that its file system grew.
func expandOnline(ctx context.Context, t *testing.T, d *driver, v *nodeVolume, capability *csi.VolumeCapability, size int64) {
	t.Helper()
	if _, err := d.ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: v.id,
		CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: capability}); err != nil {
		t.Fatalf("controller expand: %v", err)
	}
	grown, err := d.node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: v.id, VolumePath: v.target,
		CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: capability})
	if err != nil || grown.GetCapacityBytes() < size {
		t.Fatalf("node expand: %v %v", grown, err)
	}
	stats, err := d.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: v.id, VolumePath: v.target})
	if err != nil || stats.GetUsage()[0].GetTotal() < size*3/4 {
		t.Fatalf("filesystem did not grow: %v %v", stats, err)
	}
}
