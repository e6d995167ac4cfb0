package cloud

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"time"

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

const (
	tokenBumpTTL = time.Hour
	maxIOPSTTL   = 12 * time.Hour
)

// Per-type IOPS bounds: the minimum a volume can have and the fallback maximum when the DryRun discovery
// cannot tell.
var (
	minIOPS      = map[string]int32{"io1": 100, "io2": 100, "gp3": 3000}
	fallbackMax  = map[string]int32{"io1": 64000, "io2": 256000, "gp3": 16000}
	maxIOPSPerGB = map[string]int32{"io1": 50, "io2": 1000, "gp3": 500}
	baselineIOPS = map[string]int32{"gp3": 3000}
)

// clientToken derives the EC2 idempotency token from the CSI volume name (and a bump suffix after a
// parameter mismatch burned the previous one).
func (c *Cloud) clientToken(name string) string {
	c.mu.Lock()
	b, ok := c.tokenBumps[name]
	if ok && c.now().After(b.expires) {
		delete(c.tokenBumps, name)
		ok = false
	}
	c.mu.Unlock()
	base := name
	if ok {
		base = name + "-" + strconv.Itoa(b.n)
	}
	sum := sha256.Sum256([]byte(base))
	return hex.EncodeToString(sum[:])
}

// bumpToken moves name to the next token: EC2 remembers a token with its parameters for hours, so a request
// with new parameters under the old token would fail until then.
func (c *Cloud) bumpToken(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.tokenBumps[name]
	if !ok || c.now().After(b.expires) {
		b = bump{n: 1}
	}
	b.n++
	b.expires = c.now().Add(tokenBumpTTL)
	c.tokenBumps[name] = b
}

