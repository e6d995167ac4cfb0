package cloud

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/klog/v2"
)

// DiskOptions describe a volume to create.
type DiskOptions struct {
	CapacityBytes            int64
	VolumeType               string
	IOPS                     int32
	IOPSPerGB                int32
	AllowIOPSPerGBIncrease   bool
	Throughput               int32
	Encrypted                bool
	KMSKeyID                 string
	AvailabilityZone         string
	AvailabilityZoneID       string
	OutpostARN               string
	SnapshotID               string
	SourceVolumeID           string
	MultiAttach              bool
	VolumeInitializationRate int32
	Tags                     map[string]string
}

// CreateDisk creates (or, for a repeated name, finds) the volume, as a copy of opts.SourceVolumeID when that
// is set, and waits until it is available.
func (c *Cloud) CreateDisk(ctx context.Context, name string, opts DiskOptions) (*Disk, error) {
	req, err := c.newCreateRequest(ctx, name, opts)
	if err != nil {
		return nil, err
	}
	var volumeID string
	if opts.SourceVolumeID != "" {
		volumeID, err = c.copyVolume(ctx, req, opts)
	} else {
		volumeID, err = c.createVolume(ctx, req, opts)
	}
	if err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(4).Info("Volume requested, waiting for it to become available", "name", name, "volumeID", volumeID)
	disk, err := c.waitAvailable(ctx, volumeID)
	if err != nil {
		return nil, fmt.Errorf("volume %s did not become available: %w", volumeID, err)
	}
	return disk, nil
}

// createRequest is what creating and copying a volume share.
type createRequest struct {
	name    string
	sizeGiB int32
	iops    int32 // 0: the type's default
	tagSpec []types.TagSpecification
	token   string
}

func (c *Cloud) newCreateRequest(ctx context.Context, name string, opts DiskOptions) (createRequest, error) {
	sizeGiB := RoundUpGiB(opts.CapacityBytes)
	if sizeGiB > math.MaxInt32 {
		return createRequest{}, fmt.Errorf("size %d GiB: %w", sizeGiB, ErrInvalidArgument)
	}
	size := int32(sizeGiB)
	iops, err := c.requestedIOPS(ctx, opts, size)
	if err != nil {
		return createRequest{}, err
	}
	tags := maps.Clone(opts.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[tagVolumeName] = name
	return createRequest{
		name:    name,
		sizeGiB: size,
		iops:    iops,
		tagSpec: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: toTags(tags)}},
		token:   c.clientToken(name),
	}, nil
}

// createVolume issues CreateVolume, empty or from opts.SnapshotID, and returns the new volume's ID.
func (c *Cloud) createVolume(ctx context.Context, req createRequest, opts DiskOptions) (string, error) {
	in := &ec2.CreateVolumeInput{
		ClientToken:        aws.String(req.token),
		Size:               aws.Int32(req.sizeGiB),
		VolumeType:         types.VolumeType(opts.VolumeType),
		Encrypted:          aws.Bool(opts.Encrypted),
		MultiAttachEnabled: aws.Bool(opts.MultiAttach),
		TagSpecifications:  req.tagSpec,
	}
	if opts.AvailabilityZoneID != "" {
		in.AvailabilityZoneId = aws.String(opts.AvailabilityZoneID)
	} else {
		in.AvailabilityZone = aws.String(opts.AvailabilityZone)
	}
	if opts.KMSKeyID != "" {
		in.KmsKeyId = aws.String(opts.KMSKeyID)
	}
	if opts.OutpostARN != "" {
		in.OutpostArn = aws.String(opts.OutpostARN)
	}
	if req.iops > 0 {
		in.Iops = aws.Int32(req.iops)
	}
	if opts.Throughput > 0 {
		in.Throughput = aws.Int32(opts.Throughput)
	}
	if opts.SnapshotID != "" {
		in.SnapshotId = aws.String(opts.SnapshotID)
		if opts.VolumeInitializationRate > 0 { // only meaningful for a restore
			in.VolumeInitializationRate = aws.Int32(opts.VolumeInitializationRate)
		}
	}
	out, err := c.ec2.CreateVolume(ctx, in, c.retryers.option("CreateVolume"))
	if err == nil {
		return aws.ToString(out.VolumeId), nil
	}
	// A retried CreateVolume whose first attempt created the volume (and so used up the last of the quota)
	// fails with VolumeLimitExceeded; the volume is found by its name tag instead of being reported as not
	// created, and leaked.
	if !isCode(err, "VolumeLimitExceeded") {
		return "", c.createError(req.name, err)
	}
	id, found, ferr := c.volumeByName(ctx, req.name)
	if ferr != nil || !found {
		return "", c.createError(req.name, err)
	}
	klog.FromContext(ctx).Info("CreateVolume hit the volume limit, but the volume exists", "name", req.name, "volumeID", id)
	return id, nil
}

