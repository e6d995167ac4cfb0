package ec2sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
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

func TestPersistenceAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, TimeScale: 0.01, Instances: []Instance{{ID: testInstance, Zone: testZone, Type: "m5.large"}}}
	s1 := startConfig(t, cfg)
	c := newClient(t, s1)
	ctx := ctxT(t)
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1), ClientToken: aws.String("persist-1"),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("CSIVolumeName"), Value: aws.String("pvc-p")}}}}})
	if err := attach(c, t, vol, testInstance, "/dev/xvdaa"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "attached", func() bool { return attachmentState(t, c, vol, testInstance) == types.VolumeAttachmentStateAttached })
	snap, err := c.CreateSnapshot(ctx, &ec2.CreateSnapshotInput{VolumeId: aws.String(vol)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ModifyVolume(ctx, &ec2.ModifyVolumeInput{VolumeId: aws.String(vol), Size: aws.Int32(2)}); err != nil {
		t.Fatal(err)
	}
	before := s1.State()
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := startConfig(t, cfg)
	c2 := newClient(t, s2)
	after := s2.State()
	if len(after.Volumes) != 1 || len(after.Attachments) != 1 || len(after.Snapshots) != 1 || after.Attachments[0].Device != "/dev/xvdaa" {
		t.Fatalf("state after restart %+v (before %+v)", after, before)
	}
	v := describeVolume(t, c2, vol)
	if v.State != types.VolumeStateInUse || len(v.Tags) != 1 {
		t.Errorf("volume after restart %+v", v)
	}
	// The modification goes on where it was, and the token still points at the volume.
	waitFor(t, "modification completed", func() bool {
		return latestModification(t, c2, vol).ModificationState == types.VolumeModificationStateCompleted
	})
	if aws.ToInt32(describeVolume(t, c2, vol).Size) != 2 {
		t.Error("modification lost across restart")
	}
	waitSnapshot(t, c2, aws.ToString(snap.SnapshotId))
	out, err := c2.CreateVolume(ctx, &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(1), ClientToken: aws.String("persist-1"),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("CSIVolumeName"), Value: aws.String("pvc-p")}}}}})
	if err != nil || aws.ToString(out.VolumeId) != vol {
		t.Errorf("ClientToken after restart: %v %v", out, err)
	}
}

