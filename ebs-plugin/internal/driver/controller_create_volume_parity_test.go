package driver

import (
	"context"
	"maps"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
)

// TestCreateVolumeBlockAttachUntilInitialized: the StorageClass parameter reaches the volume context under
// upstream's lowercased key, only when true, so ControllerPublishVolume (of either driver) waits for
// initialization; an unparsable value is InvalidArgument naming the parameter.
func TestCreateVolumeBlockAttachUntilInitialized(t *testing.T) {
	tests := []struct {
		name      string
		params    map[string]string
		caps      []*csi.VolumeCapability
		wantCtx   map[string]string
		wantCode  codes.Code
		wantInMsg []string
	}{
		{name: "unset: no context", params: nil, wantCtx: nil},
		{name: "true", params: map[string]string{"blockAttachUntilInitialized": "true"},
			wantCtx: map[string]string{"blockattachuntilinitialized": "true"}},
		{name: "key is case-insensitive", params: map[string]string{"BLOCKATTACHUNTILINITIALIZED": "true"},
			wantCtx: map[string]string{"blockattachuntilinitialized": "true"}},
		// As upstream, only "true" turns it on (with a warning in the log for other values).
		{name: "True is off", params: map[string]string{"blockAttachUntilInitialized": "True"}, wantCtx: nil},
		{name: "false: no context", params: map[string]string{"blockAttachUntilInitialized": "false"}, wantCtx: nil},
		{name: "with format options", params: map[string]string{"blockAttachUntilInitialized": "true", "blockSize": "4096"},
			wantCtx: map[string]string{"blockattachuntilinitialized": "true", "blocksize": "4096"}},
		{name: "block volume", params: map[string]string{"blockAttachUntilInitialized": "true"},
			caps:    []*csi.VolumeCapability{blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
			wantCtx: map[string]string{"blockattachuntilinitialized": "true"}},
		{name: "another value is off", params: map[string]string{"blockAttachUntilInitialized": "yes-please"}, wantCtx: nil},
		{name: "invalid format option", params: map[string]string{"blockAttachUntilInitialized": "true", "blockSize": "4k;x"},
			wantCode: codes.InvalidArgument, wantInMsg: []string{"blockSize", "4k;x"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, fc, _ := newTestDriver(t, Options{})
			caps := tc.caps
			if caps == nil {
				caps = []*csi.VolumeCapability{mountCap("ext4")}
			}
			resp, err := d.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-bau", VolumeCapabilities: caps, Parameters: tc.params})
			if tc.wantCode != codes.OK {
				wantCode(t, err, tc.wantCode, tc.wantInMsg...)
				if n := fc.CallCount("CreateDisk"); n != 0 {
					t.Errorf("CreateVolume reached the cloud %d times", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			v := resp.GetVolume()
			if got := v.GetVolumeContext(); !maps.Equal(got, tc.wantCtx) {
				t.Errorf("volume context = %v, want %v", got, tc.wantCtx)
			}
			// The context as created is what the attacher hands ControllerPublishVolume.
			if _, err := d.ControllerPublishVolume(context.Background(), &csi.ControllerPublishVolumeRequest{
				VolumeId: v.GetVolumeId(), NodeId: testNode, VolumeCapability: caps[0], VolumeContext: v.GetVolumeContext(),
			}); err != nil {
				t.Fatal(err)
			}
			wantWaits := 0
			if tc.wantCtx["blockattachuntilinitialized"] == "true" {
				wantWaits = 1
			}
			if n := fc.CallCount("WaitInitialized"); n != wantWaits {
				t.Errorf("WaitInitialized ran %d times, want %d", n, wantWaits)
			}
		})
	}
}

// TestCreateVolumeFormatOptionsPerFsType: format options are checked against the fsType of every mount
// capability of the request (where the provisioner puts the StorageClass's fstype), not the class parameter.
func TestCreateVolumeFormatOptionsPerFsType(t *testing.T) {
	tests := []struct {
		name      string
		params    map[string]string
		caps      []*csi.VolumeCapability
		wantCtx   map[string]string
		wantInMsg []string // set: InvalidArgument naming these
	}{
		{name: "inodeSize on xfs", params: map[string]string{"inodeSize": "512"}, caps: []*csi.VolumeCapability{mountCap("xfs")},
			wantCtx: map[string]string{"inodesize": "512"}},
		{name: "bytesPerInode on xfs", params: map[string]string{"bytesPerInode": "8192"}, caps: []*csi.VolumeCapability{mountCap("xfs")},
			wantInMsg: []string{"bytesPerInode", `"xfs"`}},
		{name: "numberOfInodes on xfs", params: map[string]string{"numberOfInodes": "100"}, caps: []*csi.VolumeCapability{mountCap("xfs")},
			wantInMsg: []string{"numberOfInodes", `"xfs"`}},
		{name: "ext4BigAlloc on ext3", params: map[string]string{"ext4BigAlloc": "true"}, caps: []*csi.VolumeCapability{mountCap("ext3")},
			wantInMsg: []string{"ext4BigAlloc", `"ext3"`}},
		{name: "ext4ClusterSize on xfs", params: map[string]string{"ext4BigAlloc": "true", "ext4ClusterSize": "16384"}, caps: []*csi.VolumeCapability{mountCap("xfs")},
			wantInMsg: []string{"ext4BigAlloc", `"xfs"`}},
		{name: "bigalloc on ext4", params: map[string]string{"ext4BigAlloc": "true", "ext4ClusterSize": "16384"}, caps: []*csi.VolumeCapability{mountCap("ext4")},
			wantCtx: map[string]string{"ext4bigalloc": "true", "ext4clustersize": "16384"}},
		{name: "capability fsType wins over the class's", params: map[string]string{"csi.storage.k8s.io/fstype": "xfs", "bytesPerInode": "8192"},
			caps: []*csi.VolumeCapability{mountCap("ext4")}, wantCtx: map[string]string{"bytesperinode": "8192"}},
		{name: "class ext4, capability xfs", params: map[string]string{"csi.storage.k8s.io/fstype": "ext4", "bytesPerInode": "8192"},
			caps: []*csi.VolumeCapability{mountCap("xfs")}, wantInMsg: []string{"bytesPerInode", `"xfs"`}},
		{name: "every capability checked", params: map[string]string{"numberOfInodes": "100"},
			caps: []*csi.VolumeCapability{mountCap("ext4"), mountCap("xfs")}, wantInMsg: []string{"numberOfInodes", `"xfs"`}},
		{name: "blockSize on block", params: map[string]string{"blockSize": "4096"},
			caps: []*csi.VolumeCapability{blockCap(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}, wantInMsg: []string{"blockSize", "block"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, fc, _ := newTestDriver(t, Options{})
			resp, err := d.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-fmt", VolumeCapabilities: tc.caps, Parameters: tc.params})
			if tc.wantInMsg != nil {
				wantCode(t, err, codes.InvalidArgument, tc.wantInMsg...)
				if n := fc.CallCount("CreateDisk"); n != 0 {
					t.Errorf("CreateDisk ran %d times", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetVolume().GetVolumeContext(); !maps.Equal(got, tc.wantCtx) {
				t.Errorf("volume context = %v, want %v", got, tc.wantCtx)
			}
		})
	}
}

// TestCreateVolumePartitionIsNotAClassParameter: upstream reads the "partition" volume attribute only in
// NodeStageVolume (statically provisioned PVs); it is no StorageClass parameter, so CreateVolume refuses it
// like any unknown key and never puts one in the volume context.
func TestCreateVolumePartitionIsNotAClassParameter(t *testing.T) {
	for _, key := range []string{"partition", "Partition"} {
		t.Run(key, func(t *testing.T) {
			d, fc, _ := newTestDriver(t, Options{})
			_, err := d.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "pvc-part",
				VolumeCapabilities: []*csi.VolumeCapability{mountCap("ext4")}, Parameters: map[string]string{key: "1"}})
			wantCode(t, err, codes.InvalidArgument, key, "unknown parameter")
			if n := fc.CallCount("CreateDisk"); n != 0 {
				t.Errorf("CreateDisk ran %d times", n)
			}
		})
	}
}
