package csicontroller

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3Config is how the controller reaches S3. Credentials come from the SDK's usual chain (AWS_ACCESS_KEY_ID
// and AWS_SECRET_ACCESS_KEY, IRSA's web identity token, EKS Pod Identity, the instance profile).
type S3Config struct {
	// EndpointURL is an S3-compatible server's URL; "" means AWS (or AWS_ENDPOINT_URL_S3, which the SDK reads).
	EndpointURL string
	// Region overrides AWS_REGION; with neither, us-east-1.
	Region string
	// ForcePathStyle addresses buckets as <endpoint>/<bucket>, which most S3-compatible servers need.
	ForcePathStyle bool
}

// NewS3Client builds the client the service uses.
func NewS3Client(ctx context.Context, c S3Config) (*s3.Client, error) {
	var opts []func(*config.LoadOptions) error
	if c.Region != "" {
		opts = append(opts, config.WithRegion(c.Region))
	}
	cfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("load AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if c.EndpointURL != "" {
			o.BaseEndpoint = aws.String(c.EndpointURL)
		}
		o.UsePathStyle = c.ForcePathStyle
	}), nil
}
