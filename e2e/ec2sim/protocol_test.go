package ec2sim

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

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
	// A signature made an hour ago has expired, even with the right secret.
	body := "Action=DescribeVolumes&Version=2016-11-15"
	req, err := http.NewRequest(http.MethodPost, s.URL(), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	sum := sha256.Sum256([]byte(body))
	err = v4.NewSigner().SignHTTP(ctxT(t), aws.Credentials{AccessKeyID: "AKIDTEST", SecretAccessKey: "right-secret"}, req,
		hex.EncodeToString(sum[:]), "ec2", "us-east-1", time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	old, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(old.Body)
	_ = old.Body.Close()
	if old.StatusCode != http.StatusBadRequest || !bytes.Contains(b, []byte("<Code>RequestExpired</Code>")) {
		t.Errorf("expired signature: %d %s", old.StatusCode, b)
	}

	resp, err := http.Post(s.URL(), "application/x-www-form-urlencoded", strings.NewReader("Action=DescribeVolumes&Version=2016-11-15"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
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
	if got := metricValue(t, s, "unknown", "InvalidAction"); got != "1" {
		t.Errorf("unknown actions counted %s", got)
	}
	if got := metricValue(t, s, "unknown", "MalformedQueryString"); got != "1" {
		t.Errorf("malformed forms counted %s", got)
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
		"Action=LockSnapshot&SnapshotId=snap-0&LockMode=compliance&ExpirationDate=2030-01-01T00:00:00Z&CoolOffPeriod=5",
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
