//go:build e2e

package ebsdriver

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
)

// TestE2EEBSRawBlock publishes a raw block volume: staging is a no-op, NodePublishVolume bind-mounts the
// loop device onto a file, data written through that file is on the device, stats report its size, and
// NodeUnpublishVolume removes the file.
func TestE2EEBSRawBlock(t *testing.T) {
	const instanceID = "i-0b10c0000000000b1"
	sim, p := startLocalPlugin(t, instanceID)
	ctl, node := csi.NewControllerClient(p.conn), csi.NewNodeClient(p.conn)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	capability := &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}}

	vol, err := ctl.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "raw", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
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
	staging, target := filepath.Join(work, "staging"), filepath.Join(work, "pod", "dev", id)
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
	if _, err := node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: id, StagingTargetPath: staging, VolumeCapability: capability,
		PublishContext: pub.GetPublishContext()}); err != nil {
		t.Fatalf("stage: %v", err)
	}
	if _, err := node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{VolumeId: id, StagingTargetPath: staging, TargetPath: target,
		VolumeCapability: capability, PublishContext: pub.GetPublishContext()}); err != nil {
		t.Fatalf("publish: %v", err)
	}
	pattern := bytes.Repeat([]byte("stowage!"), 512)
	f, err := os.OpenFile(target, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(pattern, 1<<20); err != nil {
		t.Fatalf("write through the published file: %v", err)
	}
	_ = f.Sync()
	_ = f.Close()
	var dev string
	for _, a := range sim.State().Attachments {
		if a.VolumeID == id {
			dev = a.LoopDevice
		}
	}
	raw, err := os.Open(dev)
	if err != nil {
		t.Fatalf("open loop device %q: %v", dev, err)
	}
	got := make([]byte, len(pattern))
	_, err = raw.ReadAt(got, 1<<20)
	_ = raw.Close()
	if err != nil || !bytes.Equal(got, pattern) {
		t.Fatalf("data written through %s is not on %s: %v", target, dev, err)
	}
	stats, err := node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: target})
	if err != nil || stats.GetUsage()[0].GetTotal() != 1<<30 {
		t.Fatalf("stats: %v %v", stats, err)
	}
	if _, err := node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: target}); err != nil {
		t.Fatalf("unpublish: %v", err)
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Fatalf("target file left behind: %v", err)
	}
	if _, err := node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: staging}); err != nil {
		t.Fatalf("unstage: %v", err)
	}
	if _, err := ctl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: instanceID}); err != nil {
		t.Fatal(err)
	}
	if _, err := ctl.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
}
