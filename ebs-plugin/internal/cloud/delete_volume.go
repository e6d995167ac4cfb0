package cloud

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// DeleteDisk deletes the volume. A volume that does not exist counts as deleted.
func (c *Cloud) DeleteDisk(ctx context.Context, volumeID string) error {
	_, err := c.ec2.DeleteVolume(ctx, &ec2.DeleteVolumeInput{VolumeId: aws.String(volumeID)}, c.retryers.option("DeleteVolume"))
	switch {
	case err == nil, isNotFound(err):
		return nil
	case isCode(err, "VolumeInUse"):
		return fmt.Errorf("volume %s is still attached: %w: %w", volumeID, ErrVolumeInUse, err)
	}
	return fmt.Errorf("delete volume %s: %w", volumeID, err)
}
