package metadata

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// imdsClient is the part of the SDK's IMDS client used here.
type imdsClient interface {
	GetMetadata(ctx context.Context, in *imds.GetMetadataInput, optFns ...func(*imds.Options)) (*imds.GetMetadataOutput, error)
}

// IMDS reads the instance from the EC2 instance metadata service.
type IMDS struct {
	client imdsClient
}

// NewIMDS returns an IMDS source. The SDK reads AWS_EC2_METADATA_SERVICE_ENDPOINT and
// AWS_EC2_METADATA_DISABLED itself; no credentials are involved.
func NewIMDS() *IMDS {
	return &IMDS{client: imds.New(imds.Options{
		// A few quick retries: an unreachable IMDS (hop limit 1 in a pod network) should fall through to the
		// next source in seconds, not crash-loop the plugin.
		Retryer: retryerWithAttempts(3),
	})}
}

// Name implements Source.
func (*IMDS) Name() string { return "imds" }

func (m *IMDS) get(ctx context.Context, path string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := m.client.GetMetadata(ctx, &imds.GetMetadataInput{Path: path})
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	defer out.Content.Close()
	b, err := io.ReadAll(io.LimitReader(out.Content, 1<<20))
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Get implements Source.
func (m *IMDS) Get(ctx context.Context) (*Instance, error) {
	inst := &Instance{EBSMappings: -1}
	var err error
	if inst.InstanceID, err = m.get(ctx, "instance-id"); err != nil {
		return nil, err
	}
	if !validInstanceID(inst.InstanceID) {
		return nil, fmt.Errorf("instance-id %q is not an EC2 instance ID", inst.InstanceID)
	}
	if inst.InstanceType, err = m.get(ctx, "instance-type"); err != nil {
		return nil, err
	}
	if inst.AvailabilityZone, err = m.get(ctx, "placement/availability-zone"); err != nil {
		return nil, err
	}
	if inst.AvailabilityZone == "" {
		return nil, errors.New("placement/availability-zone is empty")
	}
	if inst.Region, err = m.get(ctx, "placement/region"); err != nil {
		inst.Region = regionFromZone(inst.AvailabilityZone)
	}
	if arn, err := m.get(ctx, "outpost-arn"); err == nil {
		inst.OutpostARN = arn
	}
	if list, err := m.get(ctx, "block-device-mapping/"); err == nil {
		inst.EBSMappings = countEBSMappings(list)
	}
	if macs, err := m.get(ctx, "network/interfaces/macs/"); err == nil {
		for _, l := range strings.Split(macs, "\n") {
			if strings.TrimSpace(l) != "" {
				inst.ENIs++
			}
		}
	}
	return inst, nil
}

// countEBSMappings counts the "ebsN" entries of the block-device-mapping listing (volumes attached at
// launch). The root volume appears as "ami"/"root" and is counted separately by the caller.
func countEBSMappings(listing string) int {
	n := 0
	for _, l := range strings.Split(listing, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "ebs") {
			n++
		}
	}
	return n
}

// regionFromZone is the zone without its letter. The zone is trimmed, but a blank before the letter ("x a")
// would stay at the end of the region, so the region is trimmed too.
func regionFromZone(zone string) string {
	if len(zone) > 1 {
		return strings.TrimSpace(strings.TrimRight(zone, "abcdefghijklmnopqrstuvwxyz"))
	}
	return ""
}

func retryerWithAttempts(n int) aws.Retryer {
	return retry.AddWithMaxAttempts(retry.NewStandard(), n)
}
