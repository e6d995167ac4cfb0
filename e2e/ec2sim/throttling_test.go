package ec2sim

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
)

func mustForm(t *testing.T, body string) *form {
	t.Helper()
	f, err := decodeForm(body)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// drain takes tokens for the request until it is throttled and returns how many it was given (up to limit).
func drain(l *limiter, action string, mutating bool, f *form, limit int) int {
	for n := 0; n < limit; n++ {
		if !l.allow(action, mutating, f) {
			return n
		}
	}
	return limit
}

// TestThrottlingBucketPerCategory: each category's bucket holds its documented capacity, and after one
// second of a fake clock gives back exactly its refill rate, never more than its capacity.
func TestThrottlingBucketPerCategory(t *testing.T) {
	for _, tc := range []struct {
		name             string
		action, body     string
		mutating         bool
		capacity, refill int
	}{
		{"mutating", "AttachVolume", "", true, 50, 5},
		{"mutating ModifyVolume", "ModifyVolume", "", true, 50, 5},
		{"uncategorized CreateVolume", "CreateVolume", "", true, 100, 5},
		{"uncategorized CreateTags", "CreateTags", "", true, 100, 10},
		{"uncategorized DeleteSnapshot", "DeleteSnapshot", "", true, 100, 5},
		{"non-mutating", "DescribeAvailabilityZones", "", false, 100, 20},
		{"filtered DescribeVolumes", "DescribeVolumes", "Filter.1.Name=tag%3AName&Filter.1.Value.1=x", false, 100, 20},
		{"paginated DescribeVolumes", "DescribeVolumes", "MaxResults=5", false, 100, 20},
		{"next page of DescribeSnapshots", "DescribeSnapshots", "NextToken=abc", false, 100, 20},
		{"unfiltered DescribeVolumes", "DescribeVolumes", "", false, 50, 10},
		{"DescribeVolumes by ID", "DescribeVolumes", "VolumeId.1=vol-1", false, 50, 10},
		{"DescribeSnapshots MaxResults=0", "DescribeSnapshots", "MaxResults=0", false, 50, 10},
		{"unfiltered DescribeInstances", "DescribeInstances", "", false, 50, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
			l := newLimiter(EC2Limits(), clk.Now)
			f := mustForm(t, tc.body)
			if got := drain(l, tc.action, tc.mutating, f, 1000); got != tc.capacity {
				t.Errorf("a full bucket gave %d tokens, want %d", got, tc.capacity)
			}
			clk.Advance(time.Second)
			if got := drain(l, tc.action, tc.mutating, f, 1000); got != tc.refill {
				t.Errorf("one second refilled %d tokens, want %d", got, tc.refill)
			}
			clk.Advance(time.Hour)
			if got := drain(l, tc.action, tc.mutating, f, 1000); got != tc.capacity {
				t.Errorf("an hour idle refilled %d tokens, want the capacity %d", got, tc.capacity)
			}
		})
	}
}

// TestThrottlingIsPerAction: an action with an empty bucket, or an unfiltered Describe with an empty small
// bucket, does not throttle another action or the same Describe filtered.
func TestThrottlingIsPerAction(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := newLimiter(EC2Limits(), clk.Now)
	if n := drain(l, "AttachVolume", true, nil, 1000); n != 50 {
		t.Fatalf("AttachVolume got %d tokens", n)
	}
	for _, other := range []string{"DetachVolume", "ModifyVolume", "CreateVolume"} {
		if !l.allow(other, true, nil) {
			t.Errorf("%s throttled by AttachVolume's empty bucket", other)
		}
	}
	if n := drain(l, "DescribeVolumes", false, mustForm(t, ""), 1000); n != 50 {
		t.Fatalf("unfiltered DescribeVolumes got %d tokens", n)
	}
	if !l.allow("DescribeVolumes", false, mustForm(t, "Filter.1.Name=status&Filter.1.Value.1=available")) {
		t.Error("a filtered DescribeVolumes throttled by the unfiltered bucket")
	}
	if !l.allow("DescribeSnapshots", false, mustForm(t, "")) {
		t.Error("an unfiltered DescribeSnapshots throttled by DescribeVolumes' unfiltered bucket")
	}
}

