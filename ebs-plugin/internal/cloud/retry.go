package cloud

import (
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go"
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

// throttleOnly returns the per-call option for an action that is not idempotent (no ClientToken): it retries
// only EC2's throttling answers, which EC2 never carried out, and leaves every other failure to the caller,
// who must find out whether the action happened before trying again.
func (r *retryers) throttleOnly(api string) func(*ec2.Options) {
	key := api + "/throttle-only"
	r.mu.Lock()
	rt, ok := r.m[key]
	if !ok {
		rt = retry.NewAdaptiveMode(func(o *retry.AdaptiveModeOptions) {
			o.StandardOptions = append(o.StandardOptions, func(so *retry.StandardOptions) {
				so.MaxAttempts = 50
				so.Retryables = []retry.IsErrorRetryable{retry.IsErrorRetryableFunc(func(err error) aws.Ternary {
					var ae smithy.APIError
					if errors.As(err, &ae) {
						if _, throttled := retry.DefaultThrottleErrorCodes[ae.ErrorCode()]; throttled {
							return aws.TrueTernary
						}
					}
					return aws.FalseTernary
				})}
			})
		})
		r.m[key] = rt
	}
	r.mu.Unlock()
	return func(o *ec2.Options) { o.Retryer = rt }
}
