package cloud

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// maxInstanceIDsPerCall is how many instance IDs one DescribeInstances carries for the node labeler, as
// upstream's labeler sends (EC2 takes up to 1000 filter values; IDs given need no paging).
const maxInstanceIDsPerCall = 1000

// InstanceDevices is what shares an instance's EBS attachment slots: its network interfaces and the EBS
// volumes in its block device mappings (root and launch volumes included).
type InstanceDevices struct {
	ENIs      int
	VolumeIDs []string
}

// InstanceDevices describes the instances, up to 1000 per DescribeInstances; instances EC2 no longer knows are
// left out of the result.
func (c *Cloud) InstanceDevices(ctx context.Context, ids []string) (map[string]InstanceDevices, error) {
	out := make(map[string]InstanceDevices, len(ids))
	for start := 0; start < len(ids); start += maxInstanceIDsPerCall {
		chunk := ids[start:min(start+maxInstanceIDsPerCall, len(ids))]
		found, err := c.describeInstancesByID(ctx, chunk)
		if err != nil {
			return nil, fmt.Errorf("describe %d instances: %w", len(chunk), err)
		}
		for id, inst := range found {
			d := InstanceDevices{ENIs: len(inst.NetworkInterfaces)}
			for _, m := range inst.BlockDeviceMappings {
				if m.Ebs != nil && aws.ToString(m.Ebs.VolumeId) != "" {
					d.VolumeIDs = append(d.VolumeIDs, aws.ToString(m.Ebs.VolumeId))
				}
			}
			out[id] = d
		}
	}
	return out, nil
}
