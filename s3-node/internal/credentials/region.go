package credentials

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
)

// imdsTimeout bounds one lookup of the node's region: off EC2 nothing answers, and NodePublishVolume must
// fail with its message rather than wait out the kubelet's deadline.
const imdsTimeout = 2 * time.Second

// InstanceRegion is the node's own region from the instance metadata service (IMDS), the last source of an
// STS region, as upstream. It is asked only when a mount needs it, and kept once known: an instance does not
// move. A failure is not kept, so a node whose IMDS was briefly unreachable recovers on the next publish.
type InstanceRegion struct {
	client *imds.Client
	mu     sync.Mutex
	region string
}

// NewInstanceRegion returns the node's IMDS region source. An empty endpoint means the SDK's: the
// environment's AWS_EC2_METADATA_SERVICE_ENDPOINT, else the link-local address; AWS_EC2_METADATA_DISABLED
// turns it off.
func NewInstanceRegion(endpoint string) *InstanceRegion {
	return &InstanceRegion{client: imds.New(imds.Options{Endpoint: endpoint})}
}

// Get returns the node's region.
func (r *InstanceRegion) Get(ctx context.Context) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.region != "" {
		return r.region, nil
	}
	ctx, cancel := context.WithTimeout(ctx, imdsTimeout)
	defer cancel()
	out, err := r.client.GetRegion(ctx, &imds.GetRegionInput{})
	if err != nil {
		return "", fmt.Errorf("the node's region from IMDS: %w", err)
	}
	if out.Region == "" {
		return "", errors.New("the node's region from IMDS: the instance identity document names none")
	}
	r.region = out.Region
	return r.region, nil
}
