package driver

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// TestNodeChecksDeviceSerial: a device whose serial names another volume (a Xen device name reused after a
// detach) is refused with FailedPrecondition before anything is mounted, at NodeStageVolume for file systems
// and at NodePublishVolume for raw block; a device naming the volume or having no serial (loop) is used.
func TestNodeChecksDeviceSerial(t *testing.T) {
	for _, tc := range []struct {
		name   string
		serial string // volume the device's serial names; "" = none
		block  bool
		ok     bool
	}{
		{name: "stage, own serial", serial: "vol-1", ok: true},
		{name: "stage, no serial", ok: true},
		{name: "stage, another volume's device", serial: "vol-2"},
		{name: "block publish, own serial", serial: "vol-1", block: true, ok: true},
		{name: "block publish, no serial", block: true, ok: true},
		{name: "block publish, another volume's device", serial: "vol-2", block: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _, fm := newTestDriver(t, Options{})
			fm.Devices["vol-1"] = "/dev/xvdba"
			if tc.serial != "" {
				fm.Serials["/dev/xvdba"] = tc.serial
			}
			root := t.TempDir()
			var err error
			target := filepath.Join(root, "staging")
			if tc.block {
				target = filepath.Join(root, "pod", "dev", "vol-1")
				_, err = d.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: target,
					VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)})
			} else {
				_, err = d.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: target,
					VolumeCapability: mountCap("ext4")})
			}
			_, mounted := fm.Mounts[target]
			if tc.ok {
				if err != nil || !mounted {
					t.Fatalf("err %v, mounted %v", err, mounted)
				}
				return
			}
			wantCode(t, err, codes.FailedPrecondition, "vol-1", "vol-2")
			if mounted {
				t.Fatal("mounted another volume's device")
			}
			if tc.block {
				if _, err := os.Stat(target); !os.IsNotExist(err) {
					t.Fatalf("target file created for a refused device: %v", err)
				}
			}
		})
	}
}
