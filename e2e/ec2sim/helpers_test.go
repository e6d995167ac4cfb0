package ec2sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"k8s.io/klog/v2/ktesting"

	"github.com/stowage-csi/stowage/e2e/rig"
)

const (
	testInstance  = "i-0123456789abcdef0"
	testInstance2 = "i-0fedcba9876543210"
	testZone      = "us-east-1a"
)

// startServer runs an emulator at a fast time scale for the test, closed (and its devices released) at the end.
func startServer(t testing.TB, mod func(*Config)) *Server {
	t.Helper()
	cfg := Config{
		DataDir:   t.TempDir(),
		TimeScale: 0.01,
		Instances: []Instance{
			{ID: testInstance, Zone: testZone, Type: "m5.large"},
			{ID: testInstance2, Zone: "us-east-1b", Type: "m5.large"},
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	return startConfig(t, cfg)
}

func startConfig(t testing.TB, cfg Config) *Server {
	t.Helper()
	return startClock(t, cfg, time.Now)
}

// fakeClock is a clock tests move by hand, so every state transition is observed deterministically.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// startFake runs an emulator with EC2's real delays on a fake clock.
func startFake(t *testing.T, mod func(*Config)) (*Server, *fakeClock) {
	t.Helper()
	clk := &fakeClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	cfg := Config{
		DataDir: t.TempDir(),
		Instances: []Instance{
			{ID: testInstance, Zone: testZone, Type: "m5.large"},
			{ID: testInstance2, Zone: "us-east-1b", Type: "m5.large"},
		},
	}
	if mod != nil {
		mod(&cfg)
	}
	return startClock(t, cfg, clk.Now), clk
}

func startClock(t testing.TB, cfg Config, clock func() time.Time) *Server {
	t.Helper()
	ctx := context.Background()
	// A fuzz target's logger may not be used from inside the fuzz function; klog's global one can.
	if _, fuzzing := t.(*testing.F); !fuzzing {
		cfg.Logger, ctx = ktesting.NewTestContext(t)
	}
	s, err := start(ctx, cfg, clock)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

type clientOpts struct {
	attempts  int
	accessKey string
	secretKey string
}

// newClient is the real aws-sdk-go-v2 EC2 client pointed at the emulator, with quick retries.
func newClient(t *testing.T, s *Server, opts ...func(*clientOpts)) *ec2.Client {
	t.Helper()
	o := clientOpts{attempts: 3, accessKey: "AKIDEXAMPLE", secretKey: "secret"}
	for _, f := range opts {
		f(&o)
	}
	return ec2.New(ec2.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL()),
		Credentials:  credentials.NewStaticCredentialsProvider(o.accessKey, o.secretKey, ""),
		Retryer: retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = o.attempts
			so.RateLimiter = ratelimit.None
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 5 * time.Millisecond, nil })
		}),
	})
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// apiCode returns the EC2 error code and message of err, failing the test when err is not an API error.
func apiCode(t *testing.T, err error) (string, string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want an EC2 API error, got %v", err)
	}
	return ae.ErrorCode(), ae.ErrorMessage()
}

func wantCode(t *testing.T, err error, code string) string {
	t.Helper()
	if err == nil {
		t.Fatalf("want error %s, got success", code)
	}
	got, msg := apiCode(t, err)
	if got != code {
		t.Fatalf("want error %s, got %s: %s", code, got, msg)
	}
	return msg
}

// waitTimeout bounds every wait on the emulator; its delays at the tests' time scales are milliseconds.
const waitTimeout = 30 * time.Second

// findVolume describes one volume.
func findVolume(ctx context.Context, c *ec2.Client, id string) (types.Volume, error) {
	out, err := c.DescribeVolumes(ctx, &ec2.DescribeVolumesInput{VolumeIds: []string{id}})
	if err != nil {
		return types.Volume{}, fmt.Errorf("DescribeVolumes %s: %w", id, err)
	}
	if len(out.Volumes) != 1 {
		return types.Volume{}, fmt.Errorf("DescribeVolumes %s: %d volumes", id, len(out.Volumes))
	}
	return out.Volumes[0], nil
}

func describeVolume(t *testing.T, c *ec2.Client, id string) types.Volume {
	t.Helper()
	v, err := findVolume(ctxT(t), c, id)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// waitVolume describes the volume until cond holds, and returns it as it was then.
func waitVolume(t *testing.T, c *ec2.Client, id, what string, cond func(types.Volume) bool) types.Volume {
	t.Helper()
	var v types.Volume
	rig.Eventually(t, ctxT(t), waitTimeout, id+" "+what, func(ctx context.Context) (bool, error) {
		var err error
		v, err = findVolume(ctx, c, id)
		return err == nil && cond(v), err
	})
	return v
}

func waitVolumeState(t *testing.T, c *ec2.Client, id string, state types.VolumeState) types.Volume {
	t.Helper()
	return waitVolume(t, c, id, string(state), func(v types.Volume) bool { return v.State == state })
}

// waitAttached waits until the volume's attachment to the instance is complete.
func waitAttached(t *testing.T, c *ec2.Client, volID, instID string) {
	t.Helper()
	waitVolume(t, c, volID, "attached to "+instID, func(v types.Volume) bool {
		return attachmentOf(v, instID) == types.VolumeAttachmentStateAttached
	})
}

func createVolume(t *testing.T, c *ec2.Client, in *ec2.CreateVolumeInput) string {
	t.Helper()
	if in.AvailabilityZone == nil && in.AvailabilityZoneId == nil {
		in.AvailabilityZone = aws.String(testZone)
	}
	out, err := c.CreateVolume(ctxT(t), in)
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	waitVolumeState(t, c, *out.VolumeId, types.VolumeStateAvailable)
	return *out.VolumeId
}

// createSnapshot starts a snapshot of volID and returns its ID (the snapshot may still be pending).
func createSnapshot(t *testing.T, c *ec2.Client, volID string) string {
	t.Helper()
	out, err := c.CreateSnapshot(ctxT(t), &ec2.CreateSnapshotInput{VolumeId: aws.String(volID)})
	if err != nil {
		t.Fatalf("CreateSnapshot: %v", err)
	}
	return aws.ToString(out.SnapshotId)
}

func attachmentState(t *testing.T, c *ec2.Client, volID, instID string) types.VolumeAttachmentState {
	t.Helper()
	return attachmentOf(describeVolume(t, c, volID), instID)
}

// attachmentOf is the state of the volume's attachment to the instance; detached when it has none.
func attachmentOf(v types.Volume, instID string) types.VolumeAttachmentState {
	for _, a := range v.Attachments {
		if aws.ToString(a.InstanceId) == instID {
			return a.State
		}
	}
	return types.VolumeAttachmentStateDetached
}

// httpDo sends one plain HTTP request to the emulator's endpoint and returns the status and the whole body.
func httpDo(t *testing.T, s *Server, method, path, body string) (int, string) {
	t.Helper()
	resp := httpResponse(t, s, method, path, body)
	return resp.status, resp.body
}

type httpAnswer struct {
	status      int
	contentType string
	body        string
}

func httpResponse(t *testing.T, s *Server, method, path, body string) httpAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the body: %v", method, path, err)
	}
	return httpAnswer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: string(b)}
}
