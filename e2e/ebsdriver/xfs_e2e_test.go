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
	const instanceID = "i-0f5f5f5f5f5f5f5f5"
	_, p := startLocalPlugin(t, instanceID, "--legacy-xfs", "--modify-volume-request-handler-timeout=200ms")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ctl, node := csi.NewControllerClient(p.conn), csi.NewNodeClient(p.conn)
	work := t.TempDir()
	capability := &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "xfs"}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER},
	}

	// attach, stage and publish a volume; cleanups undo it even if the test fails half-way.
	mountVolume := func(name, id string) (string, string) {
		t.Helper()
		pub, err := ctl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: instanceID, VolumeCapability: capability})
		if err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		t.Cleanup(func() {
			_, _ = ctl.ControllerUnpublishVolume(context.Background(), &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: instanceID})
		})
		staging, target := filepath.Join(work, name, "staging"), filepath.Join(work, name, "target")
		t.Cleanup(func() {
			for _, m := range []string{target, staging} {
				_ = unix.Unmount(m, unix.MNT_DETACH)
			}
		})
		if _, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: capability,
			PublishContext: pub.GetPublishContext(), VolumeContext: map[string]string{"blocksize": "4096", "inodesize": "512"}}); err != nil {
			t.Fatalf("stage %s: %v", id, err)
		}
		if _, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target,
			VolumeCapability: capability, PublishContext: pub.GetPublishContext()}); err != nil {
			t.Fatalf("node publish %s: %v", id, err)
		}
		return staging, target
	}
	unmountVolume := func(id, staging, target string) {
		t.Helper()
		if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
			t.Fatalf("node unpublish %s: %v", id, err)
		}
		if _, err := node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
			t.Fatalf("unstage %s: %v", id, err)
		}
		if _, err := ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: instanceID}); err != nil {
			t.Fatalf("controller unpublish %s: %v", id, err)
		}
		if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatalf("delete %s: %v", id, err)
		}
	}

	vol, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "xfs-src", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{capability},
		Parameters:         map[string]string{"csi.storage.k8s.io/fstype": "xfs", "blockSize": "4096", "inodeSize": "512"}})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	srcID := vol.GetVolume().GetVolumeId()
	t.Cleanup(func() { _, _ = ctl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: srcID}) })
	srcStaging, srcTarget := mountVolume("src", srcID)
	if err := os.WriteFile(filepath.Join(srcTarget, "hello"), []byte("stowage"), 0o644); err != nil {
		t.Fatal(err)
	}
	info, err := exec.Command("xfs_info", srcStaging).CombinedOutput()
	if err != nil || !strings.Contains(string(info), "isize=512") || !strings.Contains(string(info), "bigtime=0") {
		t.Fatalf("xfs_info does not show inodeSize 512 and --legacy-xfs (bigtime=0): %v\n%s", err, info)
	}

	if _, err := ctl.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: srcID,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}, VolumeCapability: capability}); err != nil {
		t.Fatalf("controller expand: %v", err)
	}
	grown, err := node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{VolumeId: srcID, VolumePath: srcTarget,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}, VolumeCapability: capability})
	if err != nil || grown.GetCapacityBytes() < 2<<30 {
		t.Fatalf("node expand: %v %v", grown, err)
	}
	stats, err := node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: srcID, VolumePath: srcTarget})
	if err != nil || stats.GetUsage()[0].GetTotal() < 3<<29 {
		t.Fatalf("filesystem did not grow: %v %v", stats, err)
	}

	unix.Sync()
	snap, err := ctl.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "xfs-snap", SourceVolumeId: srcID})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	snapID := snap.GetSnapshot().GetSnapshotId()
	t.Cleanup(func() {
		_, _ = ctl.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: snapID})
	})
	for !snap.GetSnapshot().GetReadyToUse() {
		time.Sleep(200 * time.Millisecond)
		list, err := ctl.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SnapshotId: snapID})
		if err != nil || len(list.GetEntries()) != 1 {
			t.Fatalf("list snapshot: %v %v", list, err)
		}
		snap = &csi.CreateSnapshotResponse{Snapshot: list.GetEntries()[0].GetSnapshot()}
	}
	restored, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "xfs-restored", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30},
		VolumeCapabilities:  []*csi.VolumeCapability{capability},
		Parameters:          map[string]string{"csi.storage.k8s.io/fstype": "xfs"},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snapID}}}})
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	dstID := restored.GetVolume().GetVolumeId()
	t.Cleanup(func() { _, _ = ctl.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: dstID}) })
	dstStaging, dstTarget := mountVolume("restored", dstID) // same XFS UUID as the mounted source
	if b, err := os.ReadFile(filepath.Join(dstTarget, "hello")); err != nil || string(b) != "stowage" {
		t.Fatalf("restored data: %q %v", b, err)
	}

	unmountVolume(dstID, dstStaging, dstTarget)
	unmountVolume(srcID, srcStaging, srcTarget)
	if _, err := ctl.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snapID}); err != nil {
		t.Fatalf("delete snapshot: %v", err)
	}
}