// volumeByName finds the volume tagged with the CSI volume name; more than one is reported as not found
// (CreateVolume's idempotency makes one per name, so several means another writer, which this does not
// guess between).
func (c *Cloud) volumeByName(ctx context.Context, name string) (string, bool, error) {
	out, err := c.ec2.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{
		Filters: []types.Filter{{Name: aws.String("tag:" + tagVolumeName), Values: []string{name}}},
	}, c.retryers.option("DescribeVolumes"))
	if err != nil {
		return "", false, err
	}
	var ids []string
	for _, v := range out.Volumes {
		if s := v.State; s != types.VolumeStateDeleting && s != types.VolumeStateDeleted && s != types.VolumeStateError {
			ids = append(ids, aws.ToString(v.VolumeId))
		}
	}
	if len(ids) != 1 {
		return "", false, nil
	}
	return ids[0], true, nil
}

func (c *Cloud) createError(name string, err error) error {
	switch {
	case isCode(err, "IdempotentParameterMismatch"):
		c.bumpToken(name)
		return fmt.Errorf("volume %q exists with different parameters: %w", name, ErrAlreadyExists)
	case isCode(err, "InvalidSnapshot.NotFound", "InvalidVolume.NotFound"):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case isCode(err, "InvalidParameterCombination", "InvalidParameterValue", "InvalidParameter", "InvalidZone.NotFound",
		"UnknownVolumeType", "InvalidVolumeType"):
		return fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	case isCode(err, "VolumeLimitExceeded", "MaxIOPSLimitExceeded", "MaxIopsLimitExceeded", "VolumeTypeNotAvailableInZone"):
		return fmt.Errorf("%w: %w", ErrLimitExceeded, err)
	}
	return fmt.Errorf("create volume %q: %w", name, err)
}

// waitAvailable waits upstream's schedule. A volume that vanishes while creating (EBS rolls back a volume
// whose KMS key it may not use) is reported as such instead of as a timeout.
func (c *Cloud) waitAvailable(ctx context.Context, volumeID string) (*Disk, error) {
	if err := sleep(ctx, c.waits.CreateInitialDelay); err != nil {
		return nil, err
	}
	var disk *Disk
	err := poll(ctx, c.waits.Create, func(ctx context.Context) (bool, error) {
		d, err := c.GetDisk(ctx, volumeID)
		if err != nil {
			if isNotFoundErr(err) {
				return false, fmt.Errorf("volume %s disappeared while being created (check the KMS key permissions): %w", volumeID, err)
			}
			return false, err
		}
		disk = d
		switch d.State {
		case string(types.VolumeStateAvailable), string(types.VolumeStateInUse):
			return true, nil
		case string(types.VolumeStateError), string(types.VolumeStateDeleting), string(types.VolumeStateDeleted):
			return false, fmt.Errorf("volume %s is in state %q", volumeID, d.State)
		}
		return false, nil
	})
	return disk, err
}

// IsAlreadyExists reports an ErrAlreadyExists.
func IsAlreadyExists(err error) bool { return errors.Is(err, ErrAlreadyExists) }
