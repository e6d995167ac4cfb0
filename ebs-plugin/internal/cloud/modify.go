package cloud

import (
	"context"
	"fmt"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/klog/v2"
)

// ModifyOptions is one merged expand/modify request. Zero fields are left as they are.
type ModifyOptions struct {
	SizeBytes  int64
	VolumeType string
	IOPS       int32
	IOPSPerGB  int32
	Throughput int32
	TagsAdd    map[string]string
	TagsDelete []string
}

const (
	tagIOPSPerGB         = "ebs.csi.aws.com/IOPSPerGb"
	tagAllowIOPSIncrease = "ebs.csi.aws.com/AllowAutoIOPSIncreaseOnModify"
)

// ModifyDisk applies tags, then at most one ModifyVolume, and waits until EC2 has applied the new attributes.
// It returns the volume's size in GiB afterwards.
func (c *Cloud) ModifyDisk(ctx context.Context, volumeID string, opts ModifyOptions) (int32, error) {
	logger := klog.FromContext(ctx).WithValues("volumeID", volumeID)
	if err := c.modifyTags(ctx, volumeID, opts); err != nil {
		return 0, err
	}
	disk, err := c.GetDisk(ctx, volumeID)
	if err != nil {
		return 0, err
	}
	target := c.modifyTarget(disk, opts)
	if !target.changes(disk) {
		return disk.CapacityGiB, nil
	}
	if disk, err = c.afterPriorModification(ctx, disk); err != nil {
		return 0, err
	}
	if !target.changes(disk) {
		return disk.CapacityGiB, nil
	}
	out, err := c.ec2.ModifyVolume(ctx, target.input(disk), c.retryers.option("ModifyVolume"))
	if err != nil {
		// The SDK re-sends a ModifyVolume whose answer was lost (a 500, a closed connection), and EC2 then
		// refuses the repeat: the modification is in progress, or the volume already has the configuration.
		// If the volume shows what was asked, that modification is ours.
		if isCode(err, "IncorrectModificationState", "InvalidParameterCombination") {
			if d, gerr := c.GetDisk(ctx, volumeID); gerr == nil && !target.changes(d) {
				logger.Info("ModifyVolume refused, but the volume already has the requested configuration", "err", err)
				if err := c.waitModified(ctx, volumeID); err != nil {
					return 0, err
				}
				return d.CapacityGiB, nil
			}
		}
		return 0, c.modifyError(volumeID, err)
	}
	logger.V(4).Info("ModifyVolume accepted", "size", target.size, "type", target.volumeType, "iops", target.iops, "throughput", target.throughput)
	state := types.VolumeModificationStateModifying
	if out.VolumeModification != nil {
		state = out.VolumeModification.ModificationState
	}
	if state != types.VolumeModificationStateCompleted && state != types.VolumeModificationStateOptimizing {
		if err := c.waitModified(ctx, volumeID); err != nil {
			return 0, err
		}
	}
	disk, err = c.GetDisk(ctx, volumeID)
	if err != nil {
		return 0, err
	}
	if target.changes(disk) {
		return 0, fmt.Errorf("volume %s does not show the requested attributes after modification (size %d, type %s, iops %d, throughput %d)",
			volumeID, disk.CapacityGiB, disk.VolumeType, disk.IOPS, disk.Throughput)
	}
	return disk.CapacityGiB, nil
}

// modifyTags adds and deletes the volume's tags a VolumeAttributesClass asks for.
func (c *Cloud) modifyTags(ctx context.Context, volumeID string, opts ModifyOptions) error {
	if len(opts.TagsAdd) > 0 {
		if _, err := c.ec2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{volumeID}, Tags: toTags(opts.TagsAdd)},
			c.retryers.option("CreateTags")); err != nil {
			return c.modifyError(volumeID, err)
		}
	}
	if len(opts.TagsDelete) > 0 {
		tags := make([]types.Tag, 0, len(opts.TagsDelete))
		for _, k := range opts.TagsDelete {
			tags = append(tags, types.Tag{Key: aws.String(k)})
		}
		if _, err := c.ec2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{volumeID}, Tags: tags},
			c.retryers.option("DeleteTags")); err != nil {
			return c.modifyError(volumeID, err)
		}
	}
	return nil
}