// TestThrottlingScaleAndOverrides: the scales shrink every bucket and its refill; an entry for an action
// or a category replaces it unscaled, the action's winning over its category's.
func TestThrottlingScaleAndOverrides(t *testing.T) {
	clk := &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	l := newLimiter(Limits{PerAction: &Throttling{CapacityScale: 0.1, RefillScale: 0.5, Buckets: map[string]Bucket{
		CategoryMutating: {Capacity: 3, Refill: 1},
		"DetachVolume":   {Capacity: 2, Refill: 0},
	}}}, clk.Now)
	for _, tc := range []struct {
		action           string
		capacity, refill int
	}{
		{"CreateVolume", 10, 2},                  // 100/5 scaled
		{"DescribeVolumesModifications", 10, 10}, // 100/20 scaled
		{"AttachVolume", 3, 1},                   // the mutating category's entry
		{"DetachVolume", 2, 0},                   // its own entry; a zero refill never refills
	} {
		mutating := tc.action != "DescribeVolumesModifications"
		if got := drain(l, tc.action, mutating, nil, 1000); got != tc.capacity {
			t.Errorf("%s: capacity %d, want %d", tc.action, got, tc.capacity)
		}
		clk.Advance(time.Second)
		if got := drain(l, tc.action, mutating, nil, 1000); got != tc.refill {
			t.Errorf("%s: refill %d a second, want %d", tc.action, got, tc.refill)
		}
	}
}

// TestThrottledAnswerIsEC2s: a request over its action's bucket is answered as EC2 does (503
// RequestLimitExceeded, "Request limit exceeded.") and counted, while another action still runs.
func TestThrottledAnswerIsEC2s(t *testing.T) {
	s, _ := startFake(t, func(c *Config) {
		c.Limits = Limits{PerAction: &Throttling{Buckets: map[string]Bucket{"CreateVolume": {Capacity: 1, Refill: 0}}}}
	})
	c := newClient(t, s, func(o *clientOpts) { o.attempts = 1 })
	ctx := ctxT(t)
	in := &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(1)}
	if _, err := c.CreateVolume(ctx, in); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateVolume(ctx, in)
	if code, msg := apiCode(t, err); code != "RequestLimitExceeded" || msg != "Request limit exceeded." {
		t.Errorf("throttled CreateVolume: %s %q", code, msg)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusServiceUnavailable {
		t.Errorf("throttled CreateVolume: %v, want HTTP 503", err)
	}
	if n := s.Requests("CreateVolume", "RequestLimitExceeded"); n != 1 {
		t.Errorf("counted %d throttled CreateVolume, want 1", n)
	}
	if _, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); err != nil {
		t.Errorf("DescribeVolumes after CreateVolume's bucket emptied: %v", err)
	}
}

func TestThrottlingRefusesNegativeNumbers(t *testing.T) {
	for _, th := range []Throttling{
		{CapacityScale: -1},
		{RefillScale: -0.5},
		{Buckets: map[string]Bucket{"CreateVolume": {Capacity: -1}}},
	} {
		if _, err := withDefaults(Config{DataDir: t.TempDir(), Limits: Limits{PerAction: &th}}); err == nil {
			t.Errorf("%+v accepted", th)
		}
	}
}

// TestSetLimitsReplacesTheBuckets: limits set on a running emulator apply to the next request, with full
// buckets, and Limits{} lifts them.
func TestSetLimitsReplacesTheBuckets(t *testing.T) {
	s, _ := startFake(t, nil)
	c := newClient(t, s, func(o *clientOpts) { o.attempts = 1 })
	ctx := ctxT(t)
	if err := s.SetLimits(Limits{PerAction: &Throttling{Buckets: map[string]Bucket{CategoryNonMutating: {Capacity: 1}}}}); err != nil {
		t.Fatal(err)
	}
	if got := s.Limits().PerAction.Buckets[CategoryNonMutating]; got != (Bucket{Capacity: 1}) {
		t.Errorf("Limits() reports %+v", got)
	}
	in := &ec2.DescribeAvailabilityZonesInput{}
	if _, err := c.DescribeAvailabilityZones(ctx, in); err != nil {
		t.Fatal(err)
	}
	_, err := c.DescribeAvailabilityZones(ctx, in)
	wantCode(t, err, "RequestLimitExceeded")
	if err := s.SetLimits(Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DescribeAvailabilityZones(ctx, in); err != nil {
		t.Errorf("after lifting the limits: %v", err)
	}
	if err := s.SetLimits(Limits{PerAction: &Throttling{RefillScale: -1}}); err == nil {
		t.Error("a negative refill scale accepted")
	}
}
