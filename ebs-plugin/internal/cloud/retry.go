package cloud

import (
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// retryers gives each mutating API its own adaptive retryer. The SDK's client-side rate limit belongs to a
// retryer, so a throttled AttachVolume storm then slows down attaches only, not deletes or creates (as
// upstream does since kubernetes-sigs/aws-ebs-csi-driver#2010).
type retryers struct {
	mu sync.Mutex
	m  map[string]aws.Retryer
}

func newRetryers() *retryers { return &retryers{m: map[string]aws.Retryer{}} }

// option returns the per-call option that installs the retryer for api.
func (r *retryers) option(api string) func(*ec2.Options) {
	r.mu.Lock()
	rt, ok := r.m[api]
	if !ok {
		rt = retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
			o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) {
				so.MaxAttempts = 50
			})
		})
		r.m[api] = rt
	}
	r.mu.Unlock()
	return func(o *ec2.Options) { o.Retryer = rt }
}
