package driver

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

func TestPartitionDevice(t *testing.T) {
	for _, tc := range []struct{ device, partition, want string }{
		{"/dev/nvme1n1", "1", "/dev/nvme1n1p1"},
		{"/dev/xvdba", "2", "/dev/xvdba2"},
		{"/dev/loop7", "1", "/dev/loop7p1"},
		{"/dev/xvdba", "", "/dev/xvdba"},
	} {
		if got := partitionDevice(tc.device, tc.partition); got != tc.want {
			t.Errorf("partition %q of %s: %s, want %s", tc.partition, tc.device, got, tc.want)
		}
	}
}

// TestNodePartitionVolumeAttribute: the partition volume attribute of a static PV makes NodeStageVolume mount,
// and raw block NodePublishVolume bind, that partition of the device; "0" or none means the whole disk, as
// upstream; anything but a partition number is InvalidArgument naming the attribute.
func TestNodePartitionVolumeAttribute(t *testing.T) {
	for _, tc := range []struct {
		name, device, partition string
		block                   bool
		want                    string
		code                    codes.Code
	}{
		{name: "stage nvme partition", device: "/dev/nvme1n1", partition: "1", want: "/dev/nvme1n1p1"},
		{name: "stage xen partition", device: "/dev/xvdba", partition: "3", want: "/dev/xvdba3"},
		{name: "stage partition 0 is the disk", device: "/dev/nvme1n1", partition: "0", want: "/dev/nvme1n1"},
		{name: "stage without partition", device: "/dev/nvme1n1", want: "/dev/nvme1n1"},
		{name: "block publish partition", device: "/dev/nvme1n1", partition: "2", block: true, want: "/dev/nvme1n1p2"},
		{name: "not a number", device: "/dev/nvme1n1", partition: "one", code: codes.InvalidArgument},
		{name: "negative", device: "/dev/nvme1n1", partition: "-1", block: true, code: codes.InvalidArgument},
		{name: "leading zero", device: "/dev/nvme1n1", partition: "01", code: codes.InvalidArgument},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, _, fm := newTestDriver(t, Options{})
			fm.Devices["vol-1"] = tc.device
			vctx := map[string]string{}
			if tc.partition != "" {
				vctx["partition"] = tc.partition
			}
			root := t.TempDir()
			target := filepath.Join(root, "staging")
			var err error
			if tc.block {
				target = filepath.Join(root, "pod", "dev", "vol-1")
				_, err = d.NodePublishVolume(context.Background(), &csi.NodePublishVolumeRequest{VolumeId: "vol-1", TargetPath: target,
					VolumeCapability: blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER), VolumeContext: vctx})
			} else {
				_, err = d.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{VolumeId: "vol-1", StagingTargetPath: target,
					VolumeCapability: mountCap("ext4"), VolumeContext: vctx})
			}
			if tc.code != codes.OK {
				wantCode(t, err, tc.code, "volume_context.partition")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := fm.Mounts[target].Source; got != tc.want {
				t.Fatalf("mounted %s, want %s", got, tc.want)
			}
		})
	}
}