// CreateDisk creates (or, for a repeated name, finds) the volume and waits until it is available.
func (c *Cloud) CreateDisk(ctx context.Context, name string, opts DiskOptions) (*Disk, error) {
	logger := klog.FromContext(ctx).WithValues("name", name)
	sizeGiB := RoundUpGiB(opts.CapacityBytes)
	if sizeGiB > math.MaxInt32 {
		return nil, fmt.Errorf("size %d GiB: %w", sizeGiB, ErrInvalidArgument)
	}
	size := int32(sizeGiB)
	iops, err := c.requestedIOPS(ctx, opts, size)
	if err != nil {
		return nil, err
	}
	tags := map[string]string{}
	for k, v := range opts.Tags {
		tags[k] = v
	}
	tags[tagVolumeName] = name
	tagSpec := []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: toTags(tags)}}
	token := c.clientToken(name)

	var volumeID string
	if opts.SourceVolumeID != "" {
		in := &ec2.CopyVolumesInput{
			SourceVolumeId:     aws.String(opts.SourceVolumeID),
			ClientToken:        aws.String(token),
			Size:               aws.Int32(size),
			VolumeType:         types.VolumeType(opts.VolumeType),
			MultiAttachEnabled: aws.Bool(opts.MultiAttach),
			TagSpecifications:  tagSpec,
		}
		if iops > 0 {
			in.Iops = aws.Int32(iops)
		}
		if opts.Throughput > 0 {
			in.Throughput = aws.Int32(opts.Throughput)
		}
		out, err := c.ec2.CopyVolumes(ctx, in, c.retryers.option("CopyVolumes"))
		if err != nil {
			return nil, c.createError(name, err)
		}
		if len(out.Volumes) == 0 {
			return nil, fmt.Errorf("CopyVolumes of %s returned no volume", opts.SourceVolumeID)
		}
		volumeID = aws.ToString(out.Volumes[0].VolumeId)
	} else {
		in := &ec2.CreateVolumeInput{
			ClientToken:        aws.String(token),
			Size:               aws.Int32(size),
			VolumeType:         types.VolumeType(opts.VolumeType),
			Encrypted:          aws.Bool(opts.Encrypted),
			MultiAttachEnabled: aws.Bool(opts.MultiAttach),
			TagSpecifications:  tagSpec,
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
		if iops > 0 {
			in.Iops = aws.Int32(iops)
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
		if err != nil {
			// A retried CreateVolume whose first attempt created the volume (and so used up the last of
			// the quota) fails with VolumeLimitExceeded; the volume is found by its name tag instead of
			// being reported as not created, and leaked.
			if !isCode(err, "VolumeLimitExceeded") {
				return nil, c.createError(name, err)
			}
			id, found, ferr := c.volumeByName(ctx, name)
			if ferr != nil || !found {
				return nil, c.createError(name, err)
			}
			logger.Info("CreateVolume hit the volume limit, but the volume exists", "volumeID", id)
			out = &ec2.CreateVolumeOutput{VolumeId: aws.String(id)}
		}
		volumeID = aws.ToString(out.VolumeId)
	}
	logger.V(4).Info("Volume requested, waiting for it to become available", "volumeID", volumeID)
	disk, err := c.waitAvailable(ctx, volumeID)
	if err != nil {
		return nil, fmt.Errorf("volume %s did not become available: %w", volumeID, err)
	}
	return disk, nil
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

// requestedIOPS computes the IOPS to ask for: iopsPerGB × size, raised to the type's minimum when allowed,
// capped at the maximum EC2 accepts for the type in that zone.
func (c *Cloud) requestedIOPS(ctx context.Context, opts DiskOptions, size int32) (int32, error) {
	iops := opts.IOPS
	if iops == 0 && opts.IOPSPerGB > 0 {
		product := int64(opts.IOPSPerGB) * int64(size)
		if product > math.MaxInt32 {
			product = math.MaxInt32
		}
		iops = int32(product)
		if min := minIOPS[opts.VolumeType]; iops < min {
			if !opts.AllowIOPSPerGBIncrease {
				return 0, fmt.Errorf("iopsPerGB %d × %d GiB = %d IOPS is below the %s minimum of %d and allowAutoIOPSPerGBIncrease is false: %w",
					opts.IOPSPerGB, size, iops, opts.VolumeType, min, ErrInvalidArgument)
			}
			iops = min
		}
	}
	if iops == 0 {
		return 0, nil
	}
	if _, ok := fallbackMax[opts.VolumeType]; !ok {
		return iops, nil // EC2 validates IOPS for other types
	}
	max := c.discoverMaxIOPS(ctx, opts)
	if perGB := maxIOPSPerGB[opts.VolumeType]; perGB > 0 && int64(perGB)*int64(size) < int64(max) {
		max = perGB * size
		if base := baselineIOPS[opts.VolumeType]; max < base {
			max = base // gp3 has 3000 IOPS at any size
		}
	}
	if iops > max {
		iops = max
	}
	if min := minIOPS[opts.VolumeType]; iops < min && opts.AllowIOPSPerGBIncrease {
		iops = min
	}
	return iops, nil
}

var (
	maxIOPSPattern  = regexp.MustCompile(`(?i)volume iops.*is too high.*maximum is (\d+)`)
	maxKIOPSPattern = regexp.MustCompile(`(\d+)K IOPS`)
	iopsUnsupported = regexp.MustCompile(`(?i)parameter iops is not supported`)
)

// maxIOPS discovers the largest IOPS EC2 accepts for (type, zone, outpost) with a DryRun CreateVolume asking
// for MaxInt32 IOPS: EC2's refusal names the limit. The answer is cached 12 h.
func (c *Cloud) discoverMaxIOPS(ctx context.Context, opts DiskOptions) int32 {
	key := opts.VolumeType + "/" + opts.AvailabilityZone + "/" + opts.AvailabilityZoneID + "/" + opts.OutpostARN
	c.mu.Lock()
	if e, ok := c.maxIOPSCache[key]; ok && c.now().Before(e.expires) {
		c.mu.Unlock()
		return e.iops
	}
	c.mu.Unlock()
	in := &ec2.CreateVolumeInput{
		DryRun:     aws.Bool(true),
		VolumeType: types.VolumeType(opts.VolumeType),
		Size:       aws.Int32(4),
		Iops:       aws.Int32(math.MaxInt32),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume,
			Tags: []types.Tag{{Key: aws.String(tagVolumeName), Value: aws.String("IopsLimitDryRun")}}}},
	}
	if opts.AvailabilityZoneID != "" {
		in.AvailabilityZoneId = aws.String(opts.AvailabilityZoneID)
	} else {
		in.AvailabilityZone = aws.String(opts.AvailabilityZone)
	}
	if opts.OutpostARN != "" {
		in.OutpostArn = aws.String(opts.OutpostARN)
	}
	_, err := c.ec2.CreateVolume(ctx, in, c.retryers.option("CreateVolume"))
	fallback := fallbackMax[opts.VolumeType]
	if err == nil {
		return fallback
	}
	msg := err.Error()
	var found int64
	if m := maxIOPSPattern.FindStringSubmatch(msg); m != nil {
		found, _ = strconv.ParseInt(m[1], 10, 32)
	} else if m := maxKIOPSPattern.FindStringSubmatch(msg); m != nil {
		k, _ := strconv.ParseInt(m[1], 10, 32)
		found = k * 1000
	} else if iopsUnsupported.MatchString(msg) {
		found = 0
	} else {
		klog.FromContext(ctx).V(2).Info("Could not read the IOPS limit from the DryRun answer, using the fallback",
			"type", opts.VolumeType, "err", err.Error(), "fallback", fallback)
		return fallback
	}
	if found <= 0 || found > math.MaxInt32 {
		return fallback
	}
	c.mu.Lock()
	c.maxIOPSCache[key] = maxEntry{iops: int32(found), expires: c.now().Add(maxIOPSTTL)}
	c.mu.Unlock()
	return int32(found)
}

// IsAlreadyExists reports an ErrAlreadyExists.
func IsAlreadyExists(err error) bool { return errors.Is(err, ErrAlreadyExists) }
