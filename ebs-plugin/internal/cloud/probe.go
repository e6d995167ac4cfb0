package cloud

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

// ReachableTTL is how long a successful reachability check is trusted, as upstream (checked at start, then
// every 3 h): the liveness probe calls Probe often and must not cost an EC2 request each time.
const ReachableTTL = 3 * time.Hour

// CheckReachable asks EC2 for DescribeAvailabilityZones with DryRun=true, without retries, as upstream's
// Probe does. EC2 answers DryRunOperation when it is reachable and the caller is authorized; anything else
// (UnauthorizedOperation, a network error, a success from an emulator that ignores DryRun) is returned. A
// success is remembered for ReachableTTL; a failure is not, so the next Probe asks again.
func (c *Cloud) CheckReachable(ctx context.Context) error {
	c.mu.Lock()
	ok := !c.reachableUntil.IsZero() && c.now().Before(c.reachableUntil)
	c.mu.Unlock()
	if ok {
		return nil
	}
	_, err := c.ec2.DescribeAvailabilityZones(ctx, &ec2.DescribeAvailabilityZonesInput{DryRun: aws.Bool(true)},
		func(o *ec2.Options) { o.RetryMaxAttempts = 1 })
	if err == nil {
		return fmt.Errorf("EC2 DescribeAvailabilityZones ignored DryRun=true: want error DryRunOperation")
	}
	if !isCode(err, "DryRunOperation") {
		return fmt.Errorf("EC2 is not reachable: %w", err)
	}
	c.mu.Lock()
	c.reachableUntil = c.now().Add(ReachableTTL)
	c.mu.Unlock()
	return nil
}
