package ec2sim

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
)

// metricValue reads one ec2sim_requests_total sample from /metrics.
func metricValue(t *testing.T, s *Server, action, code string) string {
	t.Helper()
	resp, err := http.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	prefix := `ec2sim_requests_total{action="` + action + `",code="` + code + `"} `
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			return v
		}
	}
	return "0"
}

func TestThrottlingIsRetriedBySDK(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.Faults = Faults{Actions: []string{"DescribeAvailabilityZones"}, ThrottleRate: 1, Budget: 2}
	})
	c := newClient(t, s)
	if _, err := c.DescribeAvailabilityZones(ctxT(t), &ec2.DescribeAvailabilityZonesInput{}); err != nil {
		t.Fatalf("with 2 throttles and 3 attempts: %v", err)
	}
	if got := metricValue(t, s, "DescribeAvailabilityZones", "RequestLimitExceeded"); got != "2" {
		t.Errorf("throttled requests counted %s, want 2", got)
	}
	if got := metricValue(t, s, "DescribeAvailabilityZones", "OK"); got != "1" {
		t.Errorf("successful requests counted %s, want 1", got)
	}
	// Other actions are not affected.
	if _, err := c.DescribeInstances(ctxT(t), &ec2.DescribeInstancesInput{}); err != nil {
		t.Fatal(err)
	}
	s.SetFaults(Faults{ThrottleRate: 1})
	_, err := c.DescribeInstances(ctxT(t), &ec2.DescribeInstancesInput{})
	wantCode(t, err, "RequestLimitExceeded")
	if got := metricValue(t, s, "DescribeInstances", "RequestLimitExceeded"); got != "3" {
		t.Errorf("DescribeInstances throttles %s, want 3 (one per attempt)", got)
	}
}

func TestInternalErrorsAndDroppedConnections(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Faults = Faults{InternalErrorRate: 1, Budget: 1} })
	c := newClient(t, s)
	if _, err := c.DescribeVolumes(ctxT(t), &ec2.DescribeVolumesInput{}); err != nil {
		t.Fatalf("one 500 then success: %v", err)
	}
	if got := metricValue(t, s, "DescribeVolumes", "InternalError"); got != "1" {
		t.Errorf("500s counted %s", got)
	}
	s.SetFaults(Faults{InternalErrorRate: 1})
	_, err := c.DescribeVolumes(ctxT(t), &ec2.DescribeVolumesInput{})
	wantCode(t, err, "InternalError")

	s.SetFaults(Faults{DropRate: 1})
	_, err = c.DescribeVolumes(ctxT(t), &ec2.DescribeVolumesInput{})
	var ae smithy.APIError
	if err == nil || errors.As(err, &ae) {
		t.Errorf("dropped connection gave %v, want a transport error", err)
	}
	s.SetFaults(Faults{})
	if _, err := c.DescribeVolumes(ctxT(t), &ec2.DescribeVolumesInput{}); err != nil {
		t.Errorf("after clearing faults: %v", err)
	}
}

func TestLatencyFault(t *testing.T) {
	s := startServer(t, func(c *Config) { c.Faults = Faults{Latency: 2 * time.Second, Actions: []string{"DescribeVolumes"}} })
	c := newClient(t, s, func(o *clientOpts) { o.attempts = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call shorter than the added latency gave %v", err)
	}
	if _, err := c.DescribeInstances(ctxT(t), &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("unaffected action: %v", err)
	}
}

func TestStuckAttachment(t *testing.T) {
	s := startServer(t, nil)
	c := newClient(t, s)
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	resp, err := http.Post(s.URL()+"/debug/faults", "application/json", strings.NewReader(`{"stuckAttach":true}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !s.Faults().StuckAttach {
		t.Fatalf("POST /debug/faults: %d, faults %+v", resp.StatusCode, s.Faults())
	}
	if err := attach(c, t, vol, testInstance, "/dev/xvdaa"); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	readyAt := s.st.Volumes[vol].Attachments[0].ReadyAt
	s.mu.Unlock()
	waitFor(t, "attach delay to pass", func() bool { return time.Now().After(readyAt.Add(50 * time.Millisecond)) })
	if st := attachmentState(t, c, vol, testInstance); st != types.VolumeAttachmentStateAttaching {
		t.Errorf("stuck attachment is %s", st)
	}
	if _, err := c.DetachVolume(ctxT(t), &ec2.DetachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(testInstance)}); err != nil {
		t.Fatal(err)
	}
	waitVolumeState(t, c, vol, types.VolumeStateAvailable)

	resp, err = http.Post(s.URL()+"/debug/faults", "application/json", strings.NewReader(`{"throttleRate":2}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("invalid faults accepted: %d", resp.StatusCode)
	}
}

func TestRateLimitsPerActionClass(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.Limits = Limits{MutatingRate: 0.001, MutatingBurst: 1, DescribeRate: 0.001, DescribeBurst: 2}
	})
	c := newClient(t, s, func(o *clientOpts) { o.attempts = 1 })
	ctx := ctxT(t)
	if _, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(1)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(1)})
	wantCode(t, err, "RequestLimitExceeded")
	// Describes have their own bucket.
	for i := range 2 {
		if _, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); err != nil {
			t.Fatalf("describe %d: %v", i, err)
		}
	}
	_, err = c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{})
	wantCode(t, err, "RequestLimitExceeded")
}
