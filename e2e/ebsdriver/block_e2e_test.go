//go:build e2e

package ebsdriver

import (
	"bytes"
	"os"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// TestE2EEBSRawBlock publishes a raw block volume: staging is a no-op, NodePublishVolume bind-mounts the
// loop device onto a file, data written through that file is on the device, stats report its size, and
// NodeUnpublishVolume removes the file.
func TestE2EEBSRawBlock(t *testing.T) {
	d := localDriver(t, "i-0b10c0000000000b1")
	ctx := testContext(t, 2*time.Minute)
	capability := blockCapability()
	id := d.createVolume(ctx, volumeRequest("raw", 1, capability, nil))
	v := d.mount(ctx, "raw", id, capability, nil)

	pattern := bytes.Repeat([]byte("stowage!"), 512)
	f, err := os.OpenFile(v.target, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(pattern, 1<<20); err != nil {
		t.Fatalf("write through the published file: %v", err)
	}
	_ = f.Sync()
	_ = f.Close()
	dev := d.loopDevice(id)
	raw, err := os.Open(dev)
	if err != nil {
		t.Fatalf("open loop device %q: %v", dev, err)
	}
	got := make([]byte, len(pattern))
	_, err = raw.ReadAt(got, 1<<20)
	_ = raw.Close()
	if err != nil || !bytes.Equal(got, pattern) {
		t.Fatalf("data written through %s is not on %s: %v", v.target, dev, err)
	}
	stats, err := d.node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: id, VolumePath: v.target})
	if err != nil || stats.GetUsage()[0].GetTotal() != 1<<30 {
		t.Fatalf("stats: %v %v", stats, err)
	}

	d.unpublish(ctx, v)
	if _, err := os.Stat(v.target); !os.IsNotExist(err) {
		t.Fatalf("target file left behind: %v", err)
	}
	d.unstage(ctx, v)
	d.detach(ctx, id)
	d.deleteVolume(ctx, id)
}