func TestSigV4Verification(t *testing.T) {
	s := startServer(t, func(c *Config) {
		c.Credentials = &Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "right-secret"}
	})
	good := newClient(t, s, func(o *clientOpts) { o.accessKey, o.secretKey = "AKIDTEST", "right-secret" })
	if _, err := good.DescribeVolumes(ctxT(t), &ec2.DescribeVolumesInput{Filters: []types.Filter{{Name: aws.String("tag:CSIVolumeName"), Values: []string{"a b+c/d"}}}}); err != nil {
		t.Fatalf("correctly signed request: %v", err)
	}
	if _, err := good.CreateVolume(ctxT(t), &ec2.CreateVolumeInput{AvailabilityZone: aws.String(testZone), Size: aws.Int32(1),
		TagSpecifications: []types.TagSpecification{{ResourceType: types.ResourceTypeVolume, Tags: []types.Tag{{Key: aws.String("k"), Value: aws.String("ünïcode & spaces=")}}}}}); err != nil {
		t.Fatalf("correctly signed create: %v", err)
	}
	wrongSecret := newClient(t, s, func(o *clientOpts) { o.accessKey, o.secretKey = "AKIDTEST", "wrong-secret" })
	_, err := wrongSecret.DescribeVolumes(ctxT(t), &ec2.DescribeVolumesInput{})
	wantCode(t, err, "AuthFailure")
	wrongKey := newClient(t, s, func(o *clientOpts) { o.accessKey, o.secretKey = "AKIDOTHER", "right-secret" })
	_, err = wrongKey.DescribeVolumes(ctxT(t), &ec2.DescribeVolumesInput{})
	wantCode(t, err, "AuthFailure")
	resp, err := http.Post(s.URL(), "application/x-www-form-urlencoded", strings.NewReader("Action=DescribeVolumes&Version=2016-11-15"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !bytes.Contains(b, []byte("<Code>MissingAuthenticationToken</Code>")) {
		t.Errorf("unsigned request: %d %s", resp.StatusCode, b)
	}
}

func TestWireFormat(t *testing.T) {
	s := startServer(t, nil)
	post := func(body string) (int, string) {
		t.Helper()
		resp, err := http.Post(s.URL(), "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	tests := []struct {
		name, body string
		status     int
		contains   []string
	}{
		{"unknown action", "Action=LaunchRockets&Version=2016-11-15", 400, []string{"<Response><Errors><Error><Code>InvalidAction</Code><Message>The action LaunchRockets is not valid for this web service.</Message></Error></Errors><RequestID>"}},
		{"no action", "Version=2016-11-15", 400, []string{"<Code>MissingAction</Code>"}},
		{"bad form", "Action=%zz", 400, []string{"<Code>MalformedQueryString</Code>"}},
		{"missing parameter", "Action=DeleteVolume&Version=2016-11-15", 400, []string{"<Code>MissingParameter</Code>", "volumeId"}},
		{"success envelope", "Action=DescribeAvailabilityZones&Version=2016-11-15", 200, []string{
			`<DescribeAvailabilityZonesResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/"><requestId>`,
			"<availabilityZoneInfo><item><zoneName>us-east-1a</zoneName>", "</DescribeAvailabilityZonesResponse>"}},
		{"delete returns true", "Action=DeleteTags&Version=2016-11-15&ResourceId.1=vol-00000000000000001", 400, []string{"InvalidVolume.NotFound"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, body := post(tt.body)
			if status != tt.status {
				t.Errorf("status %d, want %d: %s", status, tt.status, body)
			}
			for _, c := range tt.contains {
				if !strings.Contains(body, c) {
					t.Errorf("body lacks %q: %s", c, body)
				}
			}
		})
	}
	resp, err := http.Get(s.URL() + "/")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("GET /: %d", resp.StatusCode)
	}
	if got := metricValue(t, s, "unknown", "InvalidAction"); got != "1" {
		t.Errorf("unknown actions counted %s", got)
	}
	resp, err = http.Get(s.URL() + "/debug/state")
	if err != nil {
		t.Fatal(err)
	}
	var st StateDump
	err = json.NewDecoder(resp.Body).Decode(&st)
	_ = resp.Body.Close()
	if err != nil || st.Volumes == nil || st.Snapshots == nil || st.Attachments == nil {
		t.Errorf("/debug/state: %+v %v", st, err)
	}
}

// FuzzRequest posts arbitrary bodies to the EC2 endpoint: every answer must be a well-formed EC2 answer,
// never a panic or a dropped connection.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		"Action=CreateVolume&AvailabilityZone=us-east-1a&Size=1&VolumeType=gp3&Iops=2147483647&DryRun=true",
		"Action=DescribeVolumes&Filter.1.Name=tag%3AK&Filter.1.Value.1=*&MaxResults=5&NextToken=abc",
		"Action=AttachVolume&VolumeId=vol-1&InstanceId=i-0123456789abcdef0&Device=/dev/xvdaa",
		"Action=ModifyVolume&VolumeId=vol-00000000000000001&Size=-5",
		"Action=CreateTags&ResourceId.1=snap-1&Tag.1.Key=a",
		"Action=DescribeSnapshots&SnapshotId.1=snap-zz&Owner.1=self",
		"Action=EnableFastSnapshotRestores&AvailabilityZone.1=us-east-1a&SourceSnapshotId.1=snap-1",
		"Action=DescribeInstances&InstanceId.1=i-&MaxResults=99999999999999999999",
		"Action=CopyVolumes&SourceVolumeId=vol-0&Size=1",
	} {
		f.Add(seed)
	}
	s := startServer(f, nil)
	f.Fuzz(func(t *testing.T, body string) {
		resp, err := http.Post(s.URL(), "application/x-www-form-urlencoded", strings.NewReader(body))
		if err != nil {
			t.Fatalf("request failed: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK && !bytes.Contains(b, []byte("<Response><Errors><Error><Code>")) {
			t.Fatalf("status %d without EC2 error XML: %s", resp.StatusCode, b)
		}
	})
}

func TestRestartRemovesOrphanedFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := Config{DataDir: dir, TimeScale: 0.01}
	s := startConfig(t, cfg)
	c := newClient(t, s)
	vol := createVolume(t, c, &ec2.CreateVolumeInput{Size: aws.Int32(1)})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	orphans := []string{
		filepath.Join(dir, "volumes", "vol-00000000000000001.img"),
		filepath.Join(dir, "volumes", "vol-00000000000000002.img.tmp"),
		filepath.Join(dir, "snapshots", "snap-00000000000000001.img"),
	}
	for _, p := range orphans {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s2 := startConfig(t, cfg)
	for _, p := range orphans {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s survived the restart (%v)", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "volumes", vol+".img")); err != nil {
		t.Errorf("the known volume's file: %v", err)
	}
	if st := s2.State(); len(st.Volumes) != 1 {
		t.Errorf("volumes after restart: %+v", st.Volumes)
	}
}
