package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"

	"github.com/stowage-csi/stowage/e2e/rig"
)

// scrape reads /metrics.
func scrape(ctx context.Context, s *Server) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+"/metrics", nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s: %s", resp.Status, b)
	}
	return string(b), nil
}

// requestSamples are the ec2sim_requests_total lines of a scrape.
func requestSamples(metrics string) []string {
	var out []string
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "ec2sim_requests_total{") {
			out = append(out, line)
		}
	}
	return out
}

// metricValue reads one ec2sim_requests_total sample from /metrics ("0" when there is none).
func metricValue(t *testing.T, s *Server, action, code string) string {
	t.Helper()
	m, err := scrape(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	prefix := `ec2sim_requests_total{action="` + action + `",code="` + code + `"} `
	for _, line := range requestSamples(m) {
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
	// The added latency outlasts the test, so the call can only end by the client giving up.
	s := startServer(t, func(c *Config) { c.Faults = Faults{Latency: time.Hour, Actions: []string{"DescribeVolumes"}} })
	c := newClient(t, s, func(o *clientOpts) { o.attempts = 1 })
	ctx, cancel := context.WithTimeout(ctxT(t), time.Second)
	defer cancel()
	if _, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a call held by the added latency gave %v, want the client's deadline", err)
	}
	// The request did reach the emulator, which held it until the client went away.
	rig.Eventually(t, ctxT(t), waitTimeout, "the held DescribeVolumes to be counted", func(ctx context.Context) (bool, error) {
		m, err := scrape(ctx, s)
		return strings.Contains(m, `ec2sim_requests_total{action="DescribeVolumes",code="OK"} 1`), err
	})
	if _, err := c.DescribeInstances(ctxT(t), &ec2.DescribeInstancesInput{}); err != nil {
		t.Errorf("unaffected action: %v", err)
	}
}

func TestStuckAttachment(t *testing.T) {
	s, clk := startFake(t, nil)
	c := newClient(t, s)
	ctx := ctxT(t)
	out, err := c.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	vol := aws.ToString(out.VolumeId)
	clk.Advance(createMax)
	if status, body := httpDo(t, s, http.MethodPost, "/debug/faults", `{"stuckAttach":true}`); status != http.StatusOK || !s.Faults().StuckAttach {
		t.Fatalf("POST /debug/faults: %d %s, faults %+v", status, body, s.Faults())
	}
	if err := attach(c, t, vol, testInstance, "/dev/xvdaa"); err != nil {
		t.Fatal(err)
	}
	// Long after EC2's slowest attach, the attachment is still attaching.
	clk.Advance(time.Hour)
	if st := attachmentState(t, c, vol, testInstance); st != types.VolumeAttachmentStateAttaching {
		t.Errorf("stuck attachment is %s an hour later", st)
	}
	if _, err := c.DetachVolume(ctx, &ec2.DetachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(testInstance)}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(detachMax)
	if v := describeVolume(t, c, vol); v.State != types.VolumeStateAvailable {
		t.Errorf("after detaching the stuck attachment: %s", v.State)
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

// TestLostAnswerAppliesTheAction: the action runs and only its answer is lost, so the caller sees a failure
// while EC2 holds the volume (the leak drivers meet in production); the SDK's own retry, with the same
// ClientToken, is answered with that volume instead of a second one; a Describe never "loses" an answer.
func TestLostAnswerAppliesTheAction(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.Faults = Faults{Actions: []string{"CreateVolume", "DescribeVolumes"}, LostAnswerRate: 1, Budget: 1, Seed: 42}
	})
	noRetry := newClient(t, s, func(o *clientOpts) { o.attempts = 1 })
	in := &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(1), VolumeType: "gp3"}
	if _, err := noRetry.CreateVolume(ctxT(t), in); err == nil {
		t.Fatal("CreateVolume answered despite the lost answer")
	}
	if n := len(s.State().Volumes); n != 1 {
		t.Fatalf("after a lost answer EC2 holds %d volumes, want the 1 it made", n)
	}
	lost := s.Requests("CreateVolume", "LostAnswerDropped") + s.Requests("CreateVolume", "LostAnswerInternalError")
	if lost != 1 {
		t.Errorf("lost answers counted %d, want 1", lost)
	}
	if n := s.Calls("CreateVolume"); n != 0 {
		t.Errorf("%d CreateVolume calls counted as answered, want 0: the only answer was lost", n)
	}

	s.SetFaults(Faults{Actions: []string{"CreateVolume"}, LostAnswerRate: 1, Budget: 1})
	c := newClient(t, s)
	in.ClientToken = aws.String("lost-once")
	out, err := c.CreateVolume(ctxT(t), in)
	if err != nil {
		t.Fatalf("SDK retry after a lost answer: %v", err)
	}
	if n := len(s.State().Volumes); n != 2 {
		t.Errorf("EC2 holds %d volumes, want 2: the retry with the same token must answer %s, not make another", n, aws.ToString(out.VolumeId))
	}
	// Its first attempt ran and lost its answer, the retry was answered: two attempts, one call.
	if n := s.Calls("CreateVolume"); n != 1 {
		t.Errorf("CreateVolume calls counted %d, want 1 (one SDK call, whose retry was answered)", n)
	}

	s.SetFaults(Faults{LostAnswerRate: 1})
	if _, err := noRetry.DescribeVolumes(ctxT(t), &ec2.DescribeVolumesInput{}); err != nil {
		t.Errorf("DescribeVolumes lost its answer: %v", err)
	}
}

