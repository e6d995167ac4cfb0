package driver

import (
	"context"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stowage-csi/stowage/ebs-plugin/internal/params"
)

// checkMergedModify checks a VolumeAttributesClass against the volume it modifies: the IOPS an io1/io2
// volume ends up with are judged after merging the class with the volume's current type, size and IOPS. The
// volume is read only when the class could make it (or keep it) io1/io2 with other IOPS.
func (d *Driver) checkMergedModify(ctx context.Context, volumeID string, mp *params.Modify) error {
	switch {
	case mp.VolumeType == params.VolumeTypeIO1 || mp.VolumeType == params.VolumeTypeIO2:
	case mp.VolumeType == "" && (mp.IOPS > 0 || mp.IOPSPerGB > 0):
	default:
		return nil
	}
	disk, err := d.cloud.GetDisk(ctx, volumeID)
	if err != nil {
		return cloudError(err, "modify volume %s", volumeID)
	}
	if err := mp.CheckMergedIOPS(params.ModifyCurrent{VolumeType: disk.VolumeType, SizeGiB: disk.CapacityGiB, IOPS: disk.IOPS}); err != nil {
		return status.Errorf(codes.InvalidArgument, "mutable_parameters: volume %s (%s, %d GiB, %d IOPS): %v",
			volumeID, disk.VolumeType, disk.CapacityGiB, disk.IOPS, err)
	}
	return nil
}

// iopsPerGBTags records a class's iopsPerGB and allowAutoIOPSIncreaseOnModify in the volume's tags, where a
// later expansion reads them to scale IOPS with size (as StorageClass values are recorded at create):
// iopsPerGB sets ebs.csi.aws.com/IOPSPerGb, allowAutoIOPSIncreaseOnModify=true sets
// ebs.csi.aws.com/AllowAutoIOPSIncreaseOnModify=true, and =false clears the scaling: it deletes that tag and,
// unless the same class sets a new iopsPerGB, the IOPSPerGb tag too. It adds to tags and returns the keys to
// delete.
func iopsPerGBTags(mp *params.Modify, tags map[string]string) []string {
	if mp.IOPSPerGB > 0 {
		tags[params.TagIOPSPerGB] = strconv.Itoa(int(mp.IOPSPerGB))
	}
	if !mp.AllowIOPSIncreaseOnModifySet {
		return nil
	}
	if mp.AllowIOPSIncreaseOnModify {
		tags[params.TagAllowIOPSIncrease] = "true"
		return nil
	}
	del := []string{params.TagAllowIOPSIncrease}
	if mp.IOPSPerGB == 0 {
		del = append(del, params.TagIOPSPerGB)
	}
	return del
}
