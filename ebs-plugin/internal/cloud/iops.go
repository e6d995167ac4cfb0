package cloud

import (
	"context"
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

// maxIOPSTTL is how long a discovered IOPS maximum is trusted.
const maxIOPSTTL = 12 * time.Hour

// Per-type IOPS bounds: the minimum a volume can have and the fallback maximum when the DryRun discovery
// cannot tell.
var (
	minIOPS      = map[string]int32{"io1": 100, "io2": 100, "gp3": 3000}
	fallbackMax  = map[string]int32{"io1": 64000, "io2": 256000, "gp3": 16000}
	maxIOPSPerGB = map[string]int32{"io1": 50, "io2": 1000, "gp3": 500}
	baselineIOPS = map[string]int32{"gp3": 3000}
)

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
