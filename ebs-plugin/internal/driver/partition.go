package driver

import (
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// VolumeContextPartition is upstream's volume attribute for a statically provisioned PV whose file system is
// on a partition of the EBS volume rather than on the whole disk: NodeStageVolume (and raw block
// NodePublishVolume) use that partition of the device.
const VolumeContextPartition = "partition"

// partitionOf reads the partition number from the volume context: "" for none and, as upstream, for "0".
func partitionOf(vctx map[string]string) (string, error) {
	p, ok := vctx[VolumeContextPartition]
	if !ok || p == "0" {
		return "", nil
	}
	if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 || strconv.FormatUint(n, 10) != p {
		return "", status.Errorf(codes.InvalidArgument, "volume_context.%s %q is not a partition number", VolumeContextPartition, p)
	}
	return p, nil
}

// partitionDevice names partition p of device as the kernel does: a "p" between a disk name that ends in a
// digit and the number (/dev/nvme1n1p2, /dev/loop7p1), none otherwise (/dev/xvdba2). Upstream adds the "p"
// for NVMe devices only, which gives the same names on EC2.
func partitionDevice(device, p string) string {
	if p == "" {
		return device
	}
	if last := device[len(device)-1]; last >= '0' && last <= '9' {
		return device + "p" + p
	}
	return device + p
}