// TestFaultsReplayFromSeed: the same seed gives the same faults and the same slowed calls for the same
// requests in the same order, and the seed picked when none was given is reported, so a failing run can be
// replayed.
func TestFaultsReplayFromSeed(t *testing.T) {
	f := Faults{ThrottleRate: 0.3, InternalErrorRate: 0.2, DropRate: 0.1, LostAnswerRate: 0.3,
		Slow: map[string]SlowCalls{"CreateVolume": {Rate: 0.4, Latency: time.Nanosecond}}}
	type draw struct {
		kind faultKind
		slow bool
	}
	sequence := func(fi *faultInjector) []draw {
		out := make([]draw, 200)
		for i := range out {
			d := fi.decide("CreateVolume", i%3 != 0)
			out[i].kind, out[i].slow = d.kind, d.slowed
		}
		return out
	}
	picked := newFaultInjector(f).currentSeed()
	if picked == 0 {
		t.Fatal("no seed reported")
	}
	f.Seed = picked
	a, b := sequence(newFaultInjector(f)), sequence(newFaultInjector(f))
	if !slices.Equal(a, b) {
		t.Fatalf("seed %d gave two sequences:\n%v\n%v", picked, a, b)
	}
	kinds, slowed := map[faultKind]bool{}, map[bool]int{}
	for _, d := range a {
		kinds[d.kind] = true
		slowed[d.slow]++
	}
	for _, k := range []faultKind{faultNone, faultThrottle, faultInternal, faultDrop, faultLostDrop, faultLostInternal} {
		if !kinds[k] {
			t.Errorf("200 requests never drew fault kind %d", k)
		}
	}
	if slowed[true] < 40 || slowed[false] < 40 {
		t.Errorf("at rate 0.4, %d of 200 calls were slowed", slowed[true])
	}
	f.Seed = picked + 1
	if slices.Equal(a, sequence(newFaultInjector(f))) {
		t.Errorf("seeds %d and %d gave the same 200 faults", picked, picked+1)
	}
}

// TestSlowFaultHoldsOnlyItsAction: Slow holds the calls of the action it names (here every AttachVolume,
// for longer than the test) whatever Actions selects, counts them, and leaves every other action as fast as
// before; a Slow entry naming no action of the emulator, or with a rate outside [0, 1], is refused.
func TestSlowFaultHoldsOnlyItsAction(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.Faults = Faults{Actions: []string{"CreateVolume"}, Slow: map[string]SlowCalls{"AttachVolume": {Rate: 1, Latency: time.Hour}}}
	})
	c := newClient(t, s, func(o *clientOpts) { o.attempts = 1 })
	vol := createVolume(t, c, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(1)})
	waitVolumeState(t, c, vol, types.VolumeStateAvailable)
	ctx, cancel := context.WithTimeout(ctxT(t), time.Second)
	defer cancel()
	_, err := c.AttachVolume(ctx, &ec2.AttachVolumeInput{VolumeId: aws.String(vol), InstanceId: aws.String(testInstance), Device: aws.String("/dev/xvdaa")})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a slowed AttachVolume gave %v, want the client's deadline", err)
	}
	// The call is counted when it is held, before it is served.
	if n := s.Slowed("AttachVolume"); n != 1 {
		t.Errorf("slowed AttachVolume calls counted %d, want 1", n)
	}
	if n := s.Slowed("CreateVolume") + s.Slowed("DescribeVolumes"); n != 0 {
		t.Errorf("%d calls of other actions counted as slowed", n)
	}
	m, err := scrape(ctxT(t), s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(m, `ec2sim_slowed_requests_total{action="AttachVolume"} 1`) {
		t.Errorf("/metrics has no slowed AttachVolume sample")
	}
	for _, body := range []string{`{"slow":{"AttachVolumes":{"rate":1,"latency":1}}}`, `{"slow":{"AttachVolume":{"rate":2,"latency":1}}}`,
		`{"slow":{"AttachVolume":{"rate":1,"latency":0}}}`} {
		if status, answer := httpDo(t, s, http.MethodPost, "/debug/faults", body); status != http.StatusBadRequest {
			t.Errorf("POST /debug/faults %s: %d %s, want 400", body, status, answer)
		}
	}
	if status, answer := httpDo(t, s, http.MethodPost, "/debug/faults", `{"slow":{"AttachVolume":{"rate":0.5,"latency":1000}}}`); status != http.StatusOK ||
		s.Faults().Slow["AttachVolume"] != (SlowCalls{Rate: 0.5, Latency: time.Microsecond}) {
		t.Errorf("POST /debug/faults with a valid slow entry: %d %s, faults %+v", status, answer, s.Faults())
	}
}
