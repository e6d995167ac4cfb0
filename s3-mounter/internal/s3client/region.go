package s3client

import (
	"context"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"k8s.io/klog/v2"
)

// DefaultRegion is where a bucket is looked for first when nothing names a region, as mount-s3 does.
const DefaultRegion = "us-east-1"

// imdsTimeout bounds the instance-region lookup: off EC2 nothing answers, and a mount must not wait long
// for a hint that the bucket's redirect would correct anyway.
const imdsTimeout = 2 * time.Second

// Region is the region requests are signed for, and where it came from.
type Region struct {
	Name string
	// Source names where the region came from, for logs and errors.
	Source string
	// UserSpecified regions (--region, AWS_REGION) are never corrected by S3's redirect: mount-s3 takes
	// them as the user's word and fails, naming the bucket's region, rather than mount another place.
	UserSpecified bool
}

// resolveRegion picks the region in mount-s3's order: --region, AWS_REGION, then (Stowage) the SDK's own
// configuration (AWS_DEFAULT_REGION, the profile's region), then the instance's region from IMDS, then
// us-east-1. Only the first two count as the user's choice: mount-s3 reads neither AWS_DEFAULT_REGION nor
// the profile and would reach the bucket's region through the redirect, which still applies to them.
func resolveRegion(ctx context.Context, flag string, cfg aws.Config) Region {
	switch {
	case flag != "":
		return Region{Name: flag, Source: "--region", UserSpecified: true}
	case os.Getenv("AWS_REGION") != "":
		return Region{Name: os.Getenv("AWS_REGION"), Source: "AWS_REGION", UserSpecified: true}
	case cfg.Region != "":
		return Region{Name: cfg.Region, Source: "AWS_DEFAULT_REGION or the shared configuration"}
	}
	if r, err := instanceRegion(ctx, cfg); err != nil {
		klog.FromContext(ctx).V(2).Info("No instance region from IMDS", "err", err)
	} else if r != "" {
		return Region{Name: r, Source: "the instance's metadata (IMDS)"}
	}
	return Region{Name: DefaultRegion, Source: "the default"}
}

// instanceRegion asks IMDS for the instance's region. The client built from cfg honours
// AWS_EC2_METADATA_DISABLED, AWS_EC2_METADATA_SERVICE_ENDPOINT and the profile's IMDS settings.
func instanceRegion(ctx context.Context, cfg aws.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, imdsTimeout)
	defer cancel()
	out, err := imds.NewFromConfig(cfg).GetRegion(ctx, &imds.GetRegionInput{})
	if err != nil {
		return "", err
	}
	return out.Region, nil
}