// afterPriorModification waits for a modification of disk still in progress and returns the volume as it is
// then: EC2 takes no other meanwhile. One that is optimizing cannot be followed for hours, so it is
// ErrModificationPending.
func (c *Cloud) afterPriorModification(ctx context.Context, disk *Disk) (*Disk, error) {
	volumeID := disk.VolumeID
	mods, err := c.describeModificationsByID(ctx, []string{volumeID})
	if err != nil {
		return nil, fmt.Errorf("describe modifications of %s: %w", volumeID, err)
	}
	m, ok := mods[volumeID]
	if !ok {
		return disk, nil
	}
	switch m.ModificationState {
	case types.VolumeModificationStateModifying:
		if err := c.waitModified(ctx, volumeID); err != nil {
			return nil, err
		}
		return c.GetDisk(ctx, volumeID)
	case types.VolumeModificationStateOptimizing:
		return nil, fmt.Errorf("volume %s is still optimizing after its last modification; EC2 refuses another: %w", volumeID, ErrModificationPending)
	}
	return disk, nil
}

type modifyTarget struct {
	size       int32
	volumeType string
	iops       int32
	throughput int32
}

// input is the ModifyVolume request that takes d to t: only what differs.
func (t modifyTarget) input(d *Disk) *ec2.ModifyVolumeInput {
	in := &ec2.ModifyVolumeInput{VolumeId: aws.String(d.VolumeID)}
	if t.size > d.CapacityGiB {
		in.Size = aws.Int32(t.size)
	}
	if t.volumeType != "" && t.volumeType != d.VolumeType {
		in.VolumeType = types.VolumeType(t.volumeType)
	}
	if t.iops > 0 && t.iops != d.IOPS {
		in.Iops = aws.Int32(t.iops)
	}
	if t.throughput > 0 && t.throughput != d.Throughput {
		in.Throughput = aws.Int32(t.throughput)
	}
	return in
}

func (t modifyTarget) changes(d *Disk) bool {
	return t.size > d.CapacityGiB ||
		(t.volumeType != "" && t.volumeType != d.VolumeType) ||
		(t.iops > 0 && t.iops != d.IOPS) ||
		(t.throughput > 0 && t.throughput != d.Throughput)
}

func (c *Cloud) modifyTarget(d *Disk, opts ModifyOptions) modifyTarget {
	t := modifyTarget{size: d.CapacityGiB, volumeType: opts.VolumeType, iops: opts.IOPS, throughput: opts.Throughput}
	if opts.SizeBytes > 0 {
		if s := RoundUpGiB(opts.SizeBytes); s > int64(d.CapacityGiB) {
			t.size = int32(s)
		}
	}
	perGB := opts.IOPSPerGB
	if perGB == 0 && d.Tags[tagAllowIOPSIncrease] == "true" {
		if v, err := strconv.ParseInt(d.Tags[tagIOPSPerGB], 10, 32); err == nil {
			perGB = int32(v)
		}
	}
	if t.iops == 0 && perGB > 0 && (opts.IOPSPerGB > 0 || t.size > d.CapacityGiB) {
		vt := t.volumeType
		if vt == "" {
			vt = d.VolumeType
		}
		iops := int64(perGB) * int64(t.size)
		if max, ok := fallbackMax[vt]; ok && iops > int64(max) {
			iops = int64(max)
		}
		if min := minIOPS[vt]; iops < int64(min) {
			iops = int64(min)
		}
		t.iops = int32(iops)
	}
	return t
}

func (c *Cloud) waitModified(ctx context.Context, volumeID string) error {
	return poll(ctx, c.waits.Modify, func(ctx context.Context) (bool, error) {
		m, err := c.modifications.get(ctx, volumeID)
		if err != nil {
			if isNotFoundErr(err) {
				return true, nil
			}
			return false, err
		}
		switch m.ModificationState {
		case types.VolumeModificationStateCompleted, types.VolumeModificationStateOptimizing:
			return true, nil
		case types.VolumeModificationStateFailed:
			return false, fmt.Errorf("modification of volume %s failed: %s", volumeID, aws.ToString(m.StatusMessage))
		}
		return false, nil
	})
}

func (c *Cloud) modifyError(volumeID string, err error) error {
	switch {
	case isCode(err, "InvalidVolume.NotFound"):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case isCode(err, "VolumeModificationSizeLimitExceeded", "MaxIOPSLimitExceeded", "MaxIopsLimitExceeded"):
		return fmt.Errorf("%w: %w", ErrLimitExceeded, err)
	case isCode(err, "IncorrectModificationState"):
		return fmt.Errorf("%w: %w", ErrModificationPending, err)
	case len(errorCode(err)) > 7 && errorCode(err)[:7] == "Invalid":
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return fmt.Errorf("modify volume %s: %w", volumeID, err)
}
