package cloud

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// copyVolume issues CopyVolumes for a clone of opts.SourceVolumeID and returns the new volume's ID. The copy
// keeps the source's zone and encryption, so those options do not apply.
func (c *Cloud) copyVolume(ctx context.Context, req createRequest, opts DiskOptions) (string, error) {
	in := &ec2.CopyVolumesInput{
		SourceVolumeId:     aws.String(opts.SourceVolumeID),
		ClientToken:        aws.String(req.token),
		Size:               aws.Int32(req.sizeGiB),
		VolumeType:         types.VolumeType(opts.VolumeType),
		MultiAttachEnabled: aws.Bool(opts.MultiAttach),
		TagSpecifications:  req.tagSpec,
	}
	if req.iops > 0 {
		in.Iops = aws.Int32(req.iops)
	}
	if opts.Throughput > 0 {
		in.Throughput = aws.Int32(opts.Throughput)
	}
	out, err := c.ec2.CopyVolumes(ctx, in, c.retryers.option("CopyVolumes"))
	if err != nil {
		return "", c.createError(req.name, err)
	}
	if len(out.Volumes) == 0 {
		return "", fmt.Errorf("CopyVolumes of %s returned no volume", opts.SourceVolumeID)
	}
	return aws.ToString(out.Volumes[0].VolumeId), nil
}
